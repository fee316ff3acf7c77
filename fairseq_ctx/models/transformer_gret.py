"""GRET: Global Representation Enhanced Transformer (Weng et al., AAAI 2020).

Spec: the paper, and the GRET notes of ``docs/ambiguities.md``.

* Encoder (:class:`GretEncoder`): a plain Transformer encoder whose every
  layer's states are summarised into K capsules by dynamic routing (Eq. 2-6),
  pooled attentively (Eq. 7-9) and aggregated over the layers by a GRU
  (Eq. 10), see :class:`fairseq_ctx.modules.gret_global.GlobalRepresentation`.
  The global state s^M (B x C) travels in ``encoder_out["gret_global"]`` and
  is reordered in :meth:`GretEncoder.reorder_encoder_out`.
* Decoder (:class:`GretDecoder`): a plain Transformer decoder whose top states
  (the output of :meth:`extract_features`, Eq. 11) pass through the context
  gate (Eq. 12-13, :class:`fairseq_ctx.modules.gret_context_gate.ContextGate`)
  before the output projection (Eq. 14). Per decoding step this costs one
  d x d product, a sigmoid and a multiply-add: the global state's share of
  the gate (W_s s) is computed once per sentence and kept in the incremental
  state; s itself is read from ``encoder_out`` at every step.

Flags: ``--gret-capsules K`` (32), ``--gret-routing-iters r`` (3),
``--gret-routing-softmax {capsules,positions}`` (see
:mod:`fairseq_ctx.modules.gret_capsule_routing`), and the ablations of Table 3:
``--gret-no-capsule`` (masked mean pooling instead of capsules + attentive
pooling), ``--gret-no-aggregation`` (last encoder layer only, no GRU),
``--gret-no-gate`` (plain addition r + s).

Warm start (Section 3.1: GRET is trained from the baseline's parameters):
``--gret-warm-start PATH`` loads a trained plain ``transformer`` checkpoint
when the model is built for training from scratch, copies every tensor whose
name and shape match, starts the GRET parameters fresh, and logs what was
loaded and what is new. A tensor with a matching name and another shape is an
error naming the parameter and both shapes. The warm start is skipped when
fairseq-train is about to restore a checkpoint (``--restore-file`` or
``checkpoint_last.pt`` in ``--save-dir``), and once done the path is cleared
from the model's arguments, so checkpoints of the warm-started model never
read (or need) the baseline again when they are loaded.

Parameter growth with Base dimensions (d = 512, 6 + 6 layers, K = 32),
against the paper's +6.4M (Table 3, 68.3M vs 61.9M):

=====================================================  ==========
per encoder layer: routing W (d^2) + capsule scales      278,528
  (K d), attentive pooling (2 x (d^2 + d))             + 525,312
  = 803,840, x 6 layers                                4,823,040
layer-wise GRU cell, 3 x (2 d^2 + 2 d)                 1,575,936
context gate, W_r (d^2 + d) + W_s (d^2)                  524,800
total                                                  6,923,776
=====================================================  ==========

That is +6.92M, 8% above the paper's +6.4M. The ablations: no capsule
(+2.10M: GRU + gate), no aggregation (+1.33M: one layer's capsules + pooling
+ gate), no gate (+6.40M).

Cost: routing adds one d x d product per token and encoder layer plus small
batched products; a decoding step adds the gate's one d x d product.
Measured speeds: ``docs/benchmarks.md``.
"""
import logging
import os
from dataclasses import dataclass
from typing import Optional

from fairseq import checkpoint_utils
from fairseq.dataclass import ChoiceEnum
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import (
    TransformerConfig,
    TransformerDecoderBase,
    TransformerEncoderBase,
    TransformerModel,
    base_architecture,
    transformer_iwslt_de_en,
    transformer_wmt_en_de_big,
)

from fairseq_ctx.errors import CheckpointMismatchError, ConfigError, MissingFileError
from fairseq_ctx.models.checks import check_attention_dims, check_every_layer_runs, check_no_quant_noise
from fairseq_ctx.models.model_config import (
    TransformerFlatConfig,
    add_args_from_dataclass,
    architecture_args,
    clear_in_stored_config,
    register_base_architecture,
    root_config,
    unset,
)
from fairseq_ctx.models.presets import tiny_dims
from fairseq_ctx.model_options import GRET_DEFAULT_CAPSULES
from fairseq_ctx.modules.gret_capsule_routing import ROUTING_SOFTMAX_CHOICES
from fairseq_ctx.modules.gret_context_gate import ContextGate
from fairseq_ctx.modules.future_mask import BoolFutureMask
from fairseq_ctx.modules.gret_global import GlobalRepresentation

