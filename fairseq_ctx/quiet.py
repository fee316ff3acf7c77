"""The one place where fairseq_ctx silences warnings, each of which fairseq
itself causes and we cannot fix at its source (fairseq 0.12.3 / fairseq-fixed
with hydra-core 1.3 and torch 2.x), and undoes one stray logging set-up of
fairseq's.

Installed when the package is imported (``--user-dir fairseq_ctx`` imports
it before fairseq builds its config), from :mod:`fairseq_ctx.tasks`.  Each
filter matches one message (and, where the warning names a stable module,
that module), so any other warning, ours included, still shows.  Set
``FAIRSEQ_CTX_UPSTREAM_WARNINGS=1`` to see them all again.

``fairseq-hydra-train`` composes its config, and hydra warns, before it loads
the plugin; so does importing ``fairseq_cli.hydra_train`` (its
``@hydra.main`` has no ``version_base``). For that, ``scripts/install.sh``
runs ``python3 -m fairseq_ctx.quiet --install``, which writes
``fairseq_ctx_quiet.pth`` into site-packages: at interpreter start it loads
this file by its path (not the package: nothing else of fairseq_ctx is
imported) and waits for ``fairseq`` to be imported, then calls
:func:`install`. A process that never imports fairseq is not touched.

What is *not* here, because it is fixed where it arises:

* ``INFO:fairseq.tasks.text_to_speech:Please install tensorboardX``: the
  install script installs ``tensorboardX`` (it also makes
  ``--tensorboard-logdir`` work);
* torch's ``Support for mismatched key_padding_mask and attn_mask`` for our
  architectures: their decoders build a boolean future mask
  (:mod:`fairseq_ctx.modules.future_mask`).  The filter below covers only
  models whose decoder is fairseq's own (``--arch transformer`` with
  ``--task document_translation``); ``tests/test_warnings.py`` checks with
  every warning shown that our architectures do not raise it.
"""
import logging
import os
import sys
import threading
import warnings

# (message regex, category, module regex), each an "ignore": message regexes
# match the start of the message, case-insensitively (``warnings.filterwarnings``);
# no ":" in them (tests/conftest.py gives them to pytest as filterwarnings lines).
UPSTREAM_FILTERS = [
    # fairseq.dataclass.utils.convert_namespace_to_omegaconf calls
    # hydra.experimental.initialize/compose without version_base, with
    # strict=True, on config files headed ``# @package _group_``, and names its
    # schema "config": hydra 1.3 warns about each, in every fairseq CLI run.
    (r"hydra\.experimental\.(initialize|compose)\(\) is no longer experimental", UserWarning, r"hydra\."),
    # (version_base: also fairseq_cli.hydra_train's @hydra.main, attributed to that module or __main__)
    (r"\s*The version_base parameter is not specified", UserWarning, ""),
    # (\x3a is ":", which pytest's filterwarnings lines cannot hold: tests/conftest.py uses this list)
    (r"In '[^']*'\x3a Usage of deprecated keyword in package header '# @package _group_'", UserWarning, r"hydra\."),
    # fairseq stores its schema under the primary config's name ("config", or
    # fairseq-hydra-train's --config-name), which hydra 1.3 reports by that name
    (r"\s*'[^']*' is validated against ConfigStore schema with the same name", UserWarning, ""),
    (r"\s*The strict flag in the compose API is deprecated", UserWarning, r"hydra\."),
    # fairseq/tasks/fairseq_task.py (train_step) enters torch.cuda.amp.autocast,
    # deprecated since torch 2.4, on every training step, also on CPU.
    (r"`torch\.cuda\.amp\.autocast\(args\.\.\.\)` is deprecated", FutureWarning, r"fairseq\."),
    # fairseq/optim/amp_optimizer.py (--amp) builds torch.cuda.amp.GradScaler,
    # deprecated since torch 2.4, once per training run.
    (r"`torch\.cuda\.amp\.GradScaler\(args\.\.\.\)` is deprecated", FutureWarning, r"fairseq\."),
    # fairseq/data/iterators.py creates every DataLoader with pin_memory=True,
    # which torch 2.x reports on machines without an accelerator.
    (r"'pin_memory' argument is set as true but no accelerator is found", UserWarning,
     r"torch\.utils\.data\.dataloader"),
    # fairseq's TransformerDecoderBase.buffered_future_mask is a float mask and
    # fairseq's MultiheadAttention passes key_padding_mask.bool(): fairseq's own
    # decoder (e.g. --arch transformer under --task document_translation)
    # mixes the two types. Ours do not (see the module docstring).
    (r"Support for mismatched key_padding_mask and attn_mask is deprecated", UserWarning,
     r"torch\.nn\.functional"),
]


def enabled():
    return os.environ.get("FAIRSEQ_CTX_UPSTREAM_WARNINGS", "0") in ("", "0")


