"""``transformer_dc``: Transformer with the Dual Contextual module of Ampomah
et al., "Dual contextual module for neural machine translation", Machine
Translation 2021.

The DC module (``fairseq_ctx/modules/dual_contextual.py``, Eq. 6-9) replaces
the self-attention sublayer of the selected layers:

* Enc-DC (``--arch transformer_dc``, the paper's recommendation): every
  encoder layer; Dec-DC (``transformer_dc_dec``): every decoder layer;
  Full-DC (``transformer_dc_full``): both.
* ``--dc-encoder-layers`` / ``--dc-decoder-layers`` take ``all``, ``none`` or
  a 1-based list with ranges (``1,2``, ``1-4``, ``5-6``) as in Table 5.
* ``--dc-kernel-size`` is f of Eq. 6 (default 2, Sect. 5.2 / 7.2).

Sizes: Base (``transformer_dc*``, 6+6, d=512, 8 heads), Big
(``transformer_dc*_big``, chained to fairseq's ``transformer_wmt_en_de_big``)
and the paper's IWSLT model (``transformer_dc*_iwslt``: 4+4 layers, d=256,
4 heads, ffn 1024; the paper does not give the ffn size, 4d is assumed).
With Base dimensions and f = 2 each DC layer adds 2.10M parameters
(+12.6M for Enc-DC or Dec-DC, +25.2M for Full-DC; paper: +12.7M / ~+25M).

The FI attention distributions of the encoder can be read out for the
Jensen-Shannon analysis of Sect. 7.2 (``fairseq_ctx.analysis.dc_divergence``)
by the readout convention of :mod:`fairseq_ctx.modules.readout`: inside
``with reading(model.encoder):`` each module of ``encoder.dc_modules()``
keeps ``last_readout["alpha"]``, a B x 2 x H x T x T tensor [alpha_l,
alpha_g] of the last forward. ``encoder_out`` is fairseq's, unchanged.
"""
from dataclasses import dataclass
from typing import List, Optional

from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import (
    TransformerConfig,
    TransformerDecoderBase,
    TransformerEncoderBase,
    TransformerModel,
)
from fairseq.models.transformer.transformer_legacy import (
    base_architecture,
    transformer_iwslt_de_en,
    transformer_wmt_en_de_big,
)

from fairseq_ctx.errors import ConfigError
from fairseq_ctx.model_options import DC_DEFAULT_KERNEL_SIZE
from fairseq_ctx.models.layer_wrapping import wrap_layer
from fairseq_ctx.modules.dual_contextual import DualContextualModule
from fairseq_ctx.modules.dual_contextual_layer import DualContextualDecoderLayer, DualContextualEncoderLayer
from fairseq_ctx.modules.future_mask import BoolFutureMask
from fairseq_ctx.models.checks import check_attention_dims, check_no_quant_noise, check_no_xformers
from fairseq_ctx.models.model_config import (
    TransformerFlatConfig,
    add_args_from_dataclass,
    architecture_args,
    register_base_architecture,
    unset,
)
from fairseq_ctx.models.presets import tiny_dims


def parse_layer_spec(spec, num_layers: int, flag: str) -> List[int]:
    """Parse ``all`` / ``none`` / ``1,3,5-6`` (1-based) into sorted 0-based
    layer indices; raise :class:`~fairseq_ctx.errors.ConfigError` (a ValueError)
    naming ``flag`` on bad input."""
    if spec is None:
        return []
    if isinstance(spec, (list, tuple)):
        spec = ",".join(str(s) for s in spec)
    spec = str(spec).strip().lower()
    if spec in ("all", "*"):
        return list(range(num_layers))
    if spec in ("none", ""):
        return []
    chosen = set()
    for part in spec.split(","):
        part = part.strip()
        try:
            if "-" in part:
                lo_s, hi_s = part.split("-", 1)
                lo, hi = int(lo_s), int(hi_s)
            else:
                lo = hi = int(part)
        except ValueError:
            raise ConfigError(
                f"{flag}: cannot parse {part!r} in {spec!r}; expected 'all', 'none' or 1-based layers like '1,2' or '1-4'"
            ) from None
        if lo > hi:
            raise ConfigError(f"{flag}: empty range {part!r}")
        if lo < 1 or hi > num_layers:
            raise ConfigError(
                f"{flag}: layer {lo if lo < 1 else hi} is outside the stack of {num_layers} layers (layers are 1-based)"
            )
        chosen.update(range(lo - 1, hi))
    return sorted(chosen)


