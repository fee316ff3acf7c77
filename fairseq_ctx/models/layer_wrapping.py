"""Activation checkpointing and FSDP wrapping of a layer we build ourselves.

fairseq wraps every layer it builds in ``TransformerEncoderBase.build_encoder_layer``
and ``TransformerDecoderBase.build_decoder_layer`` (``--checkpoint-activations``,
``--offload-activations``, ``--min-params-to-wrap`` under
``--ddp-backend fully_sharded``). A ``build_*_layer`` hook that returns a
layer of its own must wrap it the same way, or those flags silently skip it.
This is that wrapping, as upstream writes it.

fairseq's ``checkpoint_wrapper`` is reentrant: each checkpointed call runs
a backward pass of its own in the outer one, so a layer called more than
once in a forward (the context encoder's shared layers, once for the
sources and once for the contexts) has its parameters' gradients
accumulated in more than one backward pass. PyTorch's
``DistributedDataParallel`` (fairseq's default ``--ddp-backend
pytorch_ddp``) then sees a parameter made ready twice and stops with
"Expected to mark a variable ready only once". Such layers take
:func:`non_reentrant_checkpoint_wrapper`: PyTorch's non-reentrant
checkpoint recomputes inside the one backward pass, the dropout masks
replayed (the RNG state is restored), so the gradients are those of the
plain layer.
"""
import functools

import torch
from fairseq.distributed import fsdp_wrap
from fairseq.modules.checkpoint_activations import checkpoint_wrapper
from torch.utils.checkpoint import checkpoint


def wrap_layer(layer, cfg, checkpoints_itself: bool = False, reentrant: bool = True):
    """``layer`` wrapped as fairseq wraps the layers it builds;
    ``checkpoints_itself``: the layer does its own activation checkpointing
    (ctxsan's, see :mod:`fairseq_ctx.modules.ctxsan_layer`), so only the
    FSDP wrapping applies; ``reentrant=False``: checkpointed with
    :func:`non_reentrant_checkpoint_wrapper` (a layer called more than once
    in a forward; the model refuses ``--offload-activations``)."""
    checkpoint_ = cfg.checkpoint_activations
    if checkpoint_ and not checkpoints_itself:
        layer = (checkpoint_wrapper(layer, offload_to_cpu=cfg.offload_activations) if reentrant
                 else non_reentrant_checkpoint_wrapper(layer))
    # upstream: with checkpointing every layer is its own FSDP unit
    min_params_to_wrap = cfg.min_params_to_wrap if not checkpoint_ else 0
    return fsdp_wrap(layer, min_num_params=min_params_to_wrap)


def non_reentrant_checkpoint_wrapper(module):
    """fairseq's ``checkpoint_wrapper`` with PyTorch's non-reentrant
    checkpoint (module docstring): the forward is replaced in the same way
    (``precheckpoint_forward`` keeps the original, so fairseq's
    ``unwrap_checkpoint`` undoes it), and checkpoints only where autograd
    records."""
    assert not hasattr(module, "precheckpoint_forward"), "checkpoint function has already been applied?"
    module.precheckpoint_forward = module.forward
    module.forward = functools.partial(_non_reentrant_forward, module.precheckpoint_forward)
    return module


def _non_reentrant_forward(original_forward, *args, **kwargs):
    if torch.is_grad_enabled():
        return checkpoint(original_forward, *args, use_reentrant=False, **kwargs)
    return original_forward(*args, **kwargs)
