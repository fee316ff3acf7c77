"""``fairseq-train --bf16`` on a CUDA machine.

fairseq 0.12's ``options.parse_args_and_arch`` sets ``args.tpu = True``
whenever ``--bf16`` is given (bf16 was a TPU type when it was written). On a
GPU the trainer then asks torch_xla for a device that does not exist and
every run stops at once (``'NoneType' object has no attribute
'xla_device'``). ``fairseq-hydra-train`` does not have that line, so only
the command-line path needs this.

The fix is narrow: where CUDA is available, ``--cpu`` is not given and
``--tpu`` was not asked for on the command line, ``args.tpu`` goes back to
False; everything else keeps fairseq's behaviour (a TPU machine has no
CUDA, so ``--bf16`` there still implies ``--tpu``). It has to run inside
``parse_args_and_arch``, after that line and before the namespace becomes
the run's configuration; the one hook fairseq calls there is the
architecture's configuration function (``ARCH_CONFIG_REGISTRY[args.arch]``),
so :func:`install` wraps each registered one (fairseq's own ``transformer``
included, which the baseline and ``--concat-context`` use). Plugins
register their architectures when ``--user-dir`` is imported, before that
call, so every architecture fairseq-train can be given is wrapped.
"""
import functools
import sys

import torch


def undo_bf16_tpu(args) -> None:
    """Turn off the ``--tpu`` that ``--bf16`` implied, on a CUDA machine,
    unless ``--tpu`` was asked for."""
    if not (getattr(args, "bf16", False) and getattr(args, "tpu", False)):
        return
    if getattr(args, "cpu", False) or "--tpu" in sys.argv[1:] or not torch.cuda.is_available():
        return
    args.tpu = False


def _wrapped(config_fn):
    if getattr(config_fn, "_fairseq_ctx_bf16", False):
        return config_fn

    @functools.wraps(config_fn)
    def arch_config(args):
        undo_bf16_tpu(args)
        return config_fn(args)

    arch_config._fairseq_ctx_bf16 = True
    return arch_config


def install() -> None:
    """Wrap every registered architecture configuration (idempotent)."""
    from fairseq.models import ARCH_CONFIG_REGISTRY

    for name, config_fn in list(ARCH_CONFIG_REGISTRY.items()):
        ARCH_CONFIG_REGISTRY[name] = _wrapped(config_fn)
