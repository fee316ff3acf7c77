"""The last source-encoder layer of the context-aware Transformer of Voita et
al., ACL 2018 ("Context-Aware Neural Machine Translation Learns Anaphora
Resolution", Section 3, "Gated contextual attention").

Besides self-attention over the source, the layer attends from the source to
the context encoder's output and mixes the two attention outputs with an
element-wise sigmoid gate before the feed-forward sublayer::

    c_s = SelfAttn(x)                     # source self-attention,  T x B x C
    c_c = CtxAttn(query=x, key/value=ctx) # attention to context,   T x B x C
    g   = sigmoid(W_g [c_s; c_c] + b_g)   # gate, W_g: 2d -> d      T x B x C
    c   = g * c_s + (1 - g) * c_c
    x   = LN(x + dropout(c));  x = LN(x + dropout(FFN(x)))   (post-norm)

Choice where the paper is silent: the context attention uses the same
queries as the self-attention (the layer input, layer-normalised first in
pre-norm models), i.e. both attentions run side by side on the layer input
and their outputs share one residual connection and layer norm.  ``1 - g``
is the share of each channel taken from the context; its mean over channels
is what ``fairseq_ctx.analysis.ctxenc_context_attention`` reports per word,
reading g as ``last_readout["gate"]`` (T x B x C) inside
``with reading(model):`` (:mod:`fairseq_ctx.modules.readout`).

Extra parameters over a standard encoder layer (d = 512): context attention
4d^2 + 4d = 1,050,624 and gate 2d^2 + d = 524,800.
"""
from typing import Optional

import torch
import torch.nn as nn
from torch import Tensor

from fairseq.modules import MultiheadAttention
from fairseq.modules.quant_noise import quant_noise
from fairseq.modules.transformer_layer import TransformerEncoderLayerBase
from fairseq_ctx.modules.feed_forward import feed_forward_sublayer
from fairseq_ctx.modules.readout import Readout


class CtxEncGatedEncoderLayer(Readout, TransformerEncoderLayerBase):
    """``TransformerEncoderLayerBase`` plus a gated attention to the context
    encoder's output (Voita et al. 2018, Eqs. for g_i and c_i).

    Readout (:mod:`fairseq_ctx.modules.readout`): the gate g, the share of
    each channel taken from the source self-attention.
    """

    readout_shapes = {"gate": "T x B x C"}

    def __init__(self, cfg):
        super().__init__(cfg)
        self.ctx_attn = MultiheadAttention(
            self.embed_dim,
            cfg.encoder.attention_heads,
            kdim=self.embed_dim,
            vdim=self.embed_dim,
            dropout=cfg.attention_dropout,
            encoder_decoder_attention=True,
            q_noise=self.quant_noise,
            qn_block_size=self.quant_noise_block_size,
        )
        # fairseq's quantization noise, as its own layers' projections get it (none without --quant-noise-pq)
        self.gate = quant_noise(nn.Linear(2 * self.embed_dim, self.embed_dim), self.quant_noise,
                                self.quant_noise_block_size)

    def forward(
        self,
        x: Tensor,
        encoder_padding_mask: Optional[Tensor],
        ctx: Optional[Tensor] = None,
        ctx_padding_mask: Optional[Tensor] = None,
        attn_mask: Optional[Tensor] = None,
    ) -> Tensor:
        """
        Args:
            x: source states, T x B x C
            encoder_padding_mask: B x T, True at padding (or None)
            ctx: context encoder output, T_ctx x B x C
            ctx_padding_mask: B x T_ctx, True at padding (or None)

        Returns:
            the output, T x B x C
        """
        if ctx is None:
            raise ValueError("CtxEncGatedEncoderLayer needs the context encoder output")
        if attn_mask is not None:
            attn_mask = attn_mask.masked_fill(
                attn_mask.to(torch.bool), -1e8 if x.dtype == torch.float32 else -1e4)
        # mirrors TransformerEncoderLayerBase.forward, with the self-attention
        # output replaced by the gated mixture
        residual = x
        if self.normalize_before:
            x = self.self_attn_layer_norm(x)
        c_s, _ = self.self_attn(query=x, key=x, value=x, key_padding_mask=encoder_padding_mask,
                                need_weights=False, attn_mask=attn_mask)
        c_c, _ = self.ctx_attn(query=x, key=ctx, value=ctx, key_padding_mask=ctx_padding_mask,
                               need_weights=False)
        g = torch.sigmoid(self.gate(torch.cat([c_s, c_c], dim=-1)))  # T x B x C
        x = c_c + g * (c_s - c_c)  # = g * c_s + (1 - g) * c_c
        if self.keep_readout:
            self.record_readout(gate=g)  # T x B x C
        x = self.dropout_module(x)
        x = self.residual_connection(x, residual)
        if not self.normalize_before:
            x = self.self_attn_layer_norm(x)

        x = feed_forward_sublayer(self, x)
        return x
