"""Which sentences are whose context, and what a document is: the one rule
(Voita et al., ACL 2018, Sect. 3: a sentence's context is the sentence(s)
before it in its document), written once here and called by everything that
gives a sentence context: the task's splits (docids or a context file), the
hub and ``fairseq-ctx-translate`` (documents in memory), fairseq-interactive
(the input stream), the contrastive scorer and the context-usage report
(test-suite items with their context given), the document-level scores.

**A document** (:func:`document_segments`, :func:`split_documents`) is a run
of consecutive lines with the same document id.  An empty line is no
sentence: never anyone's context, and never translated as one (except in a
binarized split, whose line fairseq-generate translates: with no context,
:meth:`ContextRule.lines_index`).  Where document
ids are given they alone say where documents start (an empty line inside a
document does not split it); where none are (raw text, fairseq-interactive)
an empty line ends a document.

**Context** (:class:`ContextRule`: ``--context-size N``, ``--context-mode``,
``--context-seed``, ``--shuffle-context``): row ``i`` of a context index
holds the line indices of sentence ``i``'s context, oldest first, ``-1``
for none (:func:`compute_context_index`, vectorised with numpy).
``previous`` (the paper's setting): the N sentences before it in its
document; ``next``: the N after it; ``random``: N drawn uniformly from the
other sentences of the split, any document (a control), fixed by the seed;
``--shuffle-context``: the rows deranged (:func:`derange`), every sentence
gets another's context.  The other sources follow the same rule: a context
file (line ``i`` is sentence ``i``'s previous sentence, no documents:
:meth:`ContextRule.context_file_index`); explicit contexts (the newest N of
an item's sentences: :meth:`ContextRule.newest`, laid out by
:func:`explicit_index`); the interactive stream (:meth:`ContextRule.stream_index`:
the lines remembered between buffers are the context the next line would
get); decoding with the model's own previous translations, which needs each
sentence's context decoded before it (:meth:`ContextRule.require_in_order`,
rounds by :func:`document_positions`).

numpy only (no torch, no fairseq), so the command-line tools can read
documents before they load a model.
"""
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

from fairseq_ctx.errors import ConfigError

# --context-mode's choices, the first the default
CONTEXT_MODES: Tuple[str, ...] = ("previous", "next", "random")


# ---------------------------------------------------------------------------
# documents

def document_segments(docids: Sequence) -> np.ndarray:
    """Run index of every line: lines ``i`` and ``j`` are in the same document
    iff their run indices are equal (a document id that reappears after
    another document starts a new document)."""
    docids = np.asarray(docids)
    if len(docids) == 0:
        return np.zeros(0, dtype=np.int64)
    changed = docids[1:] != docids[:-1]
    return np.concatenate([[0], np.cumsum(changed)]).astype(np.int64)


def split_documents(empty: Sequence[bool], docids=None) -> Tuple[np.ndarray, np.ndarray]:
    """``(sentences, documents)``: the indices of the lines that are
    sentences (``empty`` is False) and a document number for each (equal
    within a document, increasing along the lines, not always consecutive).
    With ``docids`` (one per line) a document is a run of equal ids among
    the sentences; without, an empty line ends a document (see the module
    docstring)."""
    empty = np.asarray(empty, dtype=bool).reshape(-1)
    keep = np.flatnonzero(~empty).astype(np.int64)
    if docids is not None:
        if len(docids) != len(empty):
            raise ValueError(f"{len(docids)} document ids for {len(empty)} lines")
        ids = np.asarray(docids, dtype=object)[keep]
    else:
        # a new document after every empty line: count the empty lines before each line
        return keep, np.cumsum(empty)[keep].astype(np.int64)
    return keep, document_segments(ids) if len(keep) else keep.copy()


def document_positions(docids: Sequence) -> np.ndarray:
    """Position of every line in its document (0 for a document's first line)."""
    seg = document_segments(docids)
    if len(seg) == 0:
        return seg
    starts = np.flatnonzero(np.concatenate([[True], seg[1:] != seg[:-1]]))
    return (np.arange(len(seg)) - np.repeat(starts, np.diff(np.append(starts, len(seg))))).astype(np.int64)


# ---------------------------------------------------------------------------
# context

