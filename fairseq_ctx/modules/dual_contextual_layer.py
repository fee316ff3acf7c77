"""Transformer layers whose self-attention sublayer is the Dual Contextual
module (Ampomah et al. 2021, Fig. 2).

Only ``build_self_attention`` changes: fairseq's layer forward already applies
dropout -> residual -> ``self_attn_layer_norm`` around the sublayer, which is
Eq. 9, z_f = LayerNorm(z_hat + r) (post-norm, the paper's model; with
``--*-normalize-before`` the LayerNorm moves to the module's input, r =
LayerNorm(x), and z_f = x + z_hat); z_f then feeds the FFN (encoder) or the
encoder-decoder attention (decoder) exactly as in Fig. 2.
"""
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase, TransformerEncoderLayerBase

from .dual_contextual import DualContextualModule


def _kernel_size(cfg) -> int:
    return int(getattr(cfg, "dc_kernel_size", 2))


class DualContextualEncoderLayer(TransformerEncoderLayerBase):
    """Encoder layer with a centred (non-causal) DC module. x: T x B x C."""

    def build_self_attention(self, embed_dim, cfg):
        return DualContextualModule(
            embed_dim,
            cfg.encoder.attention_heads,
            kernel_size=_kernel_size(cfg),
            causal=False,
            dropout=cfg.dropout,
            attention_dropout=cfg.attention_dropout,
            export=cfg.export,
        )


class DualContextualDecoderLayer(TransformerDecoderLayerBase):
    """Decoder layer with a causal DC module (left-padded convolution, cached
    conv inputs and FI keys/values during incremental decoding). x: T x B x C."""

    def build_self_attention(self, embed_dim, cfg, add_bias_kv=False, add_zero_attn=False):
        if cfg.cross_self_attention:
            raise ValueError("--cross-self-attention cannot be combined with DC decoder layers (--dc-decoder-layers)")
        if add_bias_kv or add_zero_attn:
            raise ValueError("add_bias_kv / add_zero_attn are not supported by the DC module")
        return DualContextualModule(
            embed_dim,
            cfg.decoder.attention_heads,
            kernel_size=_kernel_size(cfg),
            causal=True,
            dropout=cfg.dropout,
            attention_dropout=cfg.attention_dropout,
            export=cfg.export,
        )
