"""Argument files: fairseq flags kept in ``configs/``, one flag a line.

Format (``configs/**/*.args``)::

    # a comment: a line whose first non-blank character is '#'
    @include ../recipes/vaswani_base.args
    --arch transformer_ctxsan
    --ctxsan-context deep-global+deep
    --share-all-embeddings

* Each other non-blank line is one flag, alone or followed by one value
  (``--lr 7e-4``, ``--flag=value`` or ``-s en``). A value cannot contain
  whitespace (the flags are meant for ``$(...)`` in a shell, which splits at
  whitespace): write ``--adam-betas (0.9,0.98)``.  A line with more than two
  words, a line that does not start with ``-`` and a trailing comment are
  errors.
* ``@include PATH`` inserts the flags of another argument file at that point;
  PATH is relative to the including file's directory. Includes nest; a cycle
  is an error.
* Order is kept, and later flags win (argparse keeps the last value of a
  repeated option): a row file includes its recipe first and then overrides
  what differs, and a caller can append flags after a file to override it.

Errors name the file and line (``configs/x.args:7: ...``).

Print the flags of one or more files (space-separated, for ``$(...)``)::

    fairseq-train DATA-BIN $(python3 -m fairseq_ctx.tables.config configs/ctxsan/table1/05_enc_deep_global_deep.args)
    scripts/ctx-args configs/dc/wmt14_en_de_enc_dc.args          # same, without importing fairseq
    scripts/ctx-args --explain configs/gret/table3/09_gret.args  # one flag a line, with file:line

This module imports nothing outside the standard library, so it also runs by
file path (``python3 fairseq_ctx/tables/config.py FILE``), which is what
``scripts/ctx-args`` does (importing the ``fairseq_ctx`` package loads
fairseq and torch).
"""
import argparse
import os
import sys
from dataclasses import dataclass
from typing import List, Optional, Sequence

__all__ = ["ArgsFileError", "ArgLine", "read_arg_lines", "read_args", "read_many", "flag_value", "main"]

INCLUDE = "@include"


class ArgsFileError(ValueError):
    """A malformed argument file, named with its line (``path:line: message``)."""


@dataclass(frozen=True)
class ArgLine:
    """One flag of an argument file, with where it was written."""
    flag: str
    value: Optional[str]
    path: str
    line: int

    @property
    def tokens(self) -> List[str]:
        return [self.flag] if self.value is None else [self.flag, self.value]

    @property
    def origin(self) -> str:
        return f"{self.path}:{self.line}"


def _display(path: str) -> str:
    """A path as the user would write it: relative to the working directory
    when it lies below it."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def read_arg_lines(path, _stack: Sequence[str] = ()) -> List[ArgLine]:
    """The flags of ``path`` with their origins, includes expanded in place."""
    real = os.path.realpath(path)
    shown = _display(os.fspath(path))
    if real in _stack:
        chain = " -> ".join(_display(p) for p in list(_stack) + [real])
        raise ArgsFileError(f"{shown}: @include cycle: {chain}")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise ArgsFileError(f"{shown}: no such argument file") from None
    except IsADirectoryError:
        raise ArgsFileError(f"{shown}: is a directory, not an argument file") from None
    except UnicodeDecodeError as e:
        raise ArgsFileError(f"{shown}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    out: List[ArgLine] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        words = line.split()
        where = f"{shown}:{lineno}"
        if words[0] == INCLUDE:
            if len(words) != 2:
                raise ArgsFileError(f"{where}: expected '@include PATH' (one path, no spaces), got {line!r}")
            target = os.path.join(os.path.dirname(os.path.abspath(path)), words[1])
            if not os.path.isfile(target):
                raise ArgsFileError(f"{where}: @include {words[1]}: no such file ({_display(target)})")
            out.extend(read_arg_lines(target, list(_stack) + [real]))
            continue
        if words[0].startswith("@"):
            raise ArgsFileError(f"{where}: unknown directive {words[0]!r} (only @include exists)")
        if not words[0].startswith("-") or words[0] in ("-", "--"):
            raise ArgsFileError(f"{where}: expected a flag such as '--lr 5e-4', got {line!r} "
                                "(positional arguments such as the data directory do not belong in a config)")
        if any(w.startswith("#") for w in words[1:]):
            raise ArgsFileError(f"{where}: comments must be on their own line ({line!r})")
        if len(words) > 2:
            raise ArgsFileError(f"{where}: one flag and at most one value per line, got {len(words)} words "
                                f"in {line!r} (a value cannot contain spaces: write '(0.9,0.98)', not '(0.9, 0.98)')")
        value = words[1] if len(words) == 2 else None
        if words[0] in PATH_FLAGS and value is not None:
            value = _absolute(value, path)
        out.append(ArgLine(words[0], value, shown, lineno))
    return out


# Flags whose value is a path of the repository (``--user-dir fairseq_ctx``):
# emitted absolute, so the flags work from any directory.
PATH_FLAGS = ("--user-dir",)


def _absolute(value: str, args_file) -> str:
    """``value`` resolved against the nearest directory above ``args_file``
    where it exists (the repository holding the config); unchanged if
    already absolute or found nowhere (the tool that reads it names it)."""
    if os.path.isabs(value):
        return value
    here = os.path.dirname(os.path.abspath(args_file))
    while True:
        if os.path.exists(os.path.join(here, value)):
            return os.path.join(here, value)
        parent = os.path.dirname(here)
        if parent == here:
            return value
        here = parent


def read_args(path) -> List[str]:
    """The command-line tokens of an argument file (comments dropped,
    includes expanded), e.g. ``['--arch', 'transformer', '--lr', '5e-4']``.
    Raises :class:`ArgsFileError` naming the file and line of a bad line or
    of a missing include."""
    return [tok for a in read_arg_lines(path) for tok in a.tokens]


def read_many(paths: Sequence) -> List[str]:
    """The tokens of several files, in order (later files override earlier)."""
    return [tok for p in paths for tok in read_args(p)]


def flag_value(path_or_lines, flag: str, default=None):
    """The last value given to ``flag`` in an argument file (or in a list of
    :class:`ArgLine`), as argparse would see it; ``default`` when absent."""
    lines = read_arg_lines(path_or_lines) if isinstance(path_or_lines, (str, os.PathLike)) else path_or_lines
    value = default
    for a in lines:
        if a.flag == flag:
            value = a.value if a.value is not None else True
        elif a.flag.startswith(flag + "="):
            value = a.flag.split("=", 1)[1]
    return value


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="ctx-args",
        description="Print the flags of fairseq_ctx argument files (configs/**/*.args): comments dropped, "
                    "@include expanded, space-separated for $(...).")
    p.add_argument("files", nargs="+", metavar="FILE", help="argument files, in order (later ones override)")
    p.add_argument("--explain", action="store_true", help="one flag a line, with the file:line it comes from")
    args = p.parse_args(argv)
    try:
        if args.explain:
            for path in args.files:
                for a in read_arg_lines(path):
                    print(f"{' '.join(a.tokens):<50} # {a.origin}")
        else:
            print(" ".join(read_many(args.files)))
    except ArgsFileError as e:
        print(f"fairseq_ctx: error: {e}", file=sys.stderr)   # ERROR_PREFIX (standard library only here)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
