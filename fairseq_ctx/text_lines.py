"""Reading a text file as lines: one rule for every reader in the plugin.

Lines end at ``\\n`` only (a ``\\r`` before it is dropped), as fairseq's
binarizer and ``fairseq-generate`` count them, so a Unicode line separator
(``\\u2028``, ``\\x0b``, ...) inside a sentence does not split it and line
``i`` of a hypothesis file, a reference and a contrastive test set is
sentence ``i`` of the binarized data; ``str.splitlines`` would split there
and shift every later line.  A final newline does not add an empty line.
Each reader raises its own error class (``error``), one line naming the
file.
"""
from typing import List, Type

from fairseq_ctx.errors import DataError


def read_lines(path, error: Type[Exception] = DataError) -> List[str]:
    """Lines of the UTF-8 text file ``path`` without line endings (see the
    module docstring); a missing file, a directory or bytes that are not
    UTF-8 raise ``error`` with one line naming ``path``."""
    try:
        with open(path, encoding="utf-8", newline="\n") as f:
            return [line[:-1].rstrip("\r") if line.endswith("\n") else line.rstrip("\r") for line in f]
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except IsADirectoryError:
        raise error(f"{path}: is a directory, not a file") from None
    except UnicodeDecodeError as e:
        raise error(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
