"""Scaled dot-product attention with inputs the fused CUDA kernels can read.

``F.scaled_dot_product_attention`` dispatches on CUDA to flash,
memory-efficient or cuDNN kernels that load q, k, v and the mask in 16-byte
vectors. They assume the last dimension contiguous and every other stride
and the storage offset a multiple of 16 bytes; a view that breaks this (a
slice of a fused projection whose rows are ``3C + n`` elements long) is not
always caught by the dispatcher, and the kernel then fails with "CUDA
error: misaligned address", killing the process. On CPU nothing fails, so
the rule is enforced here and checked by ``tests/test_fused_attention_layout.py``
on CPU.

The modules lay their tensors out to meet the rule in the first place
(ctxsan pads its fused projection's rows to a multiple of 8 elements; DC's
additive mask is built in a padded buffer): :func:`aligned` then returns
its input unchanged, and only a layout nobody planned for costs a copy.

Which kernel runs: the SDPA policy
----------------------------------
torch picks one of its SDPA kernels per call, in a priority order among the
enabled ones (``torch._fused_sdp_choice``). NMT batches have a new shape
(sentences x source length x target length) nearly every update, and a
kernel that prepares itself per shape pays that preparation on nearly
every update: on sm90/sm100 GPUs (H100, H200, B200) with a recent cuDNN,
recent torch puts its cuDNN kernel first (unless
``TORCH_CUDNN_SDPA_DEPRIORITIZED=1``; earlier torch read
``TORCH_CUDNN_SDPA_PREFERRED=0``), and cuDNN builds an execution plan for
each new shape.
Which kernel is fastest for such batches is a property of the GPU, torch
and cuDNN, so it is a setting, ``FAIRSEQ_CTX_SDPA`` (:data:`POLICIES`):

* ``no-cudnn`` (the default): the cuDNN kernel disabled; torch picks among
  flash, memory-efficient and math as before it preferred cuDNN. Measured
  on an H200 (torch 2.11, cuDNN 9.19, 2026-11-30; benchmarks/gpu/diagnosis):
  torch's own choice ran cuDNN and took 1,056 ms per Base Transformer
  update on new shapes in bf16 (993 in fp16) against 86 (67) with cuDNN
  disabled, and was no faster on shapes seen before (102 vs 87 ms; 67 vs
  55); the policies without cuDNN first were within the measurement's
  noise of each other. On GPUs where torch does not put cuDNN first it
  changes nothing that runs.
* ``torch``: torch's own choice, nothing touched.
* ``cudnn-last``: every kernel enabled, cuDNN tried only where flash and
  memory-efficient attention cannot take the call (torch's order before it
  preferred cuDNN). torch installs its cuDNN-first order at its first SDPA
  call on such a GPU, over any order set before it (``priority_order`` in
  ``sdp_utils.cpp``), unless its environment says not to: the policy sets
  ``TORCH_CUDNN_SDPA_DEPRIORITIZED=1`` (what current torch reads) and
  ``TORCH_CUDNN_SDPA_PREFERRED=0`` (what earlier torch read).
* ``flash``, ``efficient``, ``cudnn``, ``math``: that kernel forced, with
  the math kernel as the fallback for calls it cannot take (flash takes no
  mask, cuDNN no float32), first in the priority order so that it runs
  wherever it can.

The policy is process-wide: torch's flags are global, and setting them
once (when the plugin registers, :func:`ensure_policy`) puts fairseq's own
attention (``F.multi_head_attention_forward``, which our models use beside
their own modules, and which a plain ``transformer`` baseline uses alone)
under the same choice as ours, so a benchmark compares like with like.
A scoped ``torch.nn.attention.sdpa_kernel`` (the GPU tests force kernels
that way) still overrides it inside its block. Per-call contexts were not
used: they would override exactly those scopes. :func:`recorded_kernels`
names the kernels that really ran, from the profiler's operator names (the
math kernel included, which ``torch._fused_sdp_choice`` reports only for a
given input).
"""
import contextlib
import os
from collections import Counter
from typing import Dict, Optional

import torch
import torch.nn.functional as F
from torch import Tensor

ALIGN_BYTES = 16

