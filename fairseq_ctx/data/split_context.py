"""Where the context of a binarized split comes from: its documents (a
``.docids`` file) or an explicit context file, read once into a context
index.

The document task reads a split's context from one of two sources beside
its ``.bin``/``.idx`` files:

* ``{split}.{src}-{tgt}.docids`` (or ``{tgt}-{src}``): one document id per
  line; a document is a run of equal ids, and every context mode
  (``previous``, ``next``, ``random``, ``--shuffle-context``) is computed
  from it by :meth:`~fairseq_ctx.data.context_selection.ContextRule.lines_index`
  (an empty line is no one's context and gets none);
* ``{split}.{src}-{tgt}.context.{src}`` (``.bin``/``.idx``, binarized with
  the source dictionary): line ``i`` is sentence ``i``'s one context sentence,
  an empty line none (Voita et al. 2018's ``.en.context``); which rows
  that gives each context mode (and which it refuses) is
  :meth:`~fairseq_ctx.data.context_selection.ContextRule.context_file_index`.

Either way the result is ``(index, pool, pool sizes)``: row ``i`` of the
index holds the pool positions of sentence ``i``'s context, oldest first,
``-1`` for none; the pool is the split's sources (docids) or the context
file.
"""
import os
from typing import Optional

import numpy as np
from fairseq.data import data_utils, indexed_dataset

from fairseq_ctx.data.context_selection import ContextRule
from fairseq_ctx.errors import ConfigError, DataError, MissingFileError


def docids_path(data_path: str, split: str, src: str, tgt: str) -> str:
    """The split's docids file (either language order); missing: one line
    naming the file expected."""
    candidates = [os.path.join(data_path, f"{split}.{a}-{b}.docids") for a, b in ((src, tgt), (tgt, src))]
    for path in candidates:
        if os.path.exists(path):
            return path
    raise MissingFileError(
        f"document_translation: no document ids for split '{split}': expected {candidates[0]} "
        "(one document id per line of the split, beside the binarized data)")


def shards(data_path: str, split: str, src: str, tgt: str) -> list:
    """The split's shards beside it (``{split}1``, ``{split}2``, ...), which
    fairseq loads with it as one split when it combines them (training)."""
    found = []
    while any(os.path.exists(os.path.join(data_path, f"{split}{len(found) + 1}.{a}-{b}.{src}.idx"))
              for a, b in ((src, tgt), (tgt, src))):
        found.append(f"{split}{len(found) + 1}")
    return found


def read_docids(path: str, num_lines: int, shard_names=()) -> np.ndarray:
    """One document id per line of ``path``, which must have ``num_lines``
    (the sentences of the split and of ``shard_names``, loaded with it)."""
    # split on "\n" only, like the binarizer counts lines (str.splitlines
    # would also split on \x0b, \u2028, ...)
    with open(path, encoding="utf-8", newline="") as f:
        docids = [line.rstrip("\r") for line in f.read().split("\n")]
    if docids and docids[-1] == "":
        docids.pop()
    if len(docids) != num_lines:
        combined = (f" (its shards {', '.join(shard_names)} loaded with it: the file holds their lines too, "
                    "in that order)" if shard_names else "")
        raise DataError(
            f"document_translation: {path} has {len(docids)} lines but the split has "
            f"{num_lines} sentences{combined}; the docids file must have one line per sentence")
    return np.array(docids)


def context_file_prefix(data_path: str, split: str, src: str, tgt: str) -> Optional[str]:
    """``{split}.{src}-{tgt}.context.{src}`` (the pair may be reversed) when
    its ``.bin``/``.idx`` exist, else None."""
    for a, b in ((src, tgt), (tgt, src)):
        prefix = os.path.join(data_path, f"{split}.{a}-{b}.context.{src}")
        if indexed_dataset.dataset_exists(prefix, impl="mmap"):
            return prefix
    return None


def context_file_index(prefix: str, pair, dictionary, rule: ContextRule):
    """``(index, pool, pool sizes)`` of a split (``pair``) whose context is
    the file ``prefix``, under the context rule ``rule``."""
    n = len(pair)
    ctx = data_utils.load_indexed_dataset(prefix, dictionary, dataset_impl="mmap")
    if ctx is None or len(ctx) != n:
        raise DataError(f"document_translation: {prefix}.idx has {0 if ctx is None else len(ctx)} lines but "
                        f"the split has {n} sentences; the context file must have one line per sentence")
    present = np.asarray(ctx.sizes) > 1   # an empty line is binarized as </s> alone
    # an empty line of the split (</s> alone) is no sentence: never a random context
    index, of_split = rule.context_file_index(present, prefix, empty=np.asarray(pair.src_sizes) <= 1)
    return (index, pair.src, pair.src_sizes) if of_split else (index, ctx, ctx.sizes)


def split_context(data_path: str, split: str, pair, dictionary, src: str, tgt: str, rule: ContextRule,
                  target_context: bool = False, combined: bool = False):
    """``(index, pool, pool sizes, description)`` of a loaded split
    ``pair`` (languages ``src``-``tgt``) under the context rule ``rule``:
    from its context file when there is one, else from its docids.
    ``target_context``: the previous target sentences are needed too, which
    a context file does not have. ``combined``: fairseq loaded the split's
    shards with it (training), whose lines its docids file must hold too."""
    prefix = context_file_prefix(data_path, split, src, tgt)
    if prefix is not None:
        if target_context:
            raise ConfigError(f"--target-context needs the previous target sentences, which {prefix} (source "
                              "side only) does not have")
        return (*context_file_index(prefix, pair, dictionary, rule), f"explicit context {os.path.basename(prefix)}")
    docids = read_docids(docids_path(data_path, split, src, tgt), len(pair),
                         shards(data_path, split, src, tgt) if combined else ())
    # an empty line (</s> alone) is no sentence: no one's context (fairseq-generate still translates it)
    empty = np.asarray(pair.src_sizes) <= 1
    return rule.lines_index(empty, docids), pair.src, pair.src_sizes, f"{len(set(docids.tolist()))} documents"