def validate_dc_args(args):
    """Raise :class:`~fairseq_ctx.errors.ConfigError` (a ValueError) naming the
    flag for values the model cannot build."""
    if int(args.dc_kernel_size) < 1:
        raise ConfigError(f"--dc-kernel-size must be a positive integer, got {args.dc_kernel_size}")
    enc_layers = getattr(args, "encoder_layers", 6)
    dec_layers = getattr(args, "decoder_layers", 6)
    enc_dc = parse_layer_spec(args.dc_encoder_layers, enc_layers, "--dc-encoder-layers")
    dec_dc = parse_layer_spec(args.dc_decoder_layers, dec_layers, "--dc-decoder-layers")
    if enc_dc or dec_dc:
        check_no_quant_noise(args, "transformer_dc", pq_misses="its Dual Contextual modules",
                             scalar_misses="the convolution weights of its Dual Contextual modules")
    dc_sides = [side for side, layers in (("encoder", enc_dc), ("decoder", dec_dc)) if layers]
    check_no_xformers(args, "transformer_dc", {side: f"the Dual Contextual modules of its {side}" for side in dc_sides})
    # LayerDrop is fine (each DC layer stands alone), but the layers are chosen by number
    if getattr(args, "encoder_layers_to_keep", None) or getattr(args, "decoder_layers_to_keep", None):
        raise ConfigError("--encoder-layers-to-keep / --decoder-layers-to-keep are not supported by transformer_dc "
                          "(--dc-encoder-layers / --dc-decoder-layers name layers by number)")
    if dec_dc and getattr(args, "cross_self_attention", False):
        raise ConfigError("--cross-self-attention cannot be combined with DC decoder layers "
                          f"(--dc-decoder-layers {args.dc_decoder_layers})")
    check_attention_dims(args)


class DCEncoder(TransformerEncoderBase):
    """Transformer encoder whose layers listed in ``cfg.dc_encoder_layers``
    use the DC module (centred convolution) instead of self-attention."""

    def __init__(self, cfg, dictionary, embed_tokens, return_fc=False):
        # read by build_encoder_layer, which the parent constructor calls
        self.dc_layers = parse_layer_spec(
            getattr(cfg, "dc_encoder_layers", "all"), cfg.encoder.layers, "--dc-encoder-layers"
        )
        self._num_layers_built = 0
        super().__init__(cfg, dictionary, embed_tokens, return_fc=return_fc)

    def build_encoder_layer(self, cfg):
        idx = self._num_layers_built
        self._num_layers_built += 1
        if idx not in self.dc_layers:
            return super().build_encoder_layer(cfg)
        return wrap_layer(DualContextualEncoderLayer(cfg, return_fc=self.return_fc), cfg)

    def dc_modules(self) -> List[DualContextualModule]:
        """The DC modules of the encoder, bottom to top (one per DC layer);
        their readouts (``last_readout["alpha"]``, B x 2 x H x T x T) are the
        FI attention probabilities of Eq. 10, before the reduction over heads."""
        return [m for m in self.modules() if isinstance(m, DualContextualModule)]


class DCDecoder(BoolFutureMask, TransformerDecoderBase):
    """Transformer decoder whose layers listed in ``cfg.dc_decoder_layers``
    use the causal DC module instead of masked self-attention (boolean future
    mask: :mod:`fairseq_ctx.modules.future_mask`)."""

    def __init__(self, cfg, dictionary, embed_tokens, no_encoder_attn=False, output_projection=None):
        self.dc_layers = parse_layer_spec(
            getattr(cfg, "dc_decoder_layers", "none"), cfg.decoder.layers, "--dc-decoder-layers"
        )
        self._num_layers_built = 0
        super().__init__(
            cfg, dictionary, embed_tokens, no_encoder_attn=no_encoder_attn, output_projection=output_projection
        )

    def build_decoder_layer(self, cfg, no_encoder_attn=False):
        idx = self._num_layers_built
        self._num_layers_built += 1
        if idx not in self.dc_layers:
            return super().build_decoder_layer(cfg, no_encoder_attn)
        return wrap_layer(DualContextualDecoderLayer(cfg, no_encoder_attn), cfg)


@dataclass
class TransformerDCConfig(TransformerFlatConfig):
    """``transformer_dc``'s flags: fairseq's Transformer plus the DC module's
    (None: the architecture's default, see the ``transformer_dc*`` presets)."""

    dc_kernel_size: Optional[int] = unset(
        "kernel size f of the DC local convolution (Eq. 6; paper default 2)", metavar="F")
    dc_encoder_layers: Optional[str] = unset(
        "encoder layers that use the DC module: 'all', 'none' or 1-based list/ranges such as '1,2' or '1-4' "
        "(Table 5)", metavar="LAYERS")
    dc_decoder_layers: Optional[str] = unset(
        "decoder layers that use the (causal) DC module: 'all', 'none' or 1-based list/ranges", metavar="LAYERS")


