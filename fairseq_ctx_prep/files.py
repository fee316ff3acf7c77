"""Markers and atomic outputs: what every preparation pipeline shares.

A step writes its output into ``X.tmp`` (``fresh_dir``) and renames it to
``X`` (``publish_dir``) when finished; ``Markers`` then records the settings
it ran with in ``DEST/.done/STEP``, so a re-run skips it only if nothing it
depends on changed, and an interrupted step is redone, never taken as
finished. A run wrapped in ``no_partial_outputs(DEST)`` that stops with an
error removes every ``X.tmp`` it made and not yet published, and ``DEST``
itself if the run created it and nothing is left in it: what stays is only
what finished (published steps, complete downloads, the log a message names). Line counts are checked between steps on "\n"-split lines (as
fairseq reads them), and the number of sentences of a binarized split is
read from the header of fairseq's ``.idx`` file, so that nothing here
imports torch or fairseq (``fairseq-preprocess`` runs as a subprocess).
"""
from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator, List, Optional, Set

SPLITS = ("train", "valid", "test")

# Every tool of fairseq_ctx reports bad input as one line with this prefix
# (docs/errors.md); fairseq_ctx.errors prints the same.
ERROR_PREFIX = "fairseq_ctx: error: "


class PrepError(Exception):
    """A problem the user can fix; reported as one line, without traceback."""


class Log:
    """Progress lines ``[PROG] message`` on stdout; ``prog`` names the
    command (it is refined once the corpus and its direction are known)."""

    def __init__(self, prog: str):
        self.prog = prog

    def __call__(self, msg: str) -> None:
        print(f"[{self.prog}] {msg}", flush=True)


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


def progress_bar(total: Optional[int], desc: str, unit: str = "lines"):
    """A tqdm bar on stderr, as fairseq draws them: only when stderr is a
    terminal (``disable=None``), removed when done (the step's log line
    stays). Without tqdm (this package needs nothing beyond the standard
    library to import), an object with the same ``update``/``close``."""
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, disable=None, leave=False,
                file=sys.stderr, dynamic_ncols=True)


def read_lines(path: Path) -> List[str]:
    """Lines split on "\\n" only, as fairseq and count_lines() see them."""
    with open(path, encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    return lines[:-1] if lines[-1:] == [""] else lines


def write_lines(path: Path, lines: Iterable[str]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``path`` through ``path.tmp`` and a rename: never half-written."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


# the temporary directories of the running step(s) not yet published
_unpublished: Set[Path] = set()


def fresh_dir(path: Path) -> Path:
    """Empty temporary sibling of ``path``; publish it with publish_dir()."""
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    _unpublished.add(tmp)
    return tmp


def publish_dir(tmp: Path, path: Path) -> None:
    """Replace ``path`` by the finished temporary directory ``tmp``."""
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)
    _unpublished.discard(tmp)


def discard_dir(tmp: Path) -> None:
    """Remove a temporary directory of fresh_dir() that is not published."""
    shutil.rmtree(tmp, ignore_errors=True)
    _unpublished.discard(tmp)


@contextmanager
def no_partial_outputs(dest: Path):
    """Run a preparation into ``dest``; on any error (or Ctrl-C) remove the
    temporary directories it left unpublished, and ``dest`` if this run
    created it and it is empty then. The error propagates unchanged."""
    created = not dest.exists()
    _unpublished.clear()
    try:
        yield
    except BaseException:
        for tmp in sorted(_unpublished, key=lambda p: len(p.parts), reverse=True):
            shutil.rmtree(tmp, ignore_errors=True)
        if created and dest.is_dir():
            for sub in sorted(dest.rglob("*"), key=lambda p: len(p.parts), reverse=True):
                if sub.is_dir() and not any(sub.iterdir()):
                    sub.rmdir()
            if not any(dest.iterdir()):
                dest.rmdir()
        raise
    finally:
        _unpublished.clear()


class Markers:
    """Step-completion markers in ``DEST/.done``.

    A marker holds the settings the step ran with (including those of the
    steps before it), so changing e.g. ``--vocab-size`` redoes the steps
    that depend on it. It is written only after the step's outputs are in
    place, so an interrupted step is never taken as finished.
    """

    def __init__(self, dest: Path):
        self.dir = dest / ".done"

    def done(self, step: str, settings: dict) -> bool:
        path = self.dir / step
        try:
            return json.loads(path.read_text(encoding="utf-8")) == settings
        except (OSError, ValueError):
            return False

    def mark(self, step: str, settings: dict) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.dir / step, json.dumps(settings, sort_keys=True))

    def unmark(self, step: str) -> None:
        (self.dir / step).unlink(missing_ok=True)

    def clear(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def run(self, steps, settings: dict, dest: Path, log) -> None:
        """Run ``steps`` = [(name, output dir under dest, settings, action)]
        in order, skipping a step whose marker matches its settings (those of
        the steps before it included) and whose output exists. Once a step
        runs, every later one runs too, and their markers are removed first."""
        upstream_changed = False
        for index, (name, output, step_settings, action) in enumerate(steps):
            settings = {**settings, **step_settings}
            if not upstream_changed and self.done(name, settings) and (dest / output).is_dir():
                log(f"{name}: already done, skipping")
                continue
            log(f"{name}: running")
            for later in steps[index:]:
                self.unmark(later[0])
            action()
            self.mark(name, settings)
            upstream_changed = True


def iter_lines(path: Path) -> Iterator[str]:
    """Lines of a UTF-8 file split on "\\n" only (as count_lines counts them),
    without the newline; undecodable bytes become U+FFFD."""
    with open(path, encoding="utf-8", errors="replace", newline="\n") as f:
        for line in f:
            yield line[:-1] if line.endswith("\n") else line


def run_logged(cmd: List[str], logfile: Path) -> None:
    """Run a command with its output in ``logfile``; PrepError on failure."""
    with open(logfile, "w", encoding="utf-8") as f:
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise PrepError(f"`{' '.join(cmd[:3])} ...` failed with exit code "
                        f"{proc.returncode}; see {logfile}")


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


_MMAP_IDX_MAGIC = b"MMIDIDX\x00\x00"


def idx_length(path: Path) -> int:
    """Number of sentences in a fairseq mmap ``.idx`` file (header only).

    Layout as written by fairseq's MMapIndexedDataset: 9-byte magic,
    version (<Q), dtype code (<B), number of sentences (<Q). Reading it
    directly avoids importing fairseq and torch.
    """
    with open(path, "rb") as f:
        header = f.read(26)
    if len(header) < 26 or header[:9] != _MMAP_IDX_MAGIC:
        raise PrepError(f"{path} is not a fairseq mmap index; rerun with --force")
    return struct.unpack("<Q", header[18:26])[0]


def sha256_file(path) -> str:
    """The hex SHA-256 of a file, read in 1 MiB blocks (what ``sha256sum`` prints)."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
