"""transformer_ctxsan: Context-Aware Self-Attention Networks (Yang et al.,
AAAI 2019).

The queries and keys of self-attention are gated mixtures of their usual
projections and a projection of a context vector (Eq. 5-7): the global context
(the mean of the layer input H, Eq. 8), the deep context (the H of the
layers below, Eq. 9), the deep-global context (the means of the H of this
and the lower layers, Eq. 10), or deep-global + deep summed after
projection. H is what the self-attention is given: the layer input, after
the pre-norm with ``--*-normalize-before``.
See :mod:`fairseq_ctx.modules.ctxsan_attention` for the equations and
the choices made where the paper is ambiguous.

Flags (every row of Table 1 and Table 3)::

    --ctxsan-context {global,deep,deep-global,deep-global+deep}  (default deep-global+deep)
    --ctxsan-side {encoder,decoder,both}                         (default encoder)
    --ctxsan-contextualize {query,key,both}                      (default both)

    --ctxsan-no-gate                                             (footnote 1's ablation)

The defaults are the paper's recommended model (Table 1 row 5).
``--ctxsan-no-gate`` is the ablation of footnote 1, "without {lambda_Q,
lambda_K}" (-5.23 BLEU, in no table): the contextualised queries and keys
are the unweighted sums ``Q + C U_Q``, ``K + C U_K`` (the paper does not
write that equation; see :mod:`fairseq_ctx.modules.ctxsan_attention` for
why the sum and not a fixed 0.5 mix), and the gate vectors ``V^H``,
``V^C`` are not built (``2d`` fewer parameters per contextualised Q or K
of a context-aware layer).
Parameter growth over ``transformer`` with Base dimensions (d=512, 6+6 layers), per
layer ``l`` ``U_Q, U_K: d_c x d`` plus gates ``4d``: global 6*2d^2 = +3.15M,
deep-global 21*2d^2 = +11.0M, deep 15*2d^2 = +7.9M, deep-global + deep
+18.9M per side; tested in ``tests/test_ctxsan.py``.

Decoder side: the global context is the causal prefix mean (footnote 2) and
the deep context uses only the lower decoder layers. In incremental decoding
the decoder keeps the running sums of its layers' H in the incremental
state (one step costs the same whatever the prefix length) and each layer
caches its contextualised keys, so every key keeps the context of its own step.

Built through fairseq's hooks: the encoder and decoder wrap fairseq's own
forward with one context history per forward (``HistorySlot``), the layers
(``fairseq_ctx.modules.ctxsan_layer``) push their H into it and build a
context-aware self-attention with ``MultiheadAttention``'s call signature.
"""
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import TransformerConfig, TransformerModel
from fairseq.models.transformer.transformer_decoder import TransformerDecoderBase
from fairseq.models.transformer.transformer_encoder import TransformerEncoderBase
from fairseq.models.transformer.transformer_legacy import (
    base_architecture,
    transformer_iwslt_de_en,
    transformer_wmt_en_de_big,
)
from torch import Tensor

from fairseq_ctx.model_options import CTXSAN_ABLATIONS, CTXSAN_DEFAULTS
from fairseq_ctx.model_options import CTXSAN_SIDES as SIDES
from fairseq_ctx.errors import ConfigError
from fairseq_ctx.modules.ctxsan_attention import (
    CONTEXT_TYPES,
    CONTEXTUALIZE,
    ContextHistory,
    HistorySlot,
    context_parts,
)
from fairseq_ctx.modules.ctxsan_layer import CtxSanDecoderLayer, CtxSanEncoderLayer
from fairseq_ctx.modules.future_mask import BoolFutureMask
from fairseq_ctx.modules.incremental_cache import reorder_cache
from fairseq_ctx.models.checks import (
    check_attention_dims,
    check_every_layer_runs,
    check_no_quant_noise,
    check_no_xformers,
)
from fairseq_ctx.models.layer_wrapping import wrap_layer
from fairseq_ctx.models.model_config import (
    TransformerFlatConfig,
    add_args_from_dataclass,
    architecture_args,
    register_base_architecture,
    unset,
)
from fairseq_ctx.models.presets import tiny_dims


def _needs(context: str):
    """(need_states, need_means) of a context type."""
    parts = context_parts(context)
    return "deep" in parts, any(p in ("global", "deep-global") for p in parts)


