"""Errors that fairseq_ctx reports to users as one clear line.

fairseq's command-line tools do not catch exceptions, so a refused checkpoint
or bad data would end in a stack trace from deep inside torch. Our own errors
derive from :class:`FairseqCtxError`; :func:`install_excepthook` makes an
uncaught one print ``fairseq_ctx: error: <message>`` and exit with status 1,
while every other exception keeps Python's usual traceback.
"""
import sys


class FairseqCtxError(Exception):
    """A problem with the user's input (flag, file, line) that we can name."""


class CheckpointLoadError(FairseqCtxError):
    """A checkpoint could not be read (refused, truncated or not a checkpoint)."""


_previous_hook = None


def _excepthook(exc_type, exc, tb):
    if issubclass(exc_type, FairseqCtxError):
        print(f"fairseq_ctx: error: {exc}", file=sys.stderr)
        return
    _previous_hook(exc_type, exc, tb)


def install_excepthook():
    """Route uncaught :class:`FairseqCtxError` to a one-line message (idempotent)."""
    global _previous_hook
    if sys.excepthook is not _excepthook:
        _previous_hook = sys.excepthook
        sys.excepthook = _excepthook
