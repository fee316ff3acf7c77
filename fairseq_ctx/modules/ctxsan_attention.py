"""Context-aware self-attention (Yang et al., AAAI 2019, "Context-Aware
Self-Attention Networks", Eqs. 5-10).

The queries and keys of a self-attention layer are mixed with a projection of
a context vector C through sigmoid gates (Eq. 5, 6)::

    [Q^; K^] = (1 - [lQ; lK]) * [Q; K] + [lQ; lK] * (C [U_Q; U_K])
    [lQ; lK] = sigmoid([Q; K] [V^H_Q; V^H_K] + C [U_Q; U_K] [V^C_Q; V^C_K])

Context types of layer ``l`` (1-based), built from ``H^1 .. H^l``, what
the self-attentions of the same stack were given (the layer inputs, after
the pre-norm if any: :mod:`fairseq_ctx.modules.ctxsan_layer`; see
:class:`ContextHistory`):

* ``global`` (Eq. 8): the mean of ``H^l``; ``d_c = d``.
* ``deep-global`` (Eq. 10): the means of ``H^1 .. H^l`` concatenated; ``d_c = l*d``.
* ``deep`` (Eq. 9): the states ``H^1 .. H^{l-1}`` concatenated position-wise;
  ``d_c = (l-1)*d`` (no deep context in layer 1).
* ``deep-global+deep``: "by simply summing them": ``C U = C_dg U_dg + C_d U_d``,
  one gate on the sum.

The concatenated contexts are not built where autograd records: ``C U`` is
computed as the sum of each layer's block times its rows of ``U`` (same
products, no copy kept for the backward). Without autograd (decoding) the
blocks are concatenated and projected by one GEMM, fewer kernel launches per
step.

Reading of the paper where it is ambiguous (see ``docs/ambiguities.md``):

* ``U_Q``, ``U_K`` are ``d_c x d``; they are stored as one ``d_c x 2d`` matrix
  per context type so ``C [U_Q U_K]`` is one matmul. A global context is one
  vector per sentence, so it is projected once per sentence and broadcast.
* The gate is one scalar per position over the full query (Eq. 6 as printed,
  not the per-head variant of the released code). ``V^C`` multiplies ``C U``,
  so it is ``d x 1`` (the paper's ``d_c x 1`` is a typo). No gate bias (Eq. 6
  has none). For speed, ``V^H`` and ``V^C`` are folded into the Q/K and the
  context projections as extra output columns (``Q V^H = x (W_Q^T V^H) + b_Q
  V^H``), so the gate logits come out of the same matmuls; the parameters and
  the function are exactly Eq. 6. Folding copies the weights, so in eval mode
  without autograd (decoding) the folded weights are kept and reused until a
  parameter changes (see :meth:`ContextAwareSelfAttention.folded_weights`);
  training folds on every call, as gradients must reach the parameters.
* Global means ignore padding; on the decoder side the global context is the
  causal prefix mean (footnote 2), so each position has its own context.
* ``gated=False`` (``--ctxsan-no-gate``) is footnote 1's ablation "without
  {lambda_Q, lambda_K}" (-5.23 BLEU in the paper): ``[Q^; K^] = [Q; K] +
  C [U_Q; U_K]``, no ``V^H``, ``V^C``. The paper does not write the
  ungated equation; taking lambda out of Eq. 5 leaves the sum (a fixed 0.5
  mix would put a constant in its place, the same function up to a rescaling
  of W and U that differs only at initialisation).

Gate values can be read out for analysis (:mod:`fairseq_ctx.modules.readout`):
inside ``with reading(model):`` each forward leaves
``last_readout = {"q": T x B, "k": T x B}`` (only the contextualised ones;
empty in a layer without context) on the module; outside it the gates are
not copied.
"""
from contextlib import contextmanager
from typing import Dict, Iterator, List, Optional, Tuple

import torch
import torch.nn.functional as F
from fairseq.incremental_decoding_utils import with_incremental_state
from fairseq.modules.fairseq_dropout import FairseqDropout
from torch import Tensor, nn