logger = logging.getLogger(__name__)


class GretEncoder(TransformerEncoderBase):
    """Transformer encoder that also returns the global state
    ``encoder_out["gret_global"] = [s^M]`` (B x C), Eq. 2-10."""

    def __init__(self, cfg, dictionary, embed_tokens, return_fc=False):
        super().__init__(cfg, dictionary, embed_tokens, return_fc=return_fc)
        self.gret_global = GlobalRepresentation(
            embed_tokens.embedding_dim,
            self.num_layers,
            num_capsules=cfg.gret_capsules,
            iterations=cfg.gret_routing_iters,
            softmax_over=cfg.gret_routing_softmax,
            use_capsules=not cfg.gret_no_capsule,
            aggregate=not cfg.gret_no_aggregation,
        )

    def forward_scriptable(self, src_tokens, src_lengths=None, return_all_hiddens: bool = False,
                           token_embeddings=None):
        # Every layer's output is needed for Eq. 10, so ask the upstream
        # forward for all hidden states and drop them again unless the caller
        # wanted them (reorder_encoder_out would otherwise reorder them all at
        # every beam step).
        out = super().forward_scriptable(src_tokens, src_lengths, True, token_embeddings)
        layer_states = list(out["encoder_states"][1:])  # [0] is the embedding output
        # The top layer's states are taken as the decoder sees them (after the
        # final LayerNorm of pre-norm encoders; identical for post-norm). Eq. 1's
        # H^m is layer-normed (the paper's model is post-norm); in a pre-norm
        # encoder the lower layers' states are fairseq's residual stream, not
        # normalized: their scale sharpens the routing's couplings, but the
        # squash (Eq. 4) keeps every capsule's norm below 1 on its way to the GRU.
        layer_states[-1] = out["encoder_out"][0]
        padding_mask = out["encoder_padding_mask"][0]
        out["gret_global"] = [self.gret_global(layer_states, padding_mask)]  # B x C
        if not return_all_hiddens:
            out["encoder_states"] = []
            out["fc_results"] = []
        return out

    def reorder_encoder_out(self, encoder_out, new_order):
        new_out = super().reorder_encoder_out(encoder_out, new_order)
        if "gret_global" in encoder_out and len(encoder_out["gret_global"]) > 0:
            new_out["gret_global"] = [encoder_out["gret_global"][0].index_select(0, new_order)]
        return new_out


class GretDecoder(BoolFutureMask, TransformerDecoderBase):
    """Transformer decoder with GRET's context gate on its top states (Eq. 11-14)
    (boolean future mask: :mod:`fairseq_ctx.modules.future_mask`)."""

    def __init__(self, cfg, dictionary, embed_tokens, no_encoder_attn=False, output_projection=None):
        super().__init__(cfg, dictionary, embed_tokens, no_encoder_attn=no_encoder_attn,
                         output_projection=output_projection)
        self.gret_gate = ContextGate(self.output_embed_dim, cfg.encoder.embed_dim, gated=not cfg.gret_no_gate)

    def extract_features(self, prev_output_tokens, encoder_out=None, incremental_state=None,
                         full_context_alignment: bool = False, alignment_layer=None, alignment_heads=None):
        x, extra = super().extract_features(
            prev_output_tokens, encoder_out, incremental_state, full_context_alignment,
            alignment_layer, alignment_heads,
        )  # x: B x T x C, the top decoder states R^N of Eq. 11
        if encoder_out is None or len(encoder_out.get("gret_global", [])) == 0:
            raise ValueError("transformer_gret's decoder needs encoder_out['gret_global'] from GretEncoder")
        x = self.gret_gate(x, encoder_out["gret_global"][0], incremental_state)
        return x, extra


