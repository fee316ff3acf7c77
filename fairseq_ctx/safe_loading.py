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
import functools
import pickle
import typing
import zipfile

import numpy as np
import torch

from . import checkpoint_checks
from .errors import CheckpointLoadError, install_excepthook


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


def _explain_load_errors(load_checkpoint_to_cpu):
    """Wrap fairseq's ``load_checkpoint_to_cpu`` so that a refused, truncated
    or foreign file ends in one line naming the file instead of torch's
    traceback. The loading itself is untouched (weights-only stays on)."""
    if getattr(load_checkpoint_to_cpu, "_fairseq_ctx_wrapped", False):
        return load_checkpoint_to_cpu

    @functools.wraps(load_checkpoint_to_cpu)
    def wrapper(path, *args, **kwargs):
        try:
            state = load_checkpoint_to_cpu(path, *args, **kwargs)
        except pickle.UnpicklingError as e:
            lines = [line.strip() for line in str(e).splitlines() if line.strip()]
            refused = [line for line in lines if "GLOBAL" in line or "Can only build" in line]
            if not refused:  # not a pickle of ours at all (a text file, a cut-off legacy file)
                why = next((line for line in lines if line.startswith("Unsupported")), "unpickling failed")
                raise CheckpointLoadError(f"cannot read checkpoint {path}: not a torch checkpoint ({why})") from None
            raise CheckpointLoadError(
                f"refusing to load checkpoint {path}: it contains objects outside the classes a fairseq "
                f"checkpoint needs ({refused[0]}). Weights-only loading stays on, so a checkpoint cannot run code; "
                "only load files from sources you trust."
            ) from None
        except FileNotFoundError:
            raise CheckpointLoadError(f"checkpoint not found: {path}") from None
        except (EOFError, zipfile.BadZipFile, OSError, RuntimeError) as e:
            msg = str(e)
            if isinstance(e, RuntimeError) and "zip archive" not in msg and "PytorchStreamReader" not in msg:
                raise
            raise CheckpointLoadError(
                f"cannot read checkpoint {path}: the file is truncated or not a torch checkpoint "
                f"({msg.splitlines()[0] if msg else type(e).__name__})"
            ) from None
        checkpoint_checks.remember_source(state, path)  # for a clear error if it does not fit the model
        return state

    wrapper._fairseq_ctx_wrapped = True
    return wrapper


def install():
    """Allow-list fairseq's checkpoint classes for ``torch.load(weights_only=True)``
    and make load failures clear one-line errors."""
    add = getattr(torch.serialization, "add_safe_globals", None)
    if add is not None:  # torch < 2.4 loads with pickle by default
        add(fairseq_safe_globals())
    from fairseq import checkpoint_utils

    # fairseq looks the function up on the module at call time (trainer,
    # load_model_ensemble_and_task), so replacing the attribute covers every CLI.
    checkpoint_utils.load_checkpoint_to_cpu = _explain_load_errors(checkpoint_utils.load_checkpoint_to_cpu)
    checkpoint_checks.install()  # a checkpoint that does not fit the model: one line, not torch's error
    install_excepthook()