# the choices of --ctxsan-context and --ctxsan-contextualize (written once, torch-free)
from fairseq_ctx.model_options import CTXSAN_CONTEXT_TYPES as CONTEXT_TYPES
from fairseq_ctx.model_options import CTXSAN_CONTEXTUALIZE as CONTEXTUALIZE

from .fused_attention import attend_mask, attention, dropout_p
from .incremental_cache import append_keys_values, reorder_cache
from .readout import Readout


def context_parts(context: str) -> List[str]:
    """The context vectors that are summed for ``context`` (one of CONTEXT_TYPES)."""
    if context == "deep-global+deep":
        return ["deep-global", "deep"]
    return [context]


def context_dim(part: str, layer: int, embed_dim: int) -> int:
    """``d_c`` of context ``part`` at 1-based ``layer`` (0 means: none there)."""
    if part == "global":
        return embed_dim
    if part == "deep-global":
        return layer * embed_dim
    if part == "deep":
        return (layer - 1) * embed_dim
    raise ValueError(f"unknown context part {part!r}")


class ContextHistory(object):
    """The self-attention inputs ``H^1 .. H^l`` of one stack's layers (the
    layer inputs, after the pre-norm if any), and their means.

    ``push(h, padding_mask)`` is called with each layer's ``H^l`` before
    the layer runs, so layer ``l`` sees ``l`` entries (the mask, the same for
    every layer, is taken from the first push). ``states`` keeps the ``T x B x C``
    inputs (deep context, Eq. 9), ``means`` their non-padding means (Eq. 8):

    * encoder (``causal=False``): the sentence mean, ``1 x B x C`` (broadcasts
      over positions);
    * decoder (``causal=True``): the prefix mean up to each position,
      ``T x B x C``. In incremental decoding ``prev_sums`` holds the running
      sums of the earlier steps (``sum{k}``: ``B x C``, ``count``: ``B x 1``,
      both float32 whatever the model's dtype),
      so a step costs the same whatever the prefix length; ``new_sums`` holds
      the sums to store for the next step.
    """

    def __init__(self, need_states: bool, need_means: bool, causal: bool = False,
                 prev_sums: Optional[Dict[str, Optional[Tensor]]] = None, incremental: bool = False):
        self.need_states = need_states
        self.need_means = need_means
        self.causal = causal
        self.incremental = incremental
        self.prev_sums = prev_sums
        self.new_sums: Dict[str, Optional[Tensor]] = {}
        self.states: List[Tensor] = []
        self.means: List[Tensor] = []
        self._weights: Optional[Tensor] = None  # T x B x 1: 1 at real tokens
        self._denom: Optional[Tensor] = None  # (1 or T) x B x 1
        self.padding_mask: Optional[Tensor] = None  # B x T, True at padding, or None
        self.depth = 0  # layers pushed so far
        # (T, S, causal) -> (key padding mask, attention mask): see attend_mask
        self._attn_masks: Dict[Tuple[int, int, bool], Tuple[Optional[Tensor], Optional[Tensor]]] = {}

    def attend_mask(self, key_padding_mask: Optional[Tensor], T: int, S: int, causal: bool,
                    device) -> Optional[Tensor]:
        """:func:`~fairseq_ctx.modules.fused_attention.attend_mask`, built
        once per forward: every layer of a stack is given the same key
        padding mask (the same tensor) and shapes, so they share one
        attention mask. A step of incremental decoding gives each layer the
        mask of its own cache, a tensor of its own: built per layer."""
        hit = self._attn_masks.get((T, S, causal))
        if hit is not None and hit[0] is key_padding_mask:
            return hit[1]
        mask = attend_mask(key_padding_mask, T, S, causal, device)
        self._attn_masks[(T, S, causal)] = (key_padding_mask, mask)
        return mask

    def _setup(self, x: Tensor):
        # Counts, sums and means are float32 whatever the model's dtype (means
        # are cast back): bfloat16 holds integers exactly only up to 256, so a
        # half-precision count stalls at 256 tokens, and a running sum kept in
        # bfloat16 (float16) loses the low bits of every step's addition (with
        # a 250-step prefix the prefix means were off by up to 0.37 (0.024),
        # against 0.03 (0.004) for the one-pass cumulative sum). float32
        # models compute exactly what they did before.
        T, B = x.size(0), x.size(1)
        if self.padding_mask is not None:
            self._weights = (~self.padding_mask).t().unsqueeze(-1).float()
        if not self.causal:
            if self._weights is None:
                self._denom = x.new_full((1, B, 1), float(T), dtype=torch.float32)
            else:
                self._denom = self._weights.sum(0, keepdim=True).clamp(min=1.0)
        elif self.incremental:
            count = self._weights.sum(0) if self._weights is not None else x.new_full((B, 1), float(T),
                                                                                      dtype=torch.float32)
            if self.prev_sums is not None and self.prev_sums.get("count") is not None:
                count = self.prev_sums["count"] + count
            self.new_sums["count"] = count
            self._denom = count.clamp(min=1.0).unsqueeze(0)
        else:
            if self._weights is None:
                self._denom = torch.arange(1, T + 1, device=x.device, dtype=torch.float32).view(T, 1, 1)
            else:
                self._denom = self._weights.cumsum(0).clamp(min=1.0)

    def push(self, x: Tensor, padding_mask: Optional[Tensor] = None):
        """Record ``x`` (``T x B x C``) as the next layer's ``H^l``, what its
        self-attention is given (the layer input, after the pre-norm if any);
        ``padding_mask``: ``B x T``, True at padding, or None (no padding)."""
        if self.depth == 0:
            self.padding_mask = padding_mask
        self.depth += 1
        if self.need_states:
            self.states.append(x)
        if not self.need_means:
            return
        if self._denom is None:
            self._setup(x)
        x32 = x.float()  # see _setup
        xw = x32 if self._weights is None else x32 * self._weights
        if not self.causal:
            self.means.append((xw.sum(0, keepdim=True) / self._denom).to(x.dtype))
        elif self.incremental:
            # one step at a time (T == 1): add to the running sum of this level
            key = f"sum{len(self.means)}"
            s = xw.sum(0)
            if self.prev_sums is not None and self.prev_sums.get(key) is not None:
                s = self.prev_sums[key] + s
            self.new_sums[key] = s
            self.means.append((s.unsqueeze(0) / self._denom).to(x.dtype))
        else:
            self.means.append((xw.cumsum(0) / self._denom).to(x.dtype))