@dataclass
class TransformerGretConfig(TransformerFlatConfig):
    """``transformer_gret``'s flags: fairseq's Transformer plus GRET's
    capsules, routing, ablations and warm start."""

    gret_capsules: Optional[int] = unset("number of capsules per encoder layer (Eq. 2-6; default 32)", metavar="K")
    gret_routing_iters: Optional[int] = unset("dynamic routing iterations (Algorithm 1; default 3)", metavar="R")
    gret_routing_softmax: Optional[ChoiceEnum(ROUTING_SOFTMAX_CHOICES)] = unset(
        "normalise routing logits over capsules (dynamic routing of Sabour et al.; default) or over positions "
        "(literal Eq. 5)")
    gret_no_capsule: Optional[bool] = unset("ablation: mean pooling instead of capsules + attentive pooling")
    gret_no_aggregation: Optional[bool] = unset("ablation: global state of the last encoder layer only (no GRU)")
    gret_no_gate: Optional[bool] = unset("ablation: add the global state to the top decoder states without a gate")
    gret_warm_start: Optional[str] = unset(
        "initialise from a trained plain transformer checkpoint (parameters matching by name and shape); new GRET "
        "parameters start fresh", metavar="PATH")


@register_model("transformer_gret", dataclass=TransformerGretConfig)
class TransformerGretModel(TransformerModel):
    """GRET (Weng et al., AAAI 2020); see the module docstring."""

    @staticmethod
    def add_args(parser):
        add_args_from_dataclass(parser, TransformerGretConfig)

    @classmethod
    def build_model(cls, args, task):
        stored = args  # what the checkpoints will hold (a namespace, or the config fairseq passed)
        args = architecture_args(args, "transformer_gret")
        validate_gret_args(args)
        model = super().build_model(args, task)
        path = getattr(args, "gret_warm_start", None)
        if path:
            root = root_config(stored)
            if checkpoint_will_be_restored(root.checkpoint if root is not None else args):
                logger.info("transformer_gret: a checkpoint will be restored, skipping --gret-warm-start %s", path)
            else:
                warm_start_from_checkpoint(model, path)
                # the baseline is only needed once; see the module docstring
                args.gret_warm_start = model.args.gret_warm_start = None
                clear_in_stored_config(stored, "gret_warm_start")
        return model

    @classmethod
    def build_encoder(cls, args, src_dict, embed_tokens):
        return GretEncoder(TransformerConfig.from_namespace(args), src_dict, embed_tokens)

    @classmethod
    def build_decoder(cls, args, tgt_dict, embed_tokens):
        cfg = TransformerConfig.from_namespace(args)
        return GretDecoder(cfg, tgt_dict, embed_tokens, no_encoder_attn=cfg.no_cross_attention)


def validate_gret_args(args):
    """Clear errors for out-of-range GRET flags, at model build time."""
    if args.gret_capsules is None or int(args.gret_capsules) < 1:
        raise ConfigError(f"--gret-capsules must be >= 1, got {args.gret_capsules}")
    if args.gret_routing_iters is None or int(args.gret_routing_iters) < 1:
        raise ConfigError(f"--gret-routing-iters must be >= 1, got {args.gret_routing_iters}")
    if args.gret_routing_softmax not in ROUTING_SOFTMAX_CHOICES:
        raise ConfigError(
            f"--gret-routing-softmax must be one of {ROUTING_SOFTMAX_CHOICES}, got {args.gret_routing_softmax!r}"
        )
    check_every_layer_runs(args, ["encoder"], "transformer_gret", "Eq. 10 aggregates the output of every encoder layer")
    check_attention_dims(args)
    check_no_quant_noise(args, "transformer_gret", pq_misses="its capsule routing, GRU, attentive pooling and gate",
                         scalar_misses="its GRU cell and capsule scales")


def checkpoint_will_be_restored(args) -> bool:
    """Whether fairseq-train will load a checkpoint over the freshly built
    model (mirrors the path logic of ``fairseq.checkpoint_utils.load_checkpoint``)."""
    restore_file = getattr(args, "restore_file", None)
    save_dir = getattr(args, "save_dir", None)
    if not restore_file or not save_dir:
        return False
    if restore_file == "checkpoint_last.pt":
        suffix = getattr(args, "checkpoint_suffix", "") or ""
        last = os.path.join(save_dir, f"checkpoint_last{suffix}.pt")
        if os.path.exists(last):
            return True
        finetune = getattr(args, "finetune_from_model", None)
        return bool(finetune) and os.path.exists(finetune)
    return os.path.exists(restore_file)