SDPA_ENV = "FAIRSEQ_CTX_SDPA"
DEFAULT_POLICY = "no-cudnn"
# what keeps torch from installing its cuDNN-first order at its first SDPA
# call: the variable current torch reads, and the one earlier torch read
CUDNN_DEPRIORITIZED_ENV = {"TORCH_CUDNN_SDPA_DEPRIORITIZED": "1", "TORCH_CUDNN_SDPA_PREFERRED": "0"}
# policy -> (kernels enabled, kernels first in the priority order); None: nothing touched
POLICIES: Dict[str, Optional[tuple]] = {
    "torch": None,
    "cudnn-last": (("flash", "efficient", "cudnn", "math"), ("flash", "efficient", "cudnn", "math")),
    "no-cudnn": (("flash", "efficient", "math"), ("flash", "efficient", "math")),
    "flash": (("flash", "math"), ("flash", "math")),
    "efficient": (("efficient", "math"), ("efficient", "math")),
    "cudnn": (("cudnn", "math"), ("cudnn", "math")),
    "math": (("math",), ("math",)),
}
# kernel name -> (torch.backends.cuda switch, torch.nn.attention.SDPBackend member)
_KERNELS = {"flash": ("flash_sdp", "FLASH_ATTENTION"), "efficient": ("mem_efficient_sdp", "EFFICIENT_ATTENTION"),
            "cudnn": ("cudnn_sdp", "CUDNN_ATTENTION"), "math": ("math_sdp", "MATH")}
# the profiler's operator names of the kernels (forward; "<name>_backward" for their backward passes);
# math has no backward operator of its own (autograd of its decomposition)
KERNEL_OPS = {
    "aten::_scaled_dot_product_flash_attention": "flash",
    "aten::_scaled_dot_product_flash_attention_backward": "flash_backward",
    "aten::_scaled_dot_product_efficient_attention": "efficient",
    "aten::_scaled_dot_product_efficient_attention_backward": "efficient_backward",
    "aten::_scaled_dot_product_cudnn_attention": "cudnn",
    "aten::_scaled_dot_product_cudnn_attention_backward": "cudnn_backward",
    "aten::_scaled_dot_product_attention_math": "math",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "cpu_fused",
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": "cpu_fused_backward",
    "aten::_scaled_dot_product_fused_attention_overrideable": "overrideable",
    "aten::scaled_dot_product_attention": "calls",
}


def is_aligned(t: Tensor) -> bool:
    """Whether the fused kernels can read ``t`` in 16-byte vectors."""
    size = t.element_size()
    if t.dim() and t.size(-1) > 1 and t.stride(-1) != 1:
        return False
    if (t.storage_offset() * size) % ALIGN_BYTES:
        return False
    # dimensions of size 1 are never stepped over, stride 0 re-reads one row
    return all(t.size(d) == 1 or (t.stride(d) * size) % ALIGN_BYTES == 0 for d in range(t.dim() - 1))