def compute_context_index(docids: Sequence, context_size: int, mode: str = "previous",
                          seed: int = 1, shuffle: bool = False) -> np.ndarray:
    """Context line indices, shape ``(len(docids), context_size)``, ``-1`` = none.

    ``previous``: columns are lines ``i-N .. i-1`` (oldest first), ``next``:
    lines ``i+1 .. i+N``, both limited to the same document.  ``random``: N
    lines drawn uniformly from the other lines of the split (any document),
    fixed by ``seed``.  ``shuffle`` deranges the rows (:func:`derange`): every
    sentence gets the context of another sentence, the paper's
    shuffled-context test.
    """
    if context_size < 0:
        raise ValueError(f"--context-size must be >= 0, got {context_size}")
    if mode not in CONTEXT_MODES:
        raise ValueError(f"--context-mode must be one of {CONTEXT_MODES}, got {mode!r}")
    seg = document_segments(docids)
    n = len(seg)
    rows = np.arange(n, dtype=np.int64)[:, None]
    rng = np.random.default_rng(seed)
    if mode == "random":
        if n < 2:
            index = np.full((n, context_size), -1, dtype=np.int64)
        else:
            index = rng.integers(0, n - 1, size=(n, context_size), dtype=np.int64)
            index += index >= rows  # skip the sentence itself
    else:
        if mode == "previous":
            offsets = -np.arange(context_size, 0, -1, dtype=np.int64)
        else:
            offsets = np.arange(1, context_size + 1, dtype=np.int64)
        index = rows + offsets[None, :]
        inside = (index >= 0) & (index < n)
        same_doc = seg[np.clip(index, 0, max(n - 1, 0))] == seg[:, None] if n else inside
        index = np.where(inside & same_doc, index, -1)
    if shuffle:
        index = derange(index, rng)
    return index.astype(np.int64).reshape(n, context_size)


