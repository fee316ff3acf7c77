"""Transformer layers whose self-attention is context-aware (Yang et al.,
AAAI 2019, Eq. 5-10); see :mod:`fairseq_ctx.modules.context_aware_attention`.

The layers take one extra argument, ``history`` (a
:class:`~fairseq_ctx.modules.context_aware_attention.ContextHistory` holding the
inputs of this layer and of the layers below), and otherwise behave like
fairseq's ``TransformerEncoderLayerBase`` / ``TransformerDecoderLayerBase``.
"""
from typing import Dict, List, Optional

from fairseq.modules.transformer_layer import TransformerDecoderLayerBase, TransformerEncoderLayerBase
from torch import Tensor

from .context_aware_attention import ContextAwareSelfAttention, ContextHistory
from .feed_forward import feed_forward_sublayer


class CtxSanEncoderLayer(TransformerEncoderLayerBase):
    """Encoder layer ``layer`` (1-based) with context-aware self-attention."""

    def __init__(self, cfg, layer: int, context: str, contextualize: str):
        self.ctx_layer = layer
        self.ctx_context = context
        self.ctx_contextualize = contextualize
        super().__init__(cfg)

    def build_self_attention(self, embed_dim, cfg):
        return ContextAwareSelfAttention(
            embed_dim, cfg.encoder.attention_heads, self.ctx_layer, context=self.ctx_context,
            contextualize=self.ctx_contextualize, dropout=cfg.attention_dropout, causal=False,
        )

    def forward(self, x: Tensor, encoder_padding_mask: Optional[Tensor],
                attn_mask: Optional[Tensor] = None, history: Optional[ContextHistory] = None):
        """Mirrors ``TransformerEncoderLayerBase.forward``; the self-attention
        also gets ``history``. ``x``: ``T x B x C``; padding mask ``B x T``."""
        if attn_mask is not None:
            raise ValueError("transformer_ctxsan encoder layers do not take an attn_mask")
        residual = x
        if self.normalize_before:
            x = self.self_attn_layer_norm(x)
        x = self.self_attn(x, key_padding_mask=encoder_padding_mask, history=history)
        x = self.dropout_module(x)
        x = self.residual_connection(x, residual)
        if not self.normalize_before:
            x = self.self_attn_layer_norm(x)

        x = feed_forward_sublayer(self, x)
        return x


class CtxSanDecoderLayer(TransformerDecoderLayerBase):
    """Decoder layer ``layer`` (1-based) with causal context-aware
    self-attention: prefix means (footnote 2) and lower decoder layers only."""

    def __init__(self, cfg, layer: int, context: str, contextualize: str, no_encoder_attn: bool = False):
        self.ctx_layer = layer
        self.ctx_context = context
        self.ctx_contextualize = contextualize
        super().__init__(cfg, no_encoder_attn=no_encoder_attn)

    def build_self_attention(self, embed_dim, cfg, add_bias_kv=False, add_zero_attn=False):
        return ContextAwareSelfAttention(
            embed_dim, cfg.decoder.attention_heads, self.ctx_layer, context=self.ctx_context,
            contextualize=self.ctx_contextualize, dropout=cfg.attention_dropout, causal=True,
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
        history: Optional[ContextHistory] = None,
    ):
        """Mirrors ``TransformerDecoderLayerBase.forward`` without the options
        the model rejects at build time (cross-self-attention, scale_*, onnx).
        The self-attention is causal by construction (``self_attn_mask`` is
        not used) and gets ``history``. ``x``: ``T x B x C``."""
        if prev_self_attn_state is not None or prev_attn_state is not None:
            raise ValueError("transformer_ctxsan decoder layers do not take prev_*_attn_state")
        if need_head_weights:
            need_attn = True

        residual = x
        if self.normalize_before:
            x = self.self_attn_layer_norm(x)
        x = self.self_attn(x, key_padding_mask=self_attn_padding_mask, history=history,
                           incremental_state=incremental_state)
        x = self.dropout_module(x)
        x = self.residual_connection(x, residual)
        if not self.normalize_before:
            x = self.self_attn_layer_norm(x)

        attn: Optional[Tensor] = None
        if self.encoder_attn is not None and encoder_out is not None:
            residual = x
            if self.normalize_before:
                x = self.encoder_attn_layer_norm(x)
            x, attn = self.encoder_attn(
                query=x,
                key=encoder_out,
                value=encoder_out,
                key_padding_mask=encoder_padding_mask,
                incremental_state=incremental_state,
                static_kv=True,
                need_weights=need_attn or (not self.training and self.need_attn),
                need_head_weights=need_head_weights,
            )
            x = self.dropout_module(x)
            x = self.residual_connection(x, residual)
            if not self.normalize_before:
                x = self.encoder_attn_layer_norm(x)

        x = feed_forward_sublayer(self, x)
        return x, attn, None


__all__ = ["CtxSanEncoderLayer", "CtxSanDecoderLayer", "ContextHistory"]
