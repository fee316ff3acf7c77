"""PyTorch's non-reentrant activation checkpoint, with fairseq's
``--offload-activations``.

fairseq's ``checkpoint_wrapper`` is reentrant: each checkpointed call runs
a backward pass of its own inside the outer one, and sees only the tensors
passed to it. The layers that cannot live with that checkpoint
themselves through :func:`checkpointed_call`: ctxsan's (their context reads
lower layers' states that are no arguments) and the context encoder's (its
shared layers run twice a forward where sources and contexts are not
batched together, its context layer once per length chunk, and PyTorch's
DistributedDataParallel stops on a parameter made ready in two backward
passes). The recomputation runs inside the one backward pass, with the
forward's RNG state (dropout masks) and autocast state restored.

``--offload-activations``: fairseq's wrapper moves a checkpointed call's
tensor inputs to CPU memory until the recomputation. Here the checkpoint
runs under ``torch.autograd.graph.save_on_cpu``: the checkpoint saves its
inputs before it installs its own hooks for the operations inside, so
those inputs, and nothing else, are packed to CPU memory (checked with a
recording hook on CPU, torch 2.13: one tensor packed for a checkpointed
linear layer against four without the checkpoint).
"""
import contextlib

import torch
from torch.autograd.graph import save_on_cpu
from torch.utils.checkpoint import checkpoint


def checkpointed_call(fn, offload_to_cpu: bool, *args, **kwargs):
    """``fn(*args, **kwargs)`` under PyTorch's non-reentrant checkpoint,
    its inputs kept in CPU memory with ``offload_to_cpu``; a plain call
    where autograd does not record."""
    if not torch.is_grad_enabled():
        return fn(*args, **kwargs)
    with save_on_cpu() if offload_to_cpu else contextlib.nullcontext():
        return checkpoint(fn, *args, use_reentrant=False, **kwargs)
