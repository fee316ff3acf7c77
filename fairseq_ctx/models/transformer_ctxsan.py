"""transformer_ctxsan: Context-Aware Self-Attention Networks (Yang et al.,
AAAI 2019).

The queries and keys of self-attention are gated mixtures of their usual
projections and a projection of a context vector (Eq. 5-7): the global context
(the mean of the layer input, Eq. 8), the deep context (the inputs of the
layers below, Eq. 9), the deep-global context (the means of the inputs of this
and the lower layers, Eq. 10), or deep-global + deep summed after projection.
See :mod:`fairseq_ctx.modules.context_aware_attention` for the equations and
the choices made where the paper is ambiguous.

Flags (every row of Table 1 and Table 3)::

    --ctxsan-context {global,deep,deep-global,deep-global+deep}  (default deep-global+deep)
    --ctxsan-side {encoder,decoder,both}                         (default encoder)
    --ctxsan-contextualize {query,key,both}                      (default both)

The defaults are the paper's recommended model (Table 1 row 5). Parameter
growth over ``transformer`` with Base dimensions (d=512, 6+6 layers), per
layer ``l`` ``U_Q, U_K: d_c x d`` plus gates ``4d``: global 6*2d^2 = +3.15M,
deep-global 21*2d^2 = +11.0M, deep 15*2d^2 = +7.9M, deep-global + deep
+18.9M per side; tested in ``tests/test_ctxsan.py``.

Decoder side: the global context is the causal prefix mean (footnote 2) and
the deep context uses only the lower decoder layers. In incremental decoding
the decoder keeps the running sums of its layer inputs in the incremental
state (one step costs the same whatever the prefix length) and each layer
caches its contextualised keys, so every key keeps the context of its own step.
"""
from typing import Any, Dict, List, Optional

import torch
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

from fairseq_ctx.errors import ConfigError
from fairseq_ctx.modules.context_aware_attention import (
    CONTEXT_TYPES,
    CONTEXTUALIZE,
    ContextHistory,
    context_parts,
)
from fairseq_ctx.modules.ctxsan_layer import CtxSanDecoderLayer, CtxSanEncoderLayer
from fairseq_ctx.models.presets import check_attention_dims, tiny_dims

SIDES = ("encoder", "decoder", "both")


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
    for side in sides:
        # the context of layer l is sized by l, so the stack must run every layer in order
        if getattr(args, f"{side}_layerdrop", 0) > 0:
            raise ConfigError(f"--{side}-layerdrop is not supported on the context-aware side ({side})")
        if getattr(args, f"{side}_layers_to_keep", None):
            raise ConfigError(f"--{side}-layers-to-keep is not supported on the context-aware side ({side})")
        if getattr(args, f"{side}_layers", 1) < 1:
            raise ConfigError(f"--{side}-layers must be at least 1")
    if getattr(args, "checkpoint_activations", False) or getattr(args, "offload_activations", False):
        raise ConfigError("--checkpoint-activations is not supported by transformer_ctxsan")
    if args.ctxsan_side != "encoder":
        for flag in ("cross_self_attention", "scale_attn", "scale_heads", "scale_fc", "scale_resids"):
            if getattr(args, flag, False):
                raise ConfigError(f"--{flag.replace('_', '-')} is not supported with a context-aware decoder")
        if getattr(args, "base_layers", 0):
            raise ConfigError("--base-layers is not supported with a context-aware decoder")


