"""Weights-only checkpoint loading that still reads fairseq checkpoints.

torch >= 2.6 loads checkpoints with ``weights_only=True``: the unpickler only
rebuilds tensors, containers and an allow-list of classes. fairseq checkpoints
also pickle configuration objects, so ``fairseq-generate`` refuses them out of
the box. We allow-list exactly the classes that real fairseq checkpoints
contain (derived with ``torch.serialization.get_unsafe_globals_in_checkpoint``
on checkpoints of every kind below, see ``tests/test_safe_loading.py``) and
keep weights-only loading on, so a checkpoint that smuggles in an arbitrary
callable (a pickled ``os.system`` reduce, say) is still refused.

Which classes, and why:

* ``argparse.Namespace``: command-line training stores ``args``.
* numpy arrays and scalars (``_reconstruct``, ``ndarray``, ``dtype``, the dtype
  classes, ``scalar``): ``--eval-bleu`` and other metrics keep numpy values in
  the checkpoint's meter state (``best_bleu``, counts).
* resuming multi-process training: rank 0 loads the checkpoint, turns its
  config into an omegaconf ``DictConfig`` and broadcasts the state to the
  other ranks through ``torch.save``/``torch.load``
  (``fairseq.distributed.utils.broadcast_object``), which adds omegaconf
  containers, ``AnyNode`` and their metadata, ``typing.Any``,
  ``collections.defaultdict``, the builtin types named in that metadata, and
  fairseq's ``_TensorPlaceholder`` for the tensors sent separately.
"""
import argparse
import collections
import typing

import numpy as np
import torch


def _numpy_globals():
    core = getattr(np, "_core", None) or np.core  # numpy >= 2 renamed np.core
    found = [core.multiarray._reconstruct, core.multiarray.scalar, np.ndarray, np.dtype]
    # numpy >= 1.25 rebuilds a dtype as an instance of its own class
    # (np.dtypes.Float64DType, ...), which the unpickler checks too. Only the
    # numeric and boolean ones: object and void dtypes could carry other objects.
    dtypes = getattr(np, "dtypes", None)
    if dtypes is not None:
        numeric = (np.bool_, np.integer, np.floating)
        found += [type(np.dtype(t)) for t in np.sctypeDict.values() if issubclass(t, numeric)]
    return list(dict.fromkeys(found))


def _omegaconf_globals():
    from omegaconf import base, dictconfig, listconfig, nodes

    # fairseq saves configs with OmegaConf.to_container and rebuilds them with
    # OmegaConf.create, so only untyped nodes (AnyNode) ever reach a pickle.
    return [dictconfig.DictConfig, listconfig.ListConfig, base.ContainerMetadata, base.Metadata, nodes.AnyNode]


def fairseq_safe_globals():
    """Every class a fairseq checkpoint (or a broadcast of one) references.

    ``dict``/``int``/``list`` appear as *classes* in omegaconf metadata
    (``ref_type=dict``, ``key_type=int``); calling them builds plain data.
    """
    from fairseq.distributed.utils import _TensorPlaceholder

    return (
        [argparse.Namespace, typing.Any, collections.defaultdict, dict, int, list, _TensorPlaceholder]
        + _numpy_globals()
        + _omegaconf_globals()
    )


def install():
    """Allow-list fairseq's checkpoint classes for ``torch.load(weights_only=True)``."""
    add = getattr(torch.serialization, "add_safe_globals", None)
    if add is None:  # torch < 2.4 loads with pickle by default; nothing to do
        return
    add(fairseq_safe_globals())