class HistorySlot(object):
    """Where the layers of one stack find the :class:`ContextHistory` of the
    forward in progress.

    The encoder (decoder) opens a fresh history around fairseq's own forward
    (as fairseq's ``examples/latent_depth`` wraps ``super().forward()`` with
    per-forward state); each layer pushes its ``H^l`` before running and its
    self-attention, called by fairseq's layer with the ``MultiheadAttention``
    signature, reads its context from here. A plain object shared by the
    stack and its layers, not a module: it holds no parameters and nothing
    of it is saved.
    """

    def __init__(self):
        self.history: Optional[ContextHistory] = None

    @contextmanager
    def open(self, history: ContextHistory) -> Iterator[ContextHistory]:
        # restores what was open before: a checkpointed layer reopens the
        # stack's history around its own forward (and recomputation)
        previous, self.history = self.history, history
        try:
            yield history
        finally:
            # the slot does not hold the layer inputs past the forward; a
            # checkpointed layer keeps its own reference for the recomputation
            self.history = previous


@with_incremental_state
class ContextAwareSelfAttention(Readout, nn.Module):
    """Multi-head self-attention with context-aware queries and keys (Eq. 5-7).

    Args:
        embed_dim (int): model dimension ``d``
        num_heads (int): attention heads
        layer (int): 1-based index of the layer in its stack (sets ``d_c``)
        context (str): one of ``global``, ``deep``, ``deep-global``,
            ``deep-global+deep``
        contextualize (str): ``query``, ``key`` or ``both`` (Table 3)
        dropout (float): attention dropout
        causal (bool): decoder self-attention (causal mask, incremental state)
        slot (HistorySlot): where the context history of the forward in
            progress is found (the stack's; or pass ``history=`` per call)
        gated (bool): the gates of Eq. 6 (False: footnote 1's ablation,
            ``Q + C U_Q``)

    Same base parameters as fairseq's ``MultiheadAttention`` (Q, K, V in one
    fused ``d x 3d`` projection, output projection ``d x d``), plus per context
    part a ``d_c x (n*d)`` projection (``n`` = number of contextualised of
    Q, K) and, when gated, ``V^H``, ``V^C`` (``n x d`` each).

    Readout (:mod:`fairseq_ctx.modules.readout`): lambda_Q and lambda_K of
    Eq. 6, those of the contextualised Q / K only (none without gates).
    """

    readout_shapes = {"q": "T x B", "k": "T x B"}

    def __init__(self, embed_dim: int, num_heads: int, layer: int, context: str = "deep-global+deep",
                 contextualize: str = "both", dropout: float = 0.0, causal: bool = False,
                 slot: Optional[HistorySlot] = None, gated: bool = True):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        if context not in CONTEXT_TYPES:
            raise ValueError(f"--ctxsan-context must be one of {CONTEXT_TYPES}, got {context!r}")
        if contextualize not in CONTEXTUALIZE:
            raise ValueError(f"--ctxsan-contextualize must be one of {CONTEXTUALIZE}, got {contextualize!r}")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.layer = layer
        self.context = context
        self.contextualize = contextualize
        # a fairseq module (not a float) so that --retain-dropout reaches it
        self.dropout_module = FairseqDropout(dropout, module_name=self.__class__.__name__)
        self.causal = causal
        self.slot = slot
        self.gated = gated
        # which of Q (row 0 of the fused q|k|v) and K (row 1) are contextualised (Eq. 5)
        self.mixed_qk = {"query": [0], "key": [1], "both": [0, 1]}[contextualize]
        n = len(self.mixed_qk)

        self.in_proj = nn.Linear(embed_dim, 3 * embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

        # context projections [U_Q U_K], one per summed context part with d_c > 0
        self.parts = [p for p in context_parts(context) if context_dim(p, layer, embed_dim) > 0]
        self.ctx_proj = nn.ModuleDict({
            p.replace("-", "_"): nn.Linear(context_dim(p, layer, embed_dim), n * embed_dim, bias=False)
            for p in self.parts
        })
        if self.parts and gated:
            self.gate_h = nn.Parameter(torch.empty(n, embed_dim))  # V^H_Q, V^H_K
            self.gate_c = nn.Parameter(torch.empty(n, embed_dim))  # V^C_Q, V^C_K
        else:
            self.register_parameter("gate_h", None)
            self.register_parameter("gate_c", None)
        # (key, folded weights) of the last eval-mode fold; not a buffer, so
        # the state_dict (the checkpoint format) is unchanged
        self._fold_cache: Optional[Tuple[tuple, Tuple[Tensor, Tensor, Dict[str, Tensor]]]] = None
        self.reset_parameters()

    def reset_parameters(self):
        # mirrors fairseq MultiheadAttention.reset_parameters (scaled init of Q, K, V)
        for i in range(3):
            nn.init.xavier_uniform_(self.in_proj.weight[i * self.embed_dim:(i + 1) * self.embed_dim],
                                    gain=1 / 2 ** 0.5)
        nn.init.zeros_(self.in_proj.bias)
        nn.init.xavier_uniform_(self.out_proj.weight)
        nn.init.zeros_(self.out_proj.bias)
        for proj in self.ctx_proj.values():
            nn.init.xavier_uniform_(proj.weight)
        if self.gate_h is not None:
            # lambda = 0.5 everywhere at the start: a random V^H, V^C gives each
            # layer a near-constant logit (the mean direction of Q and of the
            # sentence means dominates) and can saturate a layer's gate at 0 or 1
            nn.init.zeros_(self.gate_h)
            nn.init.zeros_(self.gate_c)

    @property
    def has_context(self) -> bool:
        return len(self.parts) > 0

    def _fold(self) -> Tuple[Tensor, Tensor, Dict[str, Tensor]]:
        """The projections with the gate vectors folded in as ``n`` extra output rows
        (without gates: the projections themselves):

        * ``[W; V^H W_Q/K; 0]``: ``(3C + n + p) x C`` and its bias ``[b; V^H b_Q/K; 0]``
          (``Q V^H = x (W_Q^T V^H) + b_Q V^H``, Eq. 6 first term), with ``p``
          zero rows that make ``3C + n + p`` a multiple of 8 (alignment only);
        * per context part ``[U; V^C U]``: ``(n*C + n) x d_c`` (``C U V^C = C (U V^C)``).
        """
        w, b = self.in_proj.weight, self.in_proj.bias
        if not self.gated:
            return w, b, {p: self.ctx_proj[p.replace("-", "_")].weight for p in self.parts}
        d, n = self.embed_dim, len(self.mixed_qk)
        lo, hi = self.mixed_qk[0] * d, (self.mixed_qk[-1] + 1) * d
        w_gate = torch.bmm(self.gate_h.unsqueeze(1), w[lo:hi].view(n, d, d)).squeeze(1)  # n x C
        b_gate = (self.gate_h * b[lo:hi].view(n, d)).sum(-1)  # n
        ctx: Dict[str, Tensor] = {}
        for p in self.parts:
            wc = self.ctx_proj[p.replace("-", "_")].weight  # (n*C) x d_c
            wc_gate = torch.bmm(self.gate_c.unsqueeze(1), wc.view(n, d, -1)).squeeze(1)  # n x d_c
            ctx[p] = torch.cat([wc, wc_gate])
        # zero rows up to a multiple of 8: the fused output's rows then start
        # on 16-byte boundaries (fp32 and half alike), so q/k/v, views into it,
        # are what the fused CUDA attention kernels can read (rows of 3C + n
        # elements crashed them with a misaligned address)
        pad = -(3 * d + n) % 8
        if pad:
            w_gate = torch.cat([w_gate, w_gate.new_zeros(pad, d)])
            b_gate = torch.cat([b_gate, b_gate.new_zeros(pad)])
        return torch.cat([w, w_gate]), torch.cat([b, b_gate]), ctx

    def _fold_key(self) -> Optional[tuple]:
        """Identifies the current values of the folded parameters: storage,
        version counter (bumped by every in-place change: optimizer steps,
        ``load_state_dict``'s copy, ``zero_``), dtype and device. None where
        a parameter has no version counter (made under ``inference_mode``)."""
        params = [self.in_proj.weight, self.in_proj.bias, self.gate_h, self.gate_c]
        params = [t for t in params if t is not None]  # no gates: --ctxsan-no-gate
        params += [self.ctx_proj[p.replace("-", "_")].weight for p in self.parts]
        try:
            return tuple((t.data_ptr(), t._version, t.dtype, t.device) for t in params)
        except RuntimeError:  # inference tensors track no version
            return None

    def folded_weights(self) -> Tuple[Tensor, Tensor, Dict[str, Tensor]]:
        """:meth:`_fold`, reused between calls in eval mode without autograd.

        A decoding step is one position per hypothesis, so re-folding on
        every step (a bmm over W_Q/K and copies of the whole fused and context
        weights) costs as much as the step's own Q/K/V projection. The fold
        is kept while the parameters' storage and version counters are
        unchanged; ``train()``/``eval()``, ``load_state_dict`` and
        ``to()``/``half()`` drop it as well. In-place writes through
        ``param.data``, which bypass the version counter, are not seen:
        call ``eval()`` again after such writes. Training (or any call with
        autograd on) folds afresh, so gradients reach ``V^H``, ``V^C`` and
        the projections exactly as before.
        """
        if self.training or torch.is_grad_enabled():
            return self._fold()
        key = self._fold_key()
        if key is None:
            return self._fold()
        if self._fold_cache is None or self._fold_cache[0] != key:
            self._fold_cache = (key, self._fold())
        return self._fold_cache[1]

    def train(self, mode: bool = True):
        self._fold_cache = None
        return super().train(mode)

    def _apply(self, fn, *args, **kwargs):
        self._fold_cache = None  # .to()/.half()/.cuda() replace the parameters
        return super()._apply(fn, *args, **kwargs)

    def _load_from_state_dict(self, *args, **kwargs):
        self._fold_cache = None  # also covers load_state_dict(assign=True)
        return super()._load_from_state_dict(*args, **kwargs)

    def project_context(self, history: ContextHistory,
                        ctx_weights: Optional[Dict[str, Tensor]] = None) -> Tuple[Tensor, Tensor]:
        """``C [U_Q U_K]``, summed over context parts: ``(1 or T) x B x n x C``,
        and the gate logits' context term ``C [U_Q U_K] [V^C_Q; V^C_K]``:
        ``(1 or T) x B x n`` (``(1 or T) x B x 0`` without gates).

        ``ctx_weights``: the folded ``[U; V^C U]`` (``U``) per part (from
        :meth:`folded_weights`; folded here when not given).
        A context that is one vector per sentence (encoder-side global and
        deep-global) has a leading dim of 1 and is projected once per sentence.
        """
        l, d, n = self.layer, self.embed_dim, len(self.mixed_qk)
        if ctx_weights is None:
            ctx_weights = self.folded_weights()[2]
        out: Optional[Tensor] = None
        for p in self.parts:
            if p == "global":
                blocks = [history.means[l - 1]]
            elif p == "deep-global":
                blocks = history.means[:l]  # Eq. 10: [mean H^1; ...; mean H^l]
            else:  # deep
                blocks = history.states[:l - 1]  # Eq. 9: [H^1; ...; H^{l-1}]
            w = ctx_weights[p]  # (n*C + n) x d_c (n*C x d_c without gates), d_c = len(blocks) * C
            if len(blocks) > 1 and not torch.is_grad_enabled():
                # nothing kept for a backward: one GEMM on the concatenation
                # (an incremental step launches 2 kernels, not 2k - 1)
                y = F.linear(torch.cat(blocks, dim=-1), w)  # (1|T) x B x (n*C [+ n])
                out = y if out is None else out + y
                continue
            # [c_1 ... c_k] W^T = sum_j c_j W_j^T with W_j the j-th C columns:
            # the same products as on the concatenation, without copying the
            # k blocks into a (1|T) x B x kC tensor that autograd would keep
            # until backward (the blocks themselves are kept anyway). W_j from
            # one split: its backward is one concatenation of the k gradients,
            # where k slices would each build a zero-filled gradient of all of W
            for c, w_j in zip(blocks, w.split(d, dim=1)):
                y = F.linear(c, w_j)  # (1|T) x B x (n*C [+ n])
                out = y if out is None else out + y
        assert out is not None
        ctx, logit = out.split([n * d, out.size(-1) - n * d], dim=-1)  # one split: see forward
        return ctx.unflatten(-1, (n, d)), logit

    def forward(
        self,
        query: Tensor,
        key: Optional[Tensor] = None,
        value: Optional[Tensor] = None,
        key_padding_mask: Optional[Tensor] = None,
        incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None,
        need_weights: bool = False,
        static_kv: bool = False,
        attn_mask: Optional[Tensor] = None,
        before_softmax: bool = False,
        need_head_weights: bool = False,
        history: Optional[ContextHistory] = None,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        """fairseq's ``MultiheadAttention`` call signature, for self-attention only.

        Args:
            query: the layer input (after the pre-norm if any), ``T x B x C``;
                ``key`` and ``value`` are None or ``query`` itself
            key_padding_mask: ``B x T``, True at padding
            incremental_state: decoder-side step-by-step state (contextualised
                keys and values of the earlier steps)
            attn_mask: the decoder's future mask, which causal attention
                applies itself (the prefix-mean context is causal by
                construction, so no other mask could be honoured); an
                encoder-side mask is refused
            history: the ``H`` of this stack's layers so far, this layer's
                included (default: the history open in ``slot``)

        Returns:
            ``(T x B x C, None)``: attention weights are not computed
            (``need_weights`` / ``need_head_weights`` are refused).
        """
        x = query
        if (key is not None and key is not query) or (value is not None and value is not query):
            raise ValueError("context-aware attention is self-attention: key and value must be the query")
        if need_weights or need_head_weights or before_softmax or static_kv:
            raise ValueError("context-aware attention computes no attention weights "
                             "(need_weights, need_head_weights, before_softmax, static_kv)")
        if attn_mask is not None and not self.causal:
            raise ValueError("context-aware encoder self-attention takes no attn_mask")
        if history is None and self.slot is not None:
            history = self.slot.history
        T, B, d = x.shape
        H, hd = self.num_heads, self.head_dim
        if not self.has_context:
            qkv = self.in_proj(x).view(T, B, 3, d)  # T x B x 3 x C
            q, k, v = qkv.unbind(2)
        else:
            if history is None:
                raise RuntimeError("context-aware attention without a context history: run it inside "
                                   "CtxSanEncoder/CtxSanDecoder or pass history=")
            # Eq. 6, first term: Q V^H = x (W_Q^T V^H) + b_Q V^H. V^H folded into
            # the fused projection as n extra output columns gives the gate
            # logits from the same matmul (no extra pass over Q and K).
            w, b, ctx_weights = self.folded_weights()
            out = F.linear(x, w, b)  # T x B x (3C + n + p), rows 16-byte aligned (3C without gates)
            # one split, not slices: its backward is one concatenation, where
            # each slice's would build a zero-filled gradient of all of ``out``
            n = len(self.mixed_qk)
            qkv, gate_logit, _ = out.split([3 * d, n, out.size(-1) - 3 * d - n] if self.gated else [3 * d, 0, 0],
                                           dim=-1)
            # the contextualised ones (Q, K or both) and the others, split alike
            lo, hi = self.mixed_qk[0], self.mixed_qk[-1] + 1
            before, qk, after = qkv.view(T, B, 3, d).split([lo, hi - lo, 3 - hi], dim=2)  # qk: T x B x n x C
            q, k, v = (*before.unbind(2), *qk.unbind(2), *after.unbind(2))  # the mixed ones replaced below
            ctx, ctx_logit = self.project_context(history, ctx_weights)  # (1|T) x B x n x C, (1|T) x B x n
            if not self.gated:  # footnote 1's ablation: Q + C U
                mixed = qk + ctx
            else:
                # Eq. 6: one scalar per position and per contextualised Q / K
                lam = torch.sigmoid(gate_logit + ctx_logit)  # T x B x n
                # Eq. 5: (1 - lam) * Q + lam * (C U)
                mixed = torch.lerp(qk, ctx, lam.unsqueeze(-1))
                if self.keep_readout:
                    self.record_readout(**{("q" if s == 0 else "k"): lam[:, :, i]  # T x B
                                           for i, s in enumerate(self.mixed_qk)})
            if self.contextualize == "both":
                q, k = mixed.unbind(2)
            elif self.contextualize == "query":
                q = mixed.squeeze(2)
            else:
                k = mixed.squeeze(2)

        # T x B x C -> B x H x T x hd
        q = q.reshape(T, B, H, hd).permute(1, 2, 0, 3)
        k = k.reshape(T, B, H, hd).permute(1, 2, 0, 3)
        v = v.reshape(T, B, H, hd).permute(1, 2, 0, 3)

        if incremental_state is not None:
            # keys keep the context of their own step (cached, not recomputed)
            saved = self._get_input_buffer(incremental_state)
            k, v, key_padding_mask = append_keys_values(saved, k, v, key_padding_mask)
            self._set_input_buffer(incremental_state, saved)
        # causal without padding and cache: the kernels' own is_causal, no mask
        is_causal = self.causal and incremental_state is None and key_padding_mask is None
        causal = self.causal and not is_causal and T > 1
        build_mask = attend_mask if history is None else history.attend_mask
        attn_mask = build_mask(key_padding_mask, T, k.size(2), causal, x.device)  # (B|1) x 1 x (T|1) x S, or None

        out = attention(q, k, v, attn_mask, dropout_p=dropout_p(self.dropout_module),
                        is_causal=is_causal)  # B x H x T x hd
        out = out.permute(2, 0, 1, 3).reshape(T, B, d)
        return self.out_proj(out), None

    def _get_input_buffer(self, incremental_state) -> Dict[str, Optional[Tensor]]:
        result = self.get_incremental_state(incremental_state, "attn_state")
        return result if result is not None else {}

    def _set_input_buffer(self, incremental_state, buffer: Dict[str, Optional[Tensor]]):
        return self.set_incremental_state(incremental_state, "attn_state", buffer)

    def reorder_incremental_state(self, incremental_state: Dict[str, Dict[str, Optional[Tensor]]],
                                  new_order: Tensor):
        """Beam search: keep the cached keys/values of the selected hypotheses."""
        return reorder_cache(self, incremental_state, "attn_state", new_order)