class CtxSanEncoder(TransformerEncoderBase):
    """Transformer encoder whose layers get the history of layer inputs
    (deep / deep-global context, Eq. 9-10)."""

    def __init__(self, cfg, dictionary, embed_tokens):
        self._ctx_layers_built = 0
        super().__init__(cfg, dictionary, embed_tokens)
        self.ctx_need_states, self.ctx_need_means = _needs(cfg.ctxsan_context)

    def build_encoder_layer(self, cfg):
        # called once per layer, in order, from TransformerEncoderBase.__init__
        self._ctx_layers_built += 1
        return CtxSanEncoderLayer(cfg, self._ctx_layers_built, cfg.ctxsan_context, cfg.ctxsan_contextualize)

    def forward_scriptable(self, src_tokens, src_lengths: Optional[Tensor] = None,
                           return_all_hiddens: bool = False, token_embeddings: Optional[Tensor] = None):
        """Mirrors ``TransformerEncoderBase.forward_scriptable``; the layer loop
        also records each layer's input in a :class:`ContextHistory` that the
        layers read their context from."""
        encoder_padding_mask = src_tokens.eq(self.padding_idx)  # B x T
        has_pads = bool(encoder_padding_mask.any())
        x, encoder_embedding = self.forward_embedding(src_tokens, token_embeddings)
        if has_pads:
            x = x * (1 - encoder_padding_mask.unsqueeze(-1).type_as(x))
        x = x.transpose(0, 1)  # B x T x C -> T x B x C
        pad = encoder_padding_mask if has_pads else None

        history = ContextHistory(pad, self.ctx_need_states, self.ctx_need_means, causal=False)
        encoder_states = [x] if return_all_hiddens else []
        for layer in self.layers:
            history.push(x)
            x = layer(x, encoder_padding_mask=pad, history=history)
            if return_all_hiddens:
                encoder_states.append(x)

        if self.layer_norm is not None:
            x = self.layer_norm(x)
        src_lengths = src_tokens.ne(self.padding_idx).sum(dim=1, dtype=torch.int32).reshape(-1, 1).contiguous()
        return {
            "encoder_out": [x],  # T x B x C
            "encoder_padding_mask": [encoder_padding_mask],  # B x T
            "encoder_embedding": [encoder_embedding],  # B x T x C
            "encoder_states": encoder_states,  # List[T x B x C]
            "fc_results": [],
            "src_tokens": [],
            "src_lengths": [src_lengths],  # B x 1
        }


class CtxSanDecoder(TransformerDecoderBase):
    """Transformer decoder with causal context-aware self-attention: prefix
    means (footnote 2), lower decoder layers only, running sums in the
    incremental state."""

    def __init__(self, cfg, dictionary, embed_tokens, no_encoder_attn=False, output_projection=None):
        self._ctx_layers_built = 0
        super().__init__(cfg, dictionary, embed_tokens, no_encoder_attn=no_encoder_attn,
                         output_projection=output_projection)
        self.ctx_need_states, self.ctx_need_means = _needs(cfg.ctxsan_context)

    def build_decoder_layer(self, cfg, no_encoder_attn=False):
        # called once per layer, in order, from TransformerDecoderBase.__init__
        self._ctx_layers_built += 1
        return CtxSanDecoderLayer(cfg, self._ctx_layers_built, cfg.ctxsan_context, cfg.ctxsan_contextualize,
                                  no_encoder_attn=no_encoder_attn)

    def extract_features_scriptable(
        self,
        prev_output_tokens,
        encoder_out: Optional[Dict[str, List[Tensor]]],
        incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None,
        full_context_alignment: bool = False,
        alignment_layer: Optional[int] = None,
        alignment_heads: Optional[int] = None,
    ):
        """Mirrors ``TransformerDecoderBase.extract_features_scriptable``; the
        layer loop also records each layer's input in a causal
        :class:`ContextHistory` whose running sums live in the incremental state."""
        if full_context_alignment:
            raise ValueError("transformer_ctxsan decoder self-attention is always causal "
                             "(full_context_alignment is not supported)")
        if alignment_layer is None:
            alignment_layer = self.num_layers - 1

        enc: Optional[Tensor] = None
        padding_mask: Optional[Tensor] = None
        if encoder_out is not None and len(encoder_out["encoder_out"]) > 0:
            enc = encoder_out["encoder_out"][0]
        if encoder_out is not None and len(encoder_out["encoder_padding_mask"]) > 0:
            padding_mask = encoder_out["encoder_padding_mask"][0]

        positions = None
        if self.embed_positions is not None:
            positions = self.embed_positions(prev_output_tokens, incremental_state=incremental_state)
        if incremental_state is not None:
            prev_output_tokens = prev_output_tokens[:, -1:]
            if positions is not None:
                positions = positions[:, -1:]
        prev_output_tokens = prev_output_tokens.contiguous()

        x = self.embed_scale * self.embed_tokens(prev_output_tokens)
        if self.quant_noise is not None:
            x = self.quant_noise(x)
        if self.project_in_dim is not None:
            x = self.project_in_dim(x)
        if positions is not None:
            x += positions
        if self.layernorm_embedding is not None:
            x = self.layernorm_embedding(x)
        x = self.dropout_module(x)
        x = x.transpose(0, 1)  # B x T x C -> T x B x C

        self_attn_padding_mask: Optional[Tensor] = None
        if prev_output_tokens.eq(self.padding_idx).any():
            self_attn_padding_mask = prev_output_tokens.eq(self.padding_idx)  # B x T

        prev_sums = self.get_incremental_state(incremental_state, "ctx_sums") if incremental_state is not None else None
        history = ContextHistory(self_attn_padding_mask, self.ctx_need_states, self.ctx_need_means, causal=True,
                                 prev_sums=prev_sums, incremental=incremental_state is not None)

        attn: Optional[Tensor] = None
        inner_states: List[Optional[Tensor]] = [x]
        for idx, layer in enumerate(self.layers):
            history.push(x)
            x, layer_attn, _ = layer(
                x,
                enc,
                padding_mask,
                incremental_state,
                self_attn_padding_mask=self_attn_padding_mask,
                need_attn=bool(idx == alignment_layer),
                need_head_weights=bool(idx == alignment_layer),
                history=history,
            )
            inner_states.append(x)
            if layer_attn is not None and idx == alignment_layer:
                attn = layer_attn.float().to(x)
        if incremental_state is not None and self.ctx_need_means:
            self.set_incremental_state(incremental_state, "ctx_sums", history.new_sums)

        if attn is not None:
            if alignment_heads is not None:
                attn = attn[:alignment_heads]
            attn = attn.mean(dim=0)  # average probabilities over heads
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        x = x.transpose(0, 1)  # T x B x C -> B x T x C
        if self.project_out_dim is not None:
            x = self.project_out_dim(x)
        return x, {"attn": [attn], "inner_states": inner_states}

    def reorder_incremental_state(self, incremental_state: Dict[str, Dict[str, Optional[Tensor]]],
                                  new_order: Tensor):
        """Beam search: reorder the running sums of the prefix means (the
        layers reorder their cached keys and values themselves)."""
        sums = self.get_incremental_state(incremental_state, "ctx_sums")
        if sums is not None:
            for key, value in sums.items():
                if value is not None:
                    sums[key] = value.index_select(0, new_order)
            self.set_incremental_state(incremental_state, "ctx_sums", sums)


