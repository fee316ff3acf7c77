"""Progress bars for fairseq_ctx's long-running tools, drawn as fairseq draws
its own: tqdm, only when the stream is a terminal (``disable=None``), so a
run whose output goes to a file or a pipe logs exactly what it did before.

:func:`bar` draws on stderr, for tools whose stdout is data.
:func:`step_bar` draws on stdout for tools that report on stdout (the table
runner): while it is shown, ``print`` goes through ``tqdm.write``, so status
lines appear above the bar instead of through it.
"""
import contextlib
import sys
from typing import Iterator, Optional

from tqdm import tqdm  # a requirement of fairseq


def bar(total: Optional[int], desc: str, unit: str = "it") -> tqdm:
    """A bar on stderr, removed when closed (the tool's summary line stays)."""
    return tqdm(total=total, desc=desc, unit=unit, disable=None, leave=False, file=sys.stderr,
                dynamic_ncols=True)


class _WriteAbove:
    """A stdout stand-in that prints through ``tqdm.write`` (the pattern of
    tqdm's documentation, "Redirecting writing")."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> None:
        if text.rstrip():
            tqdm.write(text.rstrip("\n"), file=self.stream)

    def flush(self) -> None:
        self.stream.flush()

    def __getattr__(self, name):
        return getattr(self.stream, name)


@contextlib.contextmanager
def step_bar(total: int, desc: str, unit: str = "step") -> Iterator[tqdm]:
    """A bar at the bottom of stdout for ``total`` steps; prints in the block
    appear above it. Off (and stdout untouched) when stdout is not a terminal."""
    stdout = sys.stdout
    progress = tqdm(total=total, desc=desc, unit=unit, disable=None, leave=False, file=stdout,
                    dynamic_ncols=True)
    if progress.disable:
        yield progress
        return
    sys.stdout = _WriteAbove(stdout)
    try:
        yield progress
    finally:
        sys.stdout = stdout
        progress.close()


__all__ = ["bar", "step_bar"]
