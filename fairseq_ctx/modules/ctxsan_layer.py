"""Transformer layers whose self-attention is context-aware (Yang et al.,
AAAI 2019, Eq. 5-10); see :mod:`fairseq_ctx.modules.ctxsan_attention`.

fairseq's ``TransformerEncoderLayerBase`` / ``TransformerDecoderLayerBase``
with two changes through their hooks: ``build_self_attention`` builds a
:class:`~fairseq_ctx.modules.ctxsan_attention.ContextAwareSelfAttention`
(fairseq's ``MultiheadAttention`` call signature), and ``forward`` first
records ``H^l`` in the stack's context history (the global, deep and
deep-global contexts of Eq. 8-10 are built from it and the lower layers'),
then runs fairseq's forward unchanged. ``H^l`` is what the self-attention is
given, the ``H`` of Eq. 1 that its queries and keys are made from: the layer
input, or with ``--encoder-normalize-before`` / ``--decoder-normalize-before``
its ``self_attn_layer_norm`` (computed once more here, outside fairseq's
forward: a LayerNorm, about 8d FLOPs a token against a layer's 24d^2 or
more with a 4d FFN, 16d^2 with the iwslt preset's 2d: 0.07% and 0.1% at
d = 512). The authors' code
(baosongyang/Context-Aware-SAN, ``models/transformer_context_di.py``, pre-norm)
takes its global context from the normalized input as well; the raw residual
stream of a pre-norm model grows layer by layer, so its means would weigh the
upper layers of a deep-global context more.

``--checkpoint-activations``: fairseq's ``checkpoint_wrapper`` is reentrant:
its recomputation sees only the layer's tensor arguments, so the lower
layers' states that the context reads through the history would get no
gradient from this layer, and the history is closed by then. These layers
checkpoint themselves instead with PyTorch's non-reentrant checkpoint
(:mod:`fairseq_ctx.modules.activation_checkpoint`, which also takes
``--offload-activations``), which keeps the autograd graph to every tensor
the forward touched and recomputes only the saved activations; the
recomputation reopens the same history (already pushed: it pushes nothing
again), so gradients equal the plain model's (tested).
"""
from typing import Dict, List, Optional

from fairseq.modules.transformer_layer import TransformerDecoderLayerBase, TransformerEncoderLayerBase
from torch import Tensor

from .activation_checkpoint import checkpointed_call
from .ctxsan_attention import ContextAwareSelfAttention, ContextHistory, HistorySlot


def _attention_input(layer, x: Tensor) -> Tensor:
    """``H^l``: the input of ``layer``'s self-attention (see the module docstring)."""
    return layer.self_attn_layer_norm(x) if layer.normalize_before else x


def _run_in(layer_forward, slot: HistorySlot, history: ContextHistory, checkpointed: bool, offload: bool,
            *args, **kwargs):
    """``layer_forward(*args, **kwargs)`` with ``history`` open in ``slot``,
    under a non-reentrant activation checkpoint when ``checkpointed`` (and
    autograd is recording a training step), its inputs in CPU memory with
    ``offload``."""
    def run(*args, **kwargs):
        with slot.open(history):
            return layer_forward(*args, **kwargs)

    if checkpointed:
        return checkpointed_call(run, offload, *args, **kwargs)
    return run(*args, **kwargs)


class CtxSanEncoderLayer(TransformerEncoderLayerBase):
    """Encoder layer ``layer`` (1-based, kept as ``ctx_layer_number``) with context-aware self-attention;
    ``slot``: the encoder's :class:`HistorySlot`; ``gated``: the gates of Eq. 6 (False: ``--ctxsan-no-gate``)."""

    def __init__(self, cfg, layer: int, context: str, contextualize: str, slot: HistorySlot, gated: bool = True):
        self.ctx_layer_number = layer
        self.ctx_context = context
        self.ctx_contextualize = contextualize
        self.ctx_gated = gated
        self.ctx_slot = slot
        self.ctx_checkpoint = bool(cfg.checkpoint_activations)
        self.ctx_offload = bool(cfg.offload_activations)
        super().__init__(cfg)

    def build_self_attention(self, embed_dim, cfg):
        return ContextAwareSelfAttention(
            embed_dim, cfg.encoder.attention_heads, self.ctx_layer_number, context=self.ctx_context,
            contextualize=self.ctx_contextualize, dropout=cfg.attention_dropout, causal=False,
            slot=self.ctx_slot, gated=self.ctx_gated,
        )

    def forward(self, x: Tensor, encoder_padding_mask: Optional[Tensor], attn_mask: Optional[Tensor] = None):
        # x: T x B x C (this layer's input); encoder_padding_mask: B x T or None
        history = self.ctx_slot.history
        history.push(_attention_input(self, x), encoder_padding_mask)  # H^l
        return _run_in(super().forward, self.ctx_slot, history, self.ctx_checkpoint and self.training,
                       self.ctx_offload, x, encoder_padding_mask, attn_mask=attn_mask)


class CtxSanDecoderLayer(TransformerDecoderLayerBase):
    """Decoder layer ``layer`` (1-based) with causal context-aware
    self-attention: prefix means (footnote 2) and lower decoder layers only;
    ``slot``: the decoder's :class:`HistorySlot`; ``gated``: the gates of
    Eq. 6 (False: ``--ctxsan-no-gate``)."""

    def __init__(self, cfg, layer: int, context: str, contextualize: str, slot: HistorySlot,
                 no_encoder_attn: bool = False, gated: bool = True):
        self.ctx_layer_number = layer
        self.ctx_context = context
        self.ctx_contextualize = contextualize
        self.ctx_gated = gated
        self.ctx_slot = slot
        self.ctx_checkpoint = bool(cfg.checkpoint_activations)
        self.ctx_offload = bool(cfg.offload_activations)
        super().__init__(cfg, no_encoder_attn=no_encoder_attn)

    def build_self_attention(self, embed_dim, cfg, add_bias_kv=False, add_zero_attn=False):
        return ContextAwareSelfAttention(
            embed_dim, cfg.decoder.attention_heads, self.ctx_layer_number, context=self.ctx_context,
            contextualize=self.ctx_contextualize, dropout=cfg.attention_dropout, causal=True,
            slot=self.ctx_slot, gated=self.ctx_gated,
        )

    def forward(
        self,
        x: Tensor,
        encoder_out: Optional[Tensor] = None,
        encoder_padding_mask: Optional[Tensor] = None,
        incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None,
        prev_self_attn_state: Optional[List[Tensor]] = None,
        prev_attn_state: Optional[List[Tensor]] = None,
        self_attn_mask: Optional[Tensor] = None,
        self_attn_padding_mask: Optional[Tensor] = None,
        need_attn: bool = False,
        need_head_weights: bool = False,
    ):
        # x: T x B x C (this layer's input); self_attn_padding_mask: B x T or None
        history = self.ctx_slot.history
        history.push(_attention_input(self, x), self_attn_padding_mask)  # H^l
        # incremental decoding writes caches: never recomputed
        checkpointed = self.ctx_checkpoint and self.training and incremental_state is None
        return _run_in(
            super().forward, self.ctx_slot, history, checkpointed, self.ctx_offload,
            x, encoder_out, encoder_padding_mask, incremental_state,
            prev_self_attn_state=prev_self_attn_state, prev_attn_state=prev_attn_state,
            self_attn_mask=self_attn_mask, self_attn_padding_mask=self_attn_padding_mask,
            need_attn=need_attn, need_head_weights=need_head_weights,
        )


__all__ = ["CtxSanEncoderLayer", "CtxSanDecoderLayer"]