def derange(rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``rows`` reordered by a random derangement (drawn from ``rng``, so
    fixed by its seed): row ``i`` of the result is row ``p[i]`` of ``rows``
    with ``p`` a permutation without fixed point, so that every sentence's
    context is that of another sentence (``--shuffle-context``).  Drawn
    uniformly among derangements, by rejecting permutations that have a
    fixed point (about e = 2.7 draws on average).  Fewer than two rows:
    unchanged (no derangement exists)."""
    n = len(rows)
    if n < 2:
        return rows
    positions = np.arange(n)
    while True:
        order = rng.permutation(n)
        if not (order == positions).any():
            return rows[order]


def explicit_index(contexts: Sequence[Sequence]) -> Tuple[np.ndarray, list]:
    """``(index, pool)`` of explicitly given contexts (``contexts[i]``: item
    ``i``'s sentences, oldest first, maybe none): the pool is the sentences
    in order, and row ``i`` of the ``len(contexts) x N`` index (``N`` the
    longest context) holds the pool positions of item ``i``'s sentences,
    right-aligned (column ``-1`` is every item's newest sentence), ``-1`` in
    front, as :func:`compute_context_index` lays out a document's."""
    counts = np.array([len(c) for c in contexts], dtype=np.int64)
    width = int(counts.max()) if len(counts) else 0
    pool = [t for c in contexts for t in c]
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64) if len(counts) else counts
    cols = np.arange(width, dtype=np.int64)[None, :]
    first = width - counts[:, None]  # first filled column of each row
    index = np.where(cols >= first, starts[:, None] + cols - first, -1)
    return index.reshape(len(contexts), width).astype(np.int64), pool


@dataclass(frozen=True)
class ContextRule:
    """The task's context flags as the rule that applies them (see the
    module docstring): ``size`` sentences (``--context-size``), chosen by
    ``mode`` (``--context-mode``), ``seed`` for ``random`` and ``shuffle``
    (``--context-seed``, ``--shuffle-context``)."""

    size: int = 1
    mode: str = CONTEXT_MODES[0]
    seed: int = 1
    shuffle: bool = False

    @classmethod
    def from_cfg(cls, cfg) -> "ContextRule":
        """The rule of a task configuration (``--task document_translation``'s
        flags); a configuration without them (``--task translation``): no context."""
        if getattr(cfg, "context_size", None) is None:
            return cls(size=0)
        return cls(size=int(cfg.context_size), mode=str(cfg.context_mode), seed=int(cfg.context_seed),
                   shuffle=bool(cfg.shuffle_context))

    @property
    def in_order(self) -> bool:
        """True when every sentence's context is sentences before it in its
        document, so documents can be decoded in order with it."""
        return self.mode == "previous" and not self.shuffle

    def require_in_order(self, what: str) -> None:
        """Stop with one line unless :attr:`in_order` (``what`` decodes
        documents in order: the interactive stream, previous translations)."""
        if not self.in_order:
            raise ConfigError(f"{what} needs --context-mode previous without --shuffle-context "
                              f"(got --context-mode {self.mode}{' --shuffle-context' if self.shuffle else ''})")

    def index(self, docids: Sequence) -> np.ndarray:
        """The context index of sentences with document ids ``docids``."""
        return compute_context_index(docids, self.size, self.mode, seed=self.seed, shuffle=self.shuffle)

    def lines_index(self, empty: Sequence[bool], docids=None) -> np.ndarray:
        """The context index of lines of which the ``empty`` ones are no
        sentence (:func:`split_documents`: documents by ``docids`` where given,
        else an empty line ends one): :meth:`index` over the other lines,
        mapped back to line positions; an empty line's row is all ``-1`` and
        it is no line's context."""
        empty = np.asarray(empty, dtype=bool).reshape(-1)
        if docids is not None and not empty.any():  # every line a sentence (no per-line work on a large split)
            return self.index(docids)
        keep, docs = split_documents(empty, docids)
        index = self.index(docs)
        full = np.full((len(empty), self.size), -1, dtype=np.int64)
        full[keep] = np.where(index >= 0, keep[np.clip(index, 0, None)], -1)
        return full

    def newest(self, sentences: Sequence) -> list:
        """The context of an item whose preceding sentences are given
        (``sentences``, oldest first): the newest ``size`` of them (all when
        there are fewer, none for size 0)."""
        return list(sentences[len(sentences) - self.size:]) if self.size > 0 else []

    def context_file_index(self, present: np.ndarray, where: str, empty: Optional[Sequence[bool]] = None
                           ) -> Tuple[np.ndarray, bool]:
        """``(index, of_split)`` of a split whose context is a context file
        (``where``): ``present[i]`` says whether line ``i`` of the file holds
        a sentence, which is then sentence ``i``'s previous one, at pool
        position ``i`` of the file (``of_split`` False), unless line ``i``
        of the split is ``empty`` (no sentence: no context).  ``random``:
        indices of the split's own sentences, as with docids (``of_split``
        True), never one of its ``empty`` lines.
        Refuses what needs documents in one line naming the file."""
        n = len(present)
        if self.mode == "next":
            raise ConfigError(f"--context-mode next needs documents (docids): {where} holds only each sentence's "
                              "previous sentence (use the 2019 release: prepare-opensubtitles-en-ru.sh --release "
                              "2019)")
        if self.mode == "random":   # random sentences of the split, as with docids (never an empty line)
            empty = np.zeros(n, dtype=bool) if empty is None else empty
            return self.lines_index(empty, np.zeros(n, dtype=np.int64)), True
        if self.size > 1:
            raise ConfigError(f"--context-size {self.size}: {where} holds one context sentence per line")
        present = np.asarray(present, dtype=bool) & ~(np.zeros(n, dtype=bool) if empty is None else
                                                      np.asarray(empty, dtype=bool))  # an empty line: none
        index = np.where(present, np.arange(n), -1)[:, None][:, :self.size]
        if self.shuffle:   # as compute_context_index shuffles
            index = derange(index, np.random.default_rng(self.seed))
        return index.astype(np.int64), False

    def stream_index(self, n_remembered: int, empty: Sequence[bool]) -> Tuple[np.ndarray, List[int]]:
        """Context of a buffer of lines that follows ``n_remembered`` lines of
        the current document (fairseq-interactive): returns the index of the
        buffer's lines (``len(empty) x size``) into the remembered lines
        followed by the buffer's (pool positions ``0 .. n_remembered +
        len(empty) - 1``; ``-1``: none; an empty line's row is all ``-1``),
        and the pool positions to remember for the next buffer: the context
        the next line would get if it continued the last document (none
        after an empty line)."""
        self.require_in_order("interactive translation")
        empty = np.asarray(empty, dtype=bool)
        # the remembered lines, the buffer, and one probe line that continues the stream
        lines = np.concatenate([np.zeros(n_remembered, dtype=bool), empty, [False]])
        full = self.lines_index(lines)
        return full[n_remembered:-1], [int(j) for j in full[-1] if j >= 0]