def install():
    """Add the filters (idempotent) and :func:`undo_debug_logging`; does
    nothing when ``FAIRSEQ_CTX_UPSTREAM_WARNINGS`` is set to a non-empty
    value other than 0."""
    if not enabled():
        return
    for message, category, module in UPSTREAM_FILTERS:
        warnings.filterwarnings("ignore", message=message, category=category, module=module)
    undo_debug_logging()


def undo_debug_logging():
    """``import fairseq`` runs ``logging.basicConfig(level=logging.DEBUG)``
    (fairseq/models/wav2vec/wav2vec2_classification.py), so every library's
    debug lines reach stderr (hydra's ``DEBUG:hydra.core.utils:Setting
    JobRuntime:name=...`` in fairseq-generate, -interactive, -hydra-train).
    Sets the root logger back to the level fairseq's commands ask for:
    ``LOGLEVEL`` (fairseq's variable), INFO unless given."""
    root = logging.getLogger()
    wanted = os.environ.get("LOGLEVEL", "INFO").upper()
    if root.level == logging.DEBUG and wanted != "DEBUG":
        root.setLevel(wanted if isinstance(logging.getLevelName(wanted), int) else logging.INFO)


# the attribute of a wrapping hook that says (per thread) that it is asking the
# other finders at this moment; on the hook itself, because this module can be
# loaded twice (as fairseq_ctx.quiet and from the start-up .pth by file path)
_ASKING = "_fairseq_ctx_asking"


def _is_asking(finder) -> bool:
    return getattr(getattr(finder, _ASKING, None), "value", False)


def spec_of_other_finders(hook, fullname, path=None, target=None):
    """The module spec that the ``sys.meta_path`` finders other than
    ``hook`` give for ``fullname`` (None if none does): for import hooks
    that only wrap what the normal finders find.  A hook that is itself
    asking at this moment is skipped, so that two such hooks (the start-up
    one of this module and the package's) do not ask each other without
    end: the inner one wraps the normal finders' spec, the outer one wraps
    that."""
    flag = hook.__dict__.setdefault(_ASKING, threading.local())
    flag.value = True
    try:
        for finder in sys.meta_path:
            if finder is hook or _is_asking(finder) or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                return spec
        return None
    finally:
        flag.value = False


class _InstallWhenFairseqIsImported:
    """A ``sys.meta_path`` finder that runs :func:`install` once the module
    ``fairseq`` (its ``__init__``, which imports every fairseq model) has
    been executed, then removes itself."""

    def find_spec(self, fullname, path=None, target=None):
        spec = spec_of_other_finders(self, fullname, path, target) if fullname == "fairseq" else None
        if spec is None:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        exec_module = getattr(spec.loader, "exec_module", None)
        if exec_module is not None:
            def exec_then_install(module):
                exec_module(module)
                install()

            spec.loader.exec_module = exec_then_install
        return spec


def at_startup():
    """What ``fairseq_ctx_quiet.pth`` runs when an interpreter starts."""
    if enabled() and "fairseq" not in sys.modules:
        sys.meta_path.insert(0, _InstallWhenFairseqIsImported())


PTH_NAME = "fairseq_ctx_quiet.pth"


def startup_line(quiet_py=__file__):
    """The one line of ``fairseq_ctx_quiet.pth``: load this file by its
    path under a private name and call :func:`at_startup`; any error in it
    is ignored (a broken checkout must not break every Python start)."""
    code = ("try:\n import importlib.util as u\n"
            f" s = u.spec_from_file_location('_fairseq_ctx_quiet', {os.path.abspath(quiet_py)!r})\n"
            " m = u.module_from_spec(s); s.loader.exec_module(m); m.at_startup()\n"
            "except Exception:\n pass\n")
    return f"import sys; exec({code!r})\n"


def main(argv=None):
    import argparse
    import sysconfig

    p = argparse.ArgumentParser(
        prog="python3 -m fairseq_ctx.quiet",
        description=f"Write {PTH_NAME} into site-packages, so that fairseq's own commands "
                    "(fairseq-hydra-train before it loads the plugin) print none of the warnings "
                    "fairseq_ctx filters.")
    p.add_argument("--install", action="store_true", help=f"write {PTH_NAME}")
    p.add_argument("--site-packages", metavar="DIR", default=sysconfig.get_paths()["purelib"],
                   help="where to write it (default: this Python's, %(default)s)")
    opts = p.parse_args(argv)
    if not opts.install:
        p.error("nothing to do: give --install")
    path = os.path.join(opts.site_packages, PTH_NAME)
    with open(path, "w", encoding="utf-8") as f:
        f.write(startup_line())
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["UPSTREAM_FILTERS", "at_startup", "enabled", "install", "startup_line", "undo_debug_logging"]