def warm_start_from_checkpoint(model, path):
    """Copy every tensor of the checkpoint at ``path`` whose name and shape
    match one of ``model``'s into ``model``; log what was loaded and what is
    new. Returns ``(loaded_names, new_names)``.

    Raises :class:`~fairseq_ctx.errors.CheckpointMismatchError` (a
    ``ValueError``) naming the tensor and both shapes when a name matches but
    the shape differs (e.g. a baseline of other dimensions or another
    dictionary), or naming the missing parameters when the checkpoint lacks
    part of the Transformer (another architecture: a ``transformer_ctxsan`` or
    ``transformer_dc`` checkpoint has other self-attention parameters, which
    would otherwise silently start fresh); and ``MissingFileError`` (a
    ``FileNotFoundError``) when there is no file.
    """
    if not os.path.exists(path):
        raise MissingFileError(f"--gret-warm-start: no checkpoint at {path}")
    state = checkpoint_utils.load_checkpoint_to_cpu(path)  # weights-only torch.load
    source = state["model"]
    source_cfg = state.get("cfg") or {}
    source_model_cfg = source_cfg.get("model") if hasattr(source_cfg, "get") else None
    source_arch = (getattr(source_model_cfg, "arch", None) or getattr(source_model_cfg, "_name", None)
                   or getattr(state.get("args"), "arch", None))
    target = model.state_dict()
    # GRET's own parameters all carry "gret"; any other one missing means another architecture
    # (a transformer_ctxsan or transformer_dc checkpoint has other self-attention parameters)
    lacking = [name for name in target if name not in source and "gret" not in name]
    if lacking:
        raise CheckpointMismatchError(
            f"--gret-warm-start {path}: the checkpoint (a {source_arch} model) lacks {len(lacking)} parameters "
            f"of this model's Transformer part (e.g. {', '.join(lacking[:2])}); warm start needs a plain "
            "--arch transformer checkpoint with the same layers, dimensions and dictionaries"
        )
    for name, tensor in target.items():
        if name in source and source[name].shape != tensor.shape:
            raise CheckpointMismatchError(
                f"--gret-warm-start {path}: '{name}' has shape {tuple(source[name].shape)} in the "
                f"checkpoint but {tuple(tensor.shape)} in this model; the baseline must have the same "
                "dimensions and dictionaries"
            )
    loaded = [name for name in target if name in source]
    new = [name for name in target if name not in source]
    unused = [name for name in source if name not in target]
    model.load_state_dict({name: source[name] for name in loaded}, strict=False)
    params = dict(model.named_parameters())
    n_loaded = sum(params[n].numel() for n in loaded if n in params)
    new_params = [n for n in new if n in params]
    n_new = sum(params[n].numel() for n in new_params)
    logger.info(
        "transformer_gret warm start from %s (arch %s): loaded %d tensors (%d parameters); "
        "%d new parameter tensors (%d parameters) start fresh: %s",
        path, source_arch, len(loaded), n_loaded, len(new_params), n_new, ", ".join(new_params),
    )
    if unused:
        logger.warning("transformer_gret warm start: %d checkpoint tensors unused: %s", len(unused), ", ".join(unused))
    return loaded, new


def _gret_defaults(args):
    args.gret_capsules = getattr(args, "gret_capsules", GRET_DEFAULT_CAPSULES)
    args.gret_routing_iters = getattr(args, "gret_routing_iters", 3)
    args.gret_routing_softmax = getattr(args, "gret_routing_softmax", ROUTING_SOFTMAX_CHOICES[0])
    args.gret_no_capsule = getattr(args, "gret_no_capsule", False)
    args.gret_no_aggregation = getattr(args, "gret_no_aggregation", False)
    args.gret_no_gate = getattr(args, "gret_no_gate", False)
    args.gret_warm_start = getattr(args, "gret_warm_start", None)


@register_base_architecture("transformer_gret")
def transformer_gret(args):
    """Transformer-Base + GRET (the paper's main setting)."""
    _gret_defaults(args)
    base_architecture(args)


@register_model_architecture("transformer_gret", "transformer_gret_big")
def transformer_gret_big(args):
    """Transformer-Big + GRET (Table 4)."""
    _gret_defaults(args)
    transformer_wmt_en_de_big(args)


@register_model_architecture("transformer_gret", "transformer_gret_iwslt_de_en")
def transformer_gret_iwslt_de_en(args):
    """IWSLT-size Transformer (d 512, ffn 1024, 4 heads) + GRET."""
    _gret_defaults(args)
    transformer_iwslt_de_en(args)


@register_model_architecture("transformer_gret", "transformer_gret_tiny")
def transformer_gret_tiny(args):
    """Tiny preset for tests: 2 + 2 layers, d 16, ffn 32, 2 heads."""
    tiny_dims(args)
    _gret_defaults(args)
    base_architecture(args)