def padded_empty(*shape: int, dtype: torch.dtype, device) -> Tensor:
    """An uninitialised tensor of ``shape`` whose rows start on 16-byte
    boundaries: a view into a buffer with the last dimension rounded up."""
    per = ALIGN_BYTES // torch.empty((), dtype=dtype).element_size()
    last = shape[-1]
    width = -(-last // per) * per
    return torch.empty(*shape[:-1], width, dtype=dtype, device=device)[..., :last]


def aligned(t: Tensor) -> Tensor:
    """``t`` itself when :func:`is_aligned`, else a copy that is."""
    if is_aligned(t):
        return t
    out = padded_empty(*t.shape, dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


def attend_mask(key_padding_mask: Optional[Tensor], T: int, S: int, causal: bool, device) -> Optional[Tensor]:
    """The boolean SDPA mask, True where a query may attend a key, in a
    16-byte aligned buffer: ``(B|1) x 1 x (T|1) x S`` (batch 1 without
    padding, one query row without ``causal``).

    ``key_padding_mask`` (``B x S``, True at padding) hides padded keys;
    ``causal`` hides the future: the T queries are the last T of the S key
    positions, so query t sees key s when ``s <= S - T + t``. None when
    neither applies.
    """
    if key_padding_mask is None and not causal:
        return None
    B = 1 if key_padding_mask is None else key_padding_mask.size(0)
    rows = T if causal else 1
    out = padded_empty(B, 1, rows, S, dtype=torch.bool, device=device)
    if causal:
        out.copy_(torch.ones(rows, S, dtype=torch.bool, device=device).tril(S - T))
    else:
        out.fill_(True)
    if key_padding_mask is not None:
        out &= ~key_padding_mask[:, None, None, :]
    return out


def dropout_p(dropout_module) -> float:
    """The dropout probability for attention probabilities in this call,
    from a fairseq ``FairseqDropout``: its ``p`` in training, and in
    evaluation where fairseq-generate's ``--retain-dropout`` (and
    ``--retain-dropout-modules``) turned it on through
    ``make_generation_fast_``, as fairseq's ``MultiheadAttention`` passes
    ``training=self.training or self.dropout_module.apply_during_inference``."""
    on = dropout_module.training or dropout_module.apply_during_inference
    return dropout_module.p if on else 0.0


def attention(q: Tensor, k: Tensor, v: Tensor, attn_mask: Optional[Tensor] = None, dropout_p: float = 0.0,
              is_causal: bool = False) -> Tensor:
    """``F.scaled_dot_product_attention`` (``B x H x T x hd`` inputs) with
    every input :func:`aligned`, under the process's SDPA policy."""
    if not _policy_applied:  # registering the plugin applies it; a model used without it still gets it
        ensure_policy()
    return F.scaled_dot_product_attention(
        aligned(q), aligned(k), aligned(v), attn_mask=None if attn_mask is None else aligned(attn_mask),
        dropout_p=dropout_p, is_causal=is_causal)


# ---------------------------------------------------------------- the SDPA policy

_policy_applied = False


def policy_from_env() -> str:
    """The policy ``FAIRSEQ_CTX_SDPA`` names (:data:`DEFAULT_POLICY` when
    unset or empty); a name not in :data:`POLICIES` is refused with one line."""
    name = os.environ.get(SDPA_ENV, "").strip() or DEFAULT_POLICY
    if name not in POLICIES:
        from fairseq_ctx.errors import ConfigError

        raise ConfigError(f"{SDPA_ENV}={name}: not an SDPA policy (one of {', '.join(POLICIES)})")
    return name


def ensure_policy() -> str:
    """Apply the environment's policy once per process (idempotent); its name."""
    global _policy_applied
    name = policy_from_env()
    if not _policy_applied:
        apply_policy(name)
        _policy_applied = True
    return name


def apply_policy(name: str) -> None:
    """Set torch's SDPA switches and priority order for policy ``name``
    (``torch``: nothing). Process-wide; :func:`sdpa_state` and
    :func:`restore_sdpa_state` save and put back what was there."""
    if name not in POLICIES:
        from fairseq_ctx.errors import ConfigError

        raise ConfigError(f"{SDPA_ENV}={name}: not an SDPA policy (one of {', '.join(POLICIES)})")
    spec = POLICIES[name]
    if spec is None:
        return
    from torch.nn.attention import SDPBackend

    enabled, first = spec
    if name == "cudnn-last":
        # read once, at torch's first SDPA call on a GPU, which then installs the cuDNN-first order over ours
        os.environ.update(CUDNN_DEPRIORITIZED_ENV)
    for kernel, (switch, _) in _KERNELS.items():
        getattr(torch.backends.cuda, "enable_" + switch)(kernel in enabled)
    _set_priority([getattr(SDPBackend, _KERNELS[k][1]) for k in first])


def _set_priority(first) -> None:
    """Put ``first`` (SDPBackend members) at the head of torch's priority
    order, the others after them in their order (what ``sdpa_kernel(...,
    set_priority=True)`` does); nothing on a torch without the order."""
    if not hasattr(torch._C, "_set_sdp_priority_order"):
        return
    order = [int(b) for b in first]
    order += [b for b in torch._C._get_sdp_priority_order() if b not in order]
    torch._C._set_sdp_priority_order(order)


def sdpa_state() -> dict:
    """torch's SDPA switches and priority order (names), as JSON."""
    from torch.nn.attention import SDPBackend

    state = {k: bool(getattr(torch.backends.cuda, switch + "_enabled")()) for k, (switch, _) in _KERNELS.items()}
    names = {int(member): name.lower() for name, member in SDPBackend.__members__.items()}
    names.update({int(getattr(SDPBackend, member)): k for k, (_, member) in _KERNELS.items()})
    order = torch._C._get_sdp_priority_order() if hasattr(torch._C, "_get_sdp_priority_order") else []
    state["priority"] = [names.get(int(b), str(int(b))) for b in order]
    return state


def restore_sdpa_state(state: dict) -> None:
    """Put back what :func:`sdpa_state` returned."""
    from torch.nn.attention import SDPBackend

    for kernel, (switch, _) in _KERNELS.items():
        getattr(torch.backends.cuda, "enable_" + switch)(state[kernel])
    members = {k: getattr(SDPBackend, member) for k, (_, member) in _KERNELS.items()}
    _set_priority([members[k] for k in state["priority"] if k in members])


@contextlib.contextmanager
def recorded_kernels():
    """Inside the block, counts of the SDPA kernels that ran (a Counter
    filled when the block ends): ``calls`` (every SDPA call, ours and
    fairseq's), ``flash``/``efficient``/``cudnn``/``math``/``cpu_fused``
    forward and ``<kernel>_backward``, by the profiler's operator names
    (:data:`KERNEL_OPS`). The profiler costs time: record an untimed step."""
    from torch.profiler import ProfilerActivity, profile

    counts = Counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        yield counts
    for event in prof.key_averages():
        if event.key in KERNEL_OPS:
            counts[KERNEL_OPS[event.key]] += event.count