def validate_ctxsan_args(args):
    """Raise :class:`~fairseq_ctx.errors.ConfigError` (a ValueError) naming the
    flag for values the model cannot build."""
    args.ctxsan_context = args.ctxsan_context.replace(" ", "")  # accept "deep-global + deep"
    if args.ctxsan_context not in CONTEXT_TYPES:
        raise ConfigError(f"--ctxsan-context must be one of {', '.join(CONTEXT_TYPES)}; got {args.ctxsan_context!r}")
    if args.ctxsan_side not in SIDES:
        raise ConfigError(f"--ctxsan-side must be one of {', '.join(SIDES)}; got {args.ctxsan_side!r}")
    if args.ctxsan_contextualize not in CONTEXTUALIZE:
        raise ConfigError(
            f"--ctxsan-contextualize must be one of {', '.join(CONTEXTUALIZE)}; got {args.ctxsan_contextualize!r}"
        )
    check_attention_dims(args)
    sides = ["encoder", "decoder"] if args.ctxsan_side == "both" else [args.ctxsan_side]
    check_every_layer_runs(args, sides, "transformer_ctxsan",
                           "on the context-aware side the context of layer l is sized by l (Eq. 9-10)")
    check_no_xformers(args, "transformer_ctxsan", {side: "its context-aware self-attention" for side in sides})
    check_no_quant_noise(args, "transformer_ctxsan",
                         pq_misses="its context-aware self-attention (projections, context and gate weights)",
                         scalar_misses="its self-attention's projections, which it applies through their weights "
                                       "(fused), and its gate vectors")
    if args.ctxsan_side != "encoder":
        for flag in ("cross_self_attention", "scale_attn", "scale_heads", "scale_fc", "scale_resids"):
            if getattr(args, flag, False):
                raise ConfigError(f"--{flag.replace('_', '-')} is not supported with a context-aware decoder")
        if getattr(args, "base_layers", 0):
            raise ConfigError("--base-layers is not supported with a context-aware decoder")


class CtxSanEncoder(TransformerEncoderBase):
    """Transformer encoder whose layers get the history of their ``H^l``
    (the contexts of Eq. 8-10): fairseq's forward, run inside a fresh
    :class:`ContextHistory` that each layer pushes its ``H^l`` into."""

    def __init__(self, cfg, dictionary, embed_tokens):
        self._ctx_layers_built = 0
        self.ctx_slot = HistorySlot()
        super().__init__(cfg, dictionary, embed_tokens)
        self.ctx_need_states, self.ctx_need_means = _needs(cfg.ctxsan_context)

    def build_encoder_layer(self, cfg):
        # called once per layer, in order, from TransformerEncoderBase.__init__
        self._ctx_layers_built += 1
        return wrap_layer(CtxSanEncoderLayer(cfg, self._ctx_layers_built, cfg.ctxsan_context,
                                             cfg.ctxsan_contextualize, self.ctx_slot, gated=not cfg.ctxsan_no_gate),
                          cfg, checkpoints_itself=True)

    def forward_scriptable(self, src_tokens, src_lengths: Optional[Tensor] = None,
                           return_all_hiddens: bool = False, token_embeddings: Optional[Tensor] = None):
        with self.ctx_slot.open(ContextHistory(self.ctx_need_states, self.ctx_need_means, causal=False)):
            return super().forward_scriptable(src_tokens, src_lengths, return_all_hiddens, token_embeddings)


class CtxSanDecoder(BoolFutureMask, TransformerDecoderBase):
    """Transformer decoder with causal context-aware self-attention: prefix
    means (footnote 2), lower decoder layers only, running sums of the
    layers' ``H^l`` in the incremental state (a step costs the same whatever the
    prefix length). With ``--ctxsan-side encoder`` its layers are fairseq's
    own and it is fairseq's decoder; either way its future mask is boolean
    (:mod:`fairseq_ctx.modules.future_mask`)."""

    def __init__(self, cfg, dictionary, embed_tokens, no_encoder_attn=False, output_projection=None):
        self._ctx_layers_built = 0
        self.ctx_slot = HistorySlot()
        self.ctx_aware = cfg.ctxsan_side in ("decoder", "both")
        super().__init__(cfg, dictionary, embed_tokens, no_encoder_attn=no_encoder_attn,
                         output_projection=output_projection)
        self.ctx_need_states, self.ctx_need_means = _needs(cfg.ctxsan_context)

    def build_decoder_layer(self, cfg, no_encoder_attn=False):
        # called once per layer, in order, from TransformerDecoderBase.__init__
        if not self.ctx_aware:
            return super().build_decoder_layer(cfg, no_encoder_attn)
        self._ctx_layers_built += 1
        return wrap_layer(CtxSanDecoderLayer(cfg, self._ctx_layers_built, cfg.ctxsan_context,
                                             cfg.ctxsan_contextualize, self.ctx_slot,
                                             no_encoder_attn=no_encoder_attn, gated=not cfg.ctxsan_no_gate),
                          cfg, checkpoints_itself=True)

    def extract_features_scriptable(
        self,
        prev_output_tokens,
        encoder_out: Optional[Dict[str, List[Tensor]]],
        incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None,
        full_context_alignment: bool = False,
        alignment_layer: Optional[int] = None,
        alignment_heads: Optional[int] = None,
    ):
        if not self.ctx_aware:
            return super().extract_features_scriptable(prev_output_tokens, encoder_out, incremental_state,
                                                       full_context_alignment, alignment_layer, alignment_heads)
        if full_context_alignment:
            raise ValueError("transformer_ctxsan decoder self-attention is always causal "
                             "(full_context_alignment is not supported)")
        incremental = incremental_state is not None
        prev_sums = self.get_incremental_state(incremental_state, "ctx_sums") if incremental else None
        history = ContextHistory(self.ctx_need_states, self.ctx_need_means, causal=True,
                                 prev_sums=prev_sums, incremental=incremental)
        with self.ctx_slot.open(history):
            out = super().extract_features_scriptable(prev_output_tokens, encoder_out, incremental_state,
                                                      full_context_alignment, alignment_layer, alignment_heads)
        if incremental and self.ctx_need_means:
            self.set_incremental_state(incremental_state, "ctx_sums", history.new_sums)
        return out

    def reorder_incremental_state(self, incremental_state: Dict[str, Dict[str, Optional[Tensor]]],
                                  new_order: Tensor):
        """Beam search: reorder the running sums of the prefix means (the
        layers reorder their cached keys and values themselves)."""
        return reorder_cache(self, incremental_state, "ctx_sums", new_order)


