"""The SDPA policy of ``fairseq_ctx/modules/fused_attention.py``
(``FAIRSEQ_CTX_SDPA``): each policy sets torch's kernel switches and
priority order as documented, the kernels that then run are the ones the
profiler names, the attention's values do not change, a policy given in the
environment reaches every attention call of a ``--user-dir`` process
(fairseq's own included), and a bad name is one line naming the variable.
On CPU torch has two kernels (its fused CPU kernel, which the flash switch
governs, and math); the GPU tests check the CUDA kernels.
"""
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from fairseq_ctx.modules import fused_attention
from tests.utils import REPO


@pytest.fixture
def saved_state(monkeypatch):
    """torch's SDPA state and the cuDNN-priority variables put back after the test."""
    for var in fused_attention.CUDNN_DEPRIORITIZED_ENV:
        monkeypatch.delenv(var, raising=False)
    state = fused_attention.sdpa_state()
    yield state
    fused_attention.restore_sdpa_state(state)


# policy -> (switches on, head of the priority order), as the module's docstring describes them
EXPECTED = {
    "cudnn-last": ({"flash", "efficient", "cudnn", "math"}, ["flash", "efficient", "cudnn", "math"]),
    "no-cudnn": ({"flash", "efficient", "math"}, ["flash", "efficient", "math"]),
    "flash": ({"flash", "math"}, ["flash", "math"]),
    "efficient": ({"efficient", "math"}, ["efficient", "math"]),
    "cudnn": ({"cudnn", "math"}, ["cudnn", "math"]),
    "math": ({"math"}, ["math"]),
}
# the kernel that runs on CPU: the fused CPU kernel where the flash switch allows it, else math
ON_CPU = {"torch": "cpu_fused", "cudnn-last": "cpu_fused", "no-cudnn": "cpu_fused", "flash": "cpu_fused",
          "efficient": "math", "cudnn": "math", "math": "math"}


@pytest.mark.unit
@pytest.mark.parametrize("policy", list(fused_attention.POLICIES))
def test_each_policy_sets_the_switches_and_runs_its_kernel(policy, saved_state):
    fused_attention.apply_policy(policy)
    state = fused_attention.sdpa_state()
    if policy == "torch":
        assert state == saved_state  # nothing touched
    else:
        on, head = EXPECTED[policy]
        assert {k for k in ("flash", "efficient", "cudnn", "math") if state[k]} == on
        assert state["priority"][:len(head)] == head
        assert sorted(state["priority"]) == sorted(saved_state["priority"])  # a reordering, nothing lost
    # the variables torch reads before installing its cuDNN-first order (earlier: PREFERRED; current: DEPRIORITIZED)
    assert ({k: os.environ.get(k) for k in ("TORCH_CUDNN_SDPA_DEPRIORITIZED", "TORCH_CUDNN_SDPA_PREFERRED")}
            == ({"TORCH_CUDNN_SDPA_DEPRIORITIZED": "1", "TORCH_CUDNN_SDPA_PREFERRED": "0"} if policy == "cudnn-last"
                else {"TORCH_CUDNN_SDPA_DEPRIORITIZED": None, "TORCH_CUDNN_SDPA_PREFERRED": None}))
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 5, 8, generator=g, requires_grad=True) for _ in range(3))
    mask = fused_attention.attend_mask(torch.tensor([[False] * 5, [True, True, False, False, False]]), 5, 5,
                                       causal=False, device="cpu")
    with fused_attention.recorded_kernels() as ran:
        out = fused_attention.attention(q, k, v, attn_mask=mask)
        out.sum().backward()
    kernel = ON_CPU[policy]
    assert ran["calls"] == 1 and ran[kernel] == 1 and sum(ran[x] for x in ("cpu_fused", "math")) == 1, ran
    if kernel == "cpu_fused":
        assert ran["cpu_fused_backward"] == 1
    # the same values whichever kernel ran
    fused_attention.restore_sdpa_state(saved_state)
    with torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.MATH]):
        reference = F.scaled_dot_product_attention(q.detach(), k.detach(), v.detach(), attn_mask=mask)
    assert float((out.detach() - reference).abs().max()) < 1e-5


@pytest.mark.unit
def test_restore_puts_back_what_was_there(saved_state):
    for policy in fused_attention.POLICIES:
        fused_attention.apply_policy(policy)
        fused_attention.restore_sdpa_state(saved_state)
        assert fused_attention.sdpa_state() == saved_state, policy


PROBE = r'''
import json, sys, torch
import fairseq
import fairseq_ctx  # registers, applying FAIRSEQ_CTX_SDPA
from fairseq_ctx.modules import fused_attention
from tests.utils import build_model
torch.manual_seed(0)
out = {}
for arch, flags in (("transformer", []), ("transformer_ctxsan_tiny", ["--ctxsan-side", "both"])):
    model = build_model(arch, flags + ["--encoder-layers", "1", "--decoder-layers", "1", "--encoder-embed-dim", "16",
                                       "--decoder-embed-dim", "16", "--encoder-ffn-embed-dim", "16",
                                       "--decoder-ffn-embed-dim", "16", "--encoder-attention-heads", "2",
                                       "--decoder-attention-heads", "2"]).train()
    src = torch.tensor([[1, 5, 6, 7], [5, 6, 7, 8]])
    with fused_attention.recorded_kernels() as ran:
        model(src, torch.tensor([3, 4]), torch.tensor([[2, 5, 6], [2, 7, 8]]))[0].sum().backward()
    out[arch] = dict(ran)
print(json.dumps(out))
'''


def test_the_environment_policy_reaches_every_attention_call_of_the_process():
    """FAIRSEQ_CTX_SDPA=math in a fresh process that registers the plugin:
    every SDPA call (fairseq's own attention in the baseline, ctxsan's
    through the door) runs the math kernel; unset, the default policy
    (no-cudnn: on CPU, torch's fused CPU kernel)."""
    import json

    env = {k: v for k, v in os.environ.items() if k != "FAIRSEQ_CTX_SDPA"}
    for policy, kernel in (("math", "math"), (None, "cpu_fused")):
        proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=REPO,
                              env={**env, "OMP_NUM_THREADS": "1", **({"FAIRSEQ_CTX_SDPA": policy} if policy else {})})
        assert proc.returncode == 0, proc.stderr[-3000:]
        ran = json.loads(proc.stdout.splitlines()[-1])
        for arch, counts in ran.items():
            assert counts["calls"] > 0 and counts.get(kernel) == counts["calls"], (policy, arch, counts)


def test_an_unknown_policy_is_one_line_naming_the_variable():
    env = {**os.environ, "FAIRSEQ_CTX_SDPA": "fastest"}
    proc = subprocess.run([sys.executable, "-c", "import fairseq, fairseq_ctx"], capture_output=True, text=True,
                          cwd=REPO, env=env)
    assert proc.returncode == 1
    assert proc.stderr.strip() == ("fairseq_ctx: error: FAIRSEQ_CTX_SDPA=fastest: not an SDPA policy (one of torch, "
                                   "cudnn-last, no-cudnn, flash, efficient, cudnn, math)"), proc.stderr
