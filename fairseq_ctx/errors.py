"""Errors that fairseq_ctx reports to users as one clear line.

fairseq's command-line tools do not catch exceptions, so a refused checkpoint
or bad data would end in a stack trace from deep inside torch. Our own errors
derive from :class:`FairseqCtxError`; :func:`install_excepthook` makes an
uncaught one print ``fairseq_ctx: error: <message>`` and exit with status 1,
while every other exception keeps Python's usual traceback.

The subclasses for flags and data also derive from the built-in exception a
caller would expect (``ValueError``, ``FileNotFoundError``), so code that
catches those keeps working.
"""
import sys

# every tool's (docs/errors.md); fairseq_ctx_prep, the torch-free preparation
# package, writes the same prefix (tests/test_docs.py holds the two equal):
# the plugin imports nothing from it, so a --user-dir copy stands alone
ERROR_PREFIX = "fairseq_ctx: error: "


class FairseqCtxError(Exception):
    """A problem with the user's input (flag, file, line) that we can name."""


class CheckpointLoadError(FairseqCtxError):
    """A checkpoint could not be read (refused, truncated or not a checkpoint)."""


class CheckpointMismatchError(FairseqCtxError, ValueError):
    """A checkpoint was read but does not fit the model or data it is loaded
    into (another architecture, other dimensions, other dictionaries)."""


class ConfigError(FairseqCtxError, ValueError):
    """A flag value (or combination of flags) the model or task cannot use."""


class DataError(FairseqCtxError, ValueError):
    """Input data the task cannot use (a docids file of the wrong length, a
    sentence longer than the model takes)."""


class MissingFileError(FairseqCtxError, FileNotFoundError):
    """A file named by a flag or expected beside the data does not exist."""


_previous_hook = None


def user_error(exc):
    """The :class:`FairseqCtxError` to report for ``exc``, or None.

    fairseq sometimes catches an error and raises a bare ``Exception`` with a
    generic message while handling it (``Trainer.load_checkpoint``: "Cannot
    load model parameters from checkpoint ...; please ensure that the
    architectures match"). When the error it was handling is one of ours, ours
    says more, so that is the one reported."""
    if isinstance(exc, FairseqCtxError):
        return exc
    if type(exc) is Exception and isinstance(exc.__context__, FairseqCtxError):
        return exc.__context__
    return None


def _excepthook(exc_type, exc, tb):
    ours = user_error(exc)
    if ours is not None:
        print(f"{ERROR_PREFIX}{ours}", file=sys.stderr)
        return
    _previous_hook(exc_type, exc, tb)


def install_excepthook():
    """Route uncaught :class:`FairseqCtxError` to a one-line message (idempotent)."""
    global _previous_hook
    if sys.excepthook is not _excepthook:
        _previous_hook = sys.excepthook
        sys.excepthook = _excepthook