@register_model("transformer_dc", dataclass=TransformerDCConfig)
class TransformerDCModel(TransformerModel):
    """Transformer with Dual Contextual modules (Ampomah et al. 2021).

    Encoder/decoder outputs, incremental decoding and beam reordering follow
    fairseq's Transformer; the DC modules keep their own incremental state
    (cached conv inputs, FI keys/values) and reorder it in
    ``reorder_incremental_state``.
    """

    @classmethod
    def add_args(cls, parser):
        add_args_from_dataclass(parser, TransformerDCConfig)

    @classmethod
    def build_model(cls, args, task):
        args = architecture_args(args, "transformer_dc")
        validate_dc_args(args)
        return super().build_model(args, task)

    @classmethod
    def build_encoder(cls, args, src_dict, embed_tokens):
        return DCEncoder(TransformerConfig.from_namespace(args), src_dict, embed_tokens)

    @classmethod
    def build_decoder(cls, args, tgt_dict, embed_tokens):
        cfg = TransformerConfig.from_namespace(args)
        return DCDecoder(cfg, tgt_dict, embed_tokens, no_encoder_attn=cfg.no_cross_attention)


# ---------------------------------------------------------------------------
# architectures
# ---------------------------------------------------------------------------
def _dc_defaults(args, enc="all", dec="none"):
    args.dc_kernel_size = getattr(args, "dc_kernel_size", DC_DEFAULT_KERNEL_SIZE)
    args.dc_encoder_layers = getattr(args, "dc_encoder_layers", enc)
    args.dc_decoder_layers = getattr(args, "dc_decoder_layers", dec)


@register_base_architecture("transformer_dc")
def transformer_dc(args):
    """Enc-DC, Transformer-Base."""
    _dc_defaults(args, "all", "none")
    base_architecture(args)


@register_model_architecture("transformer_dc", "transformer_dc_dec")
def transformer_dc_dec(args):
    """Dec-DC, Transformer-Base."""
    _dc_defaults(args, "none", "all")
    transformer_dc(args)


@register_model_architecture("transformer_dc", "transformer_dc_full")
def transformer_dc_full(args):
    """Full-DC, Transformer-Base."""
    _dc_defaults(args, "all", "all")
    transformer_dc(args)


@register_model_architecture("transformer_dc", "transformer_dc_big")
def transformer_dc_big(args):
    """Enc-DC, Transformer-Big."""
    _dc_defaults(args, "all", "none")
    transformer_wmt_en_de_big(args)


@register_model_architecture("transformer_dc", "transformer_dc_dec_big")
def transformer_dc_dec_big(args):
    _dc_defaults(args, "none", "all")
    transformer_dc_big(args)


@register_model_architecture("transformer_dc", "transformer_dc_full_big")
def transformer_dc_full_big(args):
    _dc_defaults(args, "all", "all")
    transformer_dc_big(args)


def _iwslt_dims(args):
    # Sect. 5.2: 4+4 layers, hidden 256, 4 heads for the IWSLT tasks
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 256)
    args.encoder_ffn_embed_dim = getattr(args, "encoder_ffn_embed_dim", 1024)
    args.encoder_attention_heads = getattr(args, "encoder_attention_heads", 4)
    args.encoder_layers = getattr(args, "encoder_layers", 4)
    args.decoder_embed_dim = getattr(args, "decoder_embed_dim", 256)
    args.decoder_ffn_embed_dim = getattr(args, "decoder_ffn_embed_dim", 1024)
    args.decoder_attention_heads = getattr(args, "decoder_attention_heads", 4)
    args.decoder_layers = getattr(args, "decoder_layers", 4)


@register_model_architecture("transformer_dc", "transformer_dc_iwslt")
def transformer_dc_iwslt(args):
    """Enc-DC, the paper's IWSLT size."""
    _dc_defaults(args, "all", "none")
    _iwslt_dims(args)
    transformer_iwslt_de_en(args)


@register_model_architecture("transformer_dc", "transformer_dc_dec_iwslt")
def transformer_dc_dec_iwslt(args):
    _dc_defaults(args, "none", "all")
    transformer_dc_iwslt(args)


@register_model_architecture("transformer_dc", "transformer_dc_full_iwslt")
def transformer_dc_full_iwslt(args):
    _dc_defaults(args, "all", "all")
    transformer_dc_iwslt(args)


@register_model_architecture("transformer_dc", "transformer_dc_tiny")
def transformer_dc_tiny(args):
    """Enc-DC, 2+2 layers, d=16, ffn 32, 2 heads (tests)."""
    tiny_dims(args)
    transformer_dc(args)
