"""fairseq_ctx: context-enhanced Transformer architectures for fairseq.

Load with ``--user-dir fairseq_ctx`` (from the repository root) or
``--user-dir $(python3 -c 'import fairseq_ctx,os;print(os.path.dirname(fairseq_ctx.__file__))')``.

:func:`register` registers the architectures and the ``document_translation``
task with fairseq and allow-lists the classes that fairseq checkpoints need
for weights-only loading (:mod:`fairseq_ctx.safe_loading`). It imports torch
and fairseq (seconds), so ``import fairseq_ctx`` calls it only when they are
in use already, and otherwise defers it:

* ``--user-dir`` (fairseq-train, -generate, -interactive, ...): fairseq is
  imported before the plugin, so importing the package registers at once.
* In Python: ``import fairseq_ctx`` after ``import fairseq`` or ``import
  torch`` registers at once; before them, registration happens the moment
  fairseq is first imported (an import hook). To have it explicitly, call
  ``fairseq_ctx.register()`` (idempotent; cheap once done) or import
  ``fairseq_ctx.models``/``fairseq_ctx.tasks``/``fairseq_ctx.hub``.
* The console scripts (``fairseq-ctx-*``) import neither torch nor fairseq
  until their arguments are parsed, so ``--help`` is immediate; each calls
  :func:`register` before loading a checkpoint.

What registering changes in the whole process, and why each is needed, is
:data:`PROCESS_WIDE_CHANGES` (``tests/test_registration.py`` checks that
:func:`register` changes exactly these, in a fresh interpreter).
"""
import sys as _sys
import threading

from .quiet import spec_of_other_finders as _spec_of_other_finders  # standard library only

__version__ = "0.1.0"

_registered = False

# Every change :func:`register` makes outside this package's own modules, and
# why it is needed. Nothing else of fairseq, torch or Python is touched.
PROCESS_WIDE_CHANGES = {
    "fairseq's registries": "the plugin itself: the four architectures (and their named presets) in "
        "ARCH_MODEL_REGISTRY / ARCH_CONFIG_REGISTRY / MODEL_REGISTRY, the document_translation task in "
        "TASK_REGISTRY and the adam_foreach optimizer in OPTIMIZER_REGISTRY, so that --arch, --task and "
        "--optimizer find them",
    "torch.serialization's safe globals": "torch >= 2.6 loads checkpoints weights-only and refuses the "
        "configuration objects fairseq pickles: exactly the classes fairseq checkpoints hold are allow-listed "
        "(safe_loading.py lists them), so weights-only loading stays on",
    "fairseq.checkpoint_utils.load_checkpoint_to_cpu": "wrapped: a truncated or non-torch file is one line "
        "naming it instead of a zip-reader stack trace, and the state notes which file it came from (for the "
        "next entry's message); fairseq looks it up on the module at call time, so every command is covered",
    "fairseq BaseFairseqModel.load_state_dict": "wrapped: only after fairseq's own loading has failed, one "
        "line naming the checkpoint, its architecture and the dictionaries or parameters that differ; every "
        "entry point loads every model (plain transformer baselines included) through it",
    "fairseq.models.build_model": "wrapped: notes the task's data directory and languages on the model, "
        "which the message above names and load_state_dict cannot see",
    "fairseq's ARCH_CONFIG_REGISTRY functions": "every registered one wrapped (bf16_on_cuda.py): fairseq "
        "0.12 turns --bf16 into --tpu, so on a GPU every --bf16 run stops at once; the architecture function "
        "is the one hook fairseq calls after that line",
    "fairseq.optim.FP16Optimizer.build_optimizer": "wrapped (foreach_optim.py): with --optimizer adam_foreach, "
        "--fp16/--bf16 build ForeachFP16Optimizer, fairseq's FP16Optimizer with its per-parameter copies to and "
        "from the float32 masters and its zeroing as one foreach call each; fairseq's trainer picks that class "
        "itself (Trainer._build_optimizer has no hook), and with any other optimizer fairseq's is built unchanged",
    "fairseq.optim.AMPOptimizer.clip_grad_norm and __init__": "replaced and wrapped (amp_scaling.py): "
        "fairseq's --amp unscales the gradients twice (its clip_grad_norm through the inner optimizer, its step "
        "through the wrapper, which the scaler has not seen unscaled), so the optimizer steps with gradients "
        "divided by the loss scale; and it takes its initial scale from --fp16-init-scale and, with "
        "--amp-scale-window, its growth interval from --amp-init-scale. Unscaled once, through the object step "
        "hands the scaler, and the scaler built from --amp-init-scale and --amp-scale-window; --fp16 and --bf16 "
        "are untouched",
    "sys.excepthook": "our errors (FairseqCtxError) print as one line 'fairseq_ctx: error: ...' inside "
        "fairseq's own commands, which the plugin does not otherwise control; other exceptions go to the "
        "previous hook unchanged",
    "warnings.filters and the root logger's level": "quiet.py: narrow filters for upstream notices a user "
        "cannot act on (each listed with its reason there; FAIRSEQ_CTX_UPSTREAM_WARNINGS=1 turns them off), "
        "and the DEBUG level that importing fairseq sets on the root logger put back to LOGLEVEL/INFO",
    "torch's SDPA kernel switches and priority order": "unless FAIRSEQ_CTX_SDPA=torch "
        "(modules/fused_attention.py): by default the cuDNN kernel is disabled (no-cudnn), which on "
        "H100/H200-class GPUs builds a plan per new batch shape; which attention kernel runs fastest is a "
        "property of the GPU, and torch's switches are global, so fairseq's own attention follows the same "
        "choice as the plugin's; cudnn-last also sets TORCH_CUDNN_SDPA_DEPRIORITIZED=1 and "
        "TORCH_CUDNN_SDPA_PREFERRED=0",
    "sys.meta_path": "only when the package is imported before fairseq: a finder that calls register() "
        "once fairseq is imported, removed when it has",
}


