"""Activation checkpointing and FSDP wrapping of a layer we build ourselves.

fairseq wraps every layer it builds in ``TransformerEncoderBase.build_encoder_layer``
and ``TransformerDecoderBase.build_decoder_layer`` (``--checkpoint-activations``,
``--offload-activations``, ``--min-params-to-wrap`` under
``--ddp-backend fully_sharded``). A ``build_*_layer`` hook that returns a
layer of its own must wrap it the same way, or those flags silently skip it.
This is that wrapping, as upstream writes it.

A layer that runs more than once in a forward takes
:func:`non_reentrant_checkpoint_wrapper` instead of fairseq's reentrant
wrapper (:mod:`fairseq_ctx.modules.activation_checkpoint` says why).
"""
import functools

from fairseq.distributed import fsdp_wrap
from fairseq.modules.checkpoint_activations import checkpoint_wrapper

from fairseq_ctx.modules.activation_checkpoint import checkpointed_call


def wrap_layer(layer, cfg, checkpoints_itself: bool = False, reentrant: bool = True):
    """``layer`` wrapped as fairseq wraps the layers it builds;
    ``checkpoints_itself``: the layer does its own activation checkpointing
    (ctxsan's, see :mod:`fairseq_ctx.modules.ctxsan_layer`), so only the
    FSDP wrapping applies; ``reentrant=False``: checkpointed with
    :func:`non_reentrant_checkpoint_wrapper` (a layer called more than once
    in a forward)."""
    checkpoint = cfg.checkpoint_activations
    if checkpoint and not checkpoints_itself:
        wrapper = checkpoint_wrapper if reentrant else non_reentrant_checkpoint_wrapper
        layer = wrapper(layer, offload_to_cpu=cfg.offload_activations)
    # upstream: with checkpointing every layer is its own FSDP unit
    min_params_to_wrap = cfg.min_params_to_wrap if not checkpoint else 0
    return fsdp_wrap(layer, min_num_params=min_params_to_wrap)


def non_reentrant_checkpoint_wrapper(module, offload_to_cpu: bool = False):
    """fairseq's ``checkpoint_wrapper`` with PyTorch's non-reentrant
    checkpoint: the forward is replaced in the same way (the same
    ``functools.partial`` layout, ``precheckpoint_forward`` keeping the
    original, so fairseq's ``unwrap_checkpoint`` undoes it)."""
    assert not hasattr(module, "precheckpoint_forward"), "checkpoint function has already been applied?"
    module.precheckpoint_forward = module.forward
    module.forward = functools.partial(checkpointed_call, module.precheckpoint_forward, offload_to_cpu)
    return module