@dataclass
class TransformerCtxSanConfig(TransformerFlatConfig):
    """``transformer_ctxsan``'s flags: fairseq's Transformer plus the context
    type, side, what is contextualised and footnote 1's ablation. Plain
    strings with their choices in the metadata, not enums:
    validate_ctxsan_args checks them at build time with an error naming the
    flag (and accepts "deep-global + deep")."""

    ctxsan_context: Optional[str] = unset(
        "context vector: global (Eq. 8), deep (Eq. 9), deep-global (Eq. 10) or deep-global+deep (the two "
        "projections summed); default deep-global+deep", metavar="TYPE", choices=CONTEXT_TYPES)
    ctxsan_side: Optional[str] = unset(
        "where self-attention is context-aware: encoder, decoder or both; default encoder",
        metavar="SIDE", choices=SIDES)
    ctxsan_contextualize: Optional[str] = unset(
        "contextualise the query, the key or both (Table 3); default both", metavar="WHAT", choices=CONTEXTUALIZE)
    ctxsan_no_gate: Optional[bool] = unset(
        "ablation (footnote 1): no gates lambda_Q, lambda_K; the contextualised query and key are Q + C U_Q and "
        "K + C U_K")


@register_model("transformer_ctxsan", dataclass=TransformerCtxSanConfig)
class TransformerCtxSanModel(TransformerModel):
    """Transformer with Context-Aware Self-Attention Networks (Yang et al.,
    AAAI 2019) on the encoder, the decoder or both."""

    @classmethod
    def add_args(cls, parser):
        add_args_from_dataclass(parser, TransformerCtxSanConfig)

    @classmethod
    def build_model(cls, args, task):
        args = architecture_args(args, "transformer_ctxsan")
        validate_ctxsan_args(args)
        return super().build_model(args, task)

    @classmethod
    def build_encoder(cls, args, src_dict, embed_tokens):
        cfg = TransformerConfig.from_namespace(args)
        if cfg.ctxsan_side in ("encoder", "both"):
            return CtxSanEncoder(cfg, src_dict, embed_tokens)
        return super().build_encoder(args, src_dict, embed_tokens)

    @classmethod
    def build_decoder(cls, args, tgt_dict, embed_tokens):
        cfg = TransformerConfig.from_namespace(args)
        return CtxSanDecoder(cfg, tgt_dict, embed_tokens, no_encoder_attn=cfg.no_cross_attention)

    def ctxsan_attentions(self) -> Dict[str, List[Any]]:
        """The context-aware self-attention modules, per side, bottom to top
        (for reading the gates, see ``fairseq_ctx.analysis.ctxsan_gates``)."""
        out: Dict[str, List[Any]] = {}
        for side, stack in (("encoder", self.encoder), ("decoder", self.decoder)):
            if isinstance(stack, CtxSanEncoder) or (isinstance(stack, CtxSanDecoder) and stack.ctx_aware):
                out[side] = [layer.self_attn for layer in stack.layers]
        return out


def _ctxsan_defaults(args):
    for key, default in CTXSAN_DEFAULTS.items():
        setattr(args, key, getattr(args, key, None) or default)
    for key in CTXSAN_ABLATIONS:
        setattr(args, key, bool(getattr(args, key, None)))


@register_base_architecture("transformer_ctxsan")
def transformer_ctxsan(args):
    """Transformer-Base (d=512, 6+6 layers, 8 heads, ffn 2048) + context-aware SANs."""
    _ctxsan_defaults(args)
    base_architecture(args)


@register_model_architecture("transformer_ctxsan", "transformer_ctxsan_big")
def transformer_ctxsan_big(args):
    """Transformer-Big (d=1024, 16 heads, ffn 4096) + context-aware SANs (Table 2)."""
    _ctxsan_defaults(args)
    transformer_wmt_en_de_big(args)


@register_model_architecture("transformer_ctxsan", "transformer_ctxsan_iwslt_de_en")
def transformer_ctxsan_iwslt_de_en(args):
    """IWSLT-size preset (d=512, ffn 1024, 4 heads) + context-aware SANs."""
    _ctxsan_defaults(args)
    transformer_iwslt_de_en(args)


@register_model_architecture("transformer_ctxsan", "transformer_ctxsan_tiny")
def transformer_ctxsan_tiny(args):
    """Tiny preset for tests: 2+2 layers, dim 16, ffn 32, 2 heads."""
    tiny_dims(args)
    transformer_ctxsan(args)