def register():
    """Register fairseq_ctx's architectures and task with fairseq and install
    the weights-only checkpoint allow-list. Idempotent."""
    global _registered
    if _registered:
        return
    _remove_import_hook()
    import fairseq  # noqa: F401  (first: the plugin's modules subclass fairseq's)

    from . import safe_loading

    safe_loading.install()
    from . import models  # noqa: F401  (registers the architectures)
    from . import tasks  # noqa: F401  (registers document_translation)
    from . import amp_scaling, bf16_on_cuda, foreach_optim

    bf16_on_cuda.install()  # after every architecture is registered
    foreach_optim.install()  # registers --optimizer adam_foreach on import
    amp_scaling.install()
    from .modules import fused_attention

    fused_attention.ensure_policy()  # FAIRSEQ_CTX_SDPA, before any attention runs

    _registered = True


class _RegisterWhenFairseqIsImported:
    """A ``sys.meta_path`` finder that lets the normal finders locate
    ``fairseq`` and this package's submodules and, once the outermost of
    those imports has finished with fairseq imported, runs :func:`register`;
    so ``import fairseq_ctx`` followed by any use of fairseq finds the
    architectures registered. Waiting for the outermost import matters when
    the first import of fairseq comes from one of our modules (``from
    fairseq_ctx.data.document_context_dataset import ...``): registering
    in the middle of it would import that half-initialized module again.
    It changes nothing about how the modules load, and removes itself once
    :func:`register` has run."""

    def __init__(self):
        self._depth = threading.local()

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "fairseq" and not fullname.startswith(__name__ + "."):
            return None
        spec = _spec_of_other_finders(self, fullname, path, target)
        if spec is None:
            return None
        exec_module = getattr(spec.loader, "exec_module", None)
        if exec_module is None:  # a legacy loader: leave it alone (register() is then explicit)
            return spec

        def exec_then_register(module):
            depth = getattr(self._depth, "value", 0)
            self._depth.value = depth + 1
            try:
                exec_module(module)
            finally:
                self._depth.value = depth
            if depth == 0 and "fairseq" in _sys.modules:
                register()

        spec.loader.exec_module = exec_then_register
        return spec


_import_hook = None


def _remove_import_hook():
    global _import_hook
    if _import_hook is not None:
        try:
            _sys.meta_path.remove(_import_hook)
        except ValueError:
            pass
        _import_hook = None


if "fairseq" in _sys.modules or "torch" in _sys.modules:
    register()
else:
    _import_hook = _RegisterWhenFairseqIsImported()
    _sys.meta_path.insert(0, _import_hook)
