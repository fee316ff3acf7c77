"""Activation checkpointing and FSDP wrapping of a layer we build ourselves.

fairseq wraps every layer it builds in ``TransformerEncoderBase.build_encoder_layer``
and ``TransformerDecoderBase.build_decoder_layer`` (``--checkpoint-activations``,
``--offload-activations``, ``--min-params-to-wrap`` under
``--ddp-backend fully_sharded``). A ``build_*_layer`` hook that returns a
layer of its own must wrap it the same way, or those flags silently skip it.
This is that wrapping, as upstream writes it.
"""
from fairseq.distributed import fsdp_wrap
from fairseq.modules.checkpoint_activations import checkpoint_wrapper


def wrap_layer(layer, cfg, checkpoints_itself: bool = False):
    """``layer`` wrapped as fairseq wraps the layers it builds;
    ``checkpoints_itself``: the layer does its own activation checkpointing
    (ctxsan's, see :mod:`fairseq_ctx.modules.ctxsan_layer`), so only the
    FSDP wrapping applies."""
    checkpoint = cfg.checkpoint_activations
    if checkpoint and not checkpoints_itself:
        layer = checkpoint_wrapper(layer, offload_to_cpu=cfg.offload_activations)
    # upstream: with checkpointing every layer is its own FSDP unit
    min_params_to_wrap = cfg.min_params_to_wrap if not checkpoint else 0
    return fsdp_wrap(layer, min_num_params=min_params_to_wrap)