@register_model("transformer_ctxsan")
class TransformerCtxSanModel(TransformerModel):
    """Transformer with Context-Aware Self-Attention Networks (Yang et al.,
    AAAI 2019) on the encoder, the decoder or both."""

    @classmethod
    def add_args(cls, parser):
        super().add_args(parser)
        # no argparse choices/defaults: architecture functions set the defaults
        # and validate_ctxsan_args raises a ValueError naming the flag
        parser.add_argument("--ctxsan-context", type=str, metavar="TYPE",
                            help="context vector: global (Eq. 8), deep (Eq. 9), deep-global (Eq. 10) "
                                 "or deep-global+deep (the two projections summed); default deep-global+deep")
        parser.add_argument("--ctxsan-side", type=str, metavar="SIDE",
                            help="where self-attention is context-aware: encoder, decoder or both; default encoder")
        parser.add_argument("--ctxsan-contextualize", type=str, metavar="WHAT",
                            help="contextualise the query, the key or both (Table 3); default both")

    @classmethod
    def build_model(cls, args, task):
        transformer_ctxsan(args)
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
        if cfg.ctxsan_side in ("decoder", "both"):
            return CtxSanDecoder(cfg, tgt_dict, embed_tokens, no_encoder_attn=cfg.no_cross_attention)
        return super().build_decoder(args, tgt_dict, embed_tokens)

    def ctxsan_attentions(self) -> Dict[str, List[Any]]:
        """The context-aware self-attention modules, per side, bottom to top
        (for reading the gates, see ``fairseq_ctx.analysis.ctxsan_gates``)."""
        out: Dict[str, List[Any]] = {}
        for side, stack in (("encoder", self.encoder), ("decoder", self.decoder)):
            if isinstance(stack, (CtxSanEncoder, CtxSanDecoder)):
                out[side] = [layer.self_attn for layer in stack.layers]
        return out


def _ctxsan_defaults(args):
    args.ctxsan_context = getattr(args, "ctxsan_context", None) or "deep-global+deep"
    args.ctxsan_side = getattr(args, "ctxsan_side", None) or "encoder"
    args.ctxsan_contextualize = getattr(args, "ctxsan_contextualize", None) or "both"


@register_model_architecture("transformer_ctxsan", "transformer_ctxsan")
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
