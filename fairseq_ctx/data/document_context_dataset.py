"""Document context for sentence-level parallel data (Voita et al., ACL 2018).

A :class:`DocumentContextDataset` wraps a fairseq ``LanguagePairDataset`` and
gives every sentence the source sentences around it in its document:

* ``previous`` (the paper's main setting): the N sentences before it,
* ``next``: the N sentences after it,
* ``random``: N sentences drawn at random from the whole split (a control
  row of the paper: context that carries no document information).

A *document* is a run of consecutive lines with the same id in the docids
file; context never crosses a document boundary, so the first sentence of a
document (for ``previous``) gets an empty context.  Which lines form each
sentence's context is computed once, at load time, as an integer matrix
(:func:`compute_context_index`, vectorised with numpy): row ``i`` holds the
line indices of its context sentences, oldest first, ``-1`` where there is
none.

Token layout (``<sep>`` is the task's separator symbol, ``</s>`` EOS)::

    context (separate):  c_1 <sep> c_2 <sep> ... c_k </s>      empty: </s>
    concatenated source: c_1 <sep> ... c_k <sep> s_1 ... s_m </s>   empty: source

With a target pool (``--concat-context --target-context``, the 2-to-2
concatenation of Tiedemann and Scherrer 2017) the target is glued the same
way to the previous target sentences::

    concatenated target: t_1 <sep> ... t_k <sep> y_1 ... y_n </s>       empty: target

Each ``c_j`` is a context sentence without its EOS.  An empty context is a
lone ``</s>`` (fairseq's encoding of an empty line), so the context encoder
always has a key to attend to.  Context longer than ``max_context_tokens``
loses its *oldest* tokens; a concatenated source is cut from the left in the
same way so the current sentence itself always survives.  A cut never leaves
a separator first (one that would separate nothing): it is dropped too.

Batching: ``--max-tokens`` counts source and target tokens as in
``LanguagePairDataset`` (with ``concat``, the glued source); a separate
context is not counted, so a context-aware model and the sentence-level
baseline get the same batches.

The same machinery serves explicit contexts (contrastive scoring, the hub):
:func:`explicit_index` lays out per-sentence lists of context token tensors
as a context index (:func:`fairseq_ctx.data.context_input.sentence_dataset`
builds the dataset).

Decoding a 2-to-2 model with its own previous translations as the target
context (:class:`PreviousTranslations`): sentence ``i`` of a document can be
translated only once sentences ``i-N .. i-1`` are, so the dataset is given a
``rounds`` array (a sentence's position in its document) and batches round
by round (round ``r`` holds the ``r``-th sentence of every document, sorted
by length and cut by ``--max-tokens``/``--batch-size`` as usual); before a
batch is decoded its rows' previous translations are glued into the forced
decoder prefix ``t_1 <sep> ... t_k <sep>`` (:func:`target_prefix`, the
training target's layout without the current sentence), and after it the best
hypotheses are recorded for the next rounds.
"""
from typing import List, Optional, Sequence

import numpy as np
import torch

from fairseq.data import FairseqDataset, LanguagePairDataset, data_utils

from fairseq_ctx.architectures import CONTEXT_MODES  # --context-mode's choices (one list, torch-free)
# How context reaches the model: as separate net_input keys (``ctx_tokens``,
# ``ctx_lengths``), glued to the source, or not at all.
INPUT_MODES = ("separate", "concat", "none")


def document_segments(docids: Sequence) -> np.ndarray:
    """Run index of every line: lines ``i`` and ``j`` are in the same document
    iff their run indices are equal (a document id that reappears after
    another document starts a new document)."""
    docids = np.asarray(docids)
    if len(docids) == 0:
        return np.zeros(0, dtype=np.int64)
    changed = docids[1:] != docids[:-1]
    return np.concatenate([[0], np.cumsum(changed)]).astype(np.int64)


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


def explicit_index(contexts: Sequence[Sequence[torch.Tensor]]):
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


def _strip_eos(tokens: torch.Tensor, eos: int) -> torch.Tensor:
    return tokens[:-1] if len(tokens) > 0 and tokens[-1] == eos else tokens


def _drop_leading_sep(tokens: torch.Tensor, sep: int, keep: int = 1) -> torch.Tensor:
    """A cut that lands just after a sentence (or after an empty one) leaves
    ``<sep>`` first, separating nothing: drop the leading separators, but
    never the last ``keep`` tokens (the current source when concatenated)."""
    not_sep = tokens.ne(sep)
    lead = int(not_sep.int().argmax()) if bool(not_sep.any()) else len(tokens)
    return tokens[min(lead, max(len(tokens) - keep, 0)):]


def build_context_tokens(context: Sequence[torch.Tensor], eos: int, sep: int,
                         max_tokens: Optional[int] = None) -> torch.Tensor:
    """Join context sentences (oldest first) into one context sequence for a
    context encoder: ``c_1 <sep> ... c_k </s>``; ``[</s>]`` when empty."""
    parts: List[torch.Tensor] = []
    for j, sent in enumerate(context):
        if j > 0:
            parts.append(torch.tensor([sep], dtype=torch.long))
        parts.append(_strip_eos(sent.long(), eos))
    parts.append(torch.tensor([eos], dtype=torch.long))
    out = torch.cat(parts)
    if max_tokens is not None and len(out) > max_tokens:
        out = _drop_leading_sep(out[len(out) - max_tokens:], sep)
    return out


def concat_context_source(context: Sequence[torch.Tensor], source: torch.Tensor, eos: int,
                          sep: int, max_tokens: Optional[int] = None) -> torch.Tensor:
    """Glue context sentences to the source: ``c_1 <sep> ... c_k <sep> source``
    (the paper's concatenation baseline); the source alone when empty.  Cut
    from the left to ``max_tokens`` (never into a source that fits)."""
    if len(context) == 0:
        return source
    parts: List[torch.Tensor] = []
    for sent in context:
        parts.append(_strip_eos(sent.long(), eos))
        parts.append(torch.tensor([sep], dtype=torch.long))
    parts.append(source.long())
    out = torch.cat(parts)
    if max_tokens is not None and len(out) > max_tokens:
        out = _drop_leading_sep(out[len(out) - max(max_tokens, len(source)):], sep, keep=len(source))
    return out


def target_prefix(previous: Sequence[torch.Tensor], eos: int, sep: int,
                  max_tokens: Optional[int] = None) -> torch.Tensor:
    """The forced decoder prefix of a 2-to-2 model: ``t_1 <sep> ... t_k <sep>``
    (each previous target sentence without its EOS, oldest first), i.e. the
    glued training target (:func:`concat_context_source`) without the current
    sentence; empty without previous sentences.  Longer than ``max_tokens``:
    its oldest tokens are dropped (and a separator left first)."""
    if len(previous) == 0 or (max_tokens is not None and max_tokens <= 0):
        return torch.zeros(0, dtype=torch.long)
    parts: List[torch.Tensor] = []
    for sent in previous:
        parts.append(_strip_eos(sent.long(), eos))
        parts.append(torch.tensor([sep], dtype=torch.long))
    out = torch.cat(parts)
    if max_tokens is not None and len(out) > max_tokens:
        out = _drop_leading_sep(out[len(out) - max_tokens:], sep, keep=0)
    return out


class PreviousTranslations:
    """The target context of 2-to-2 decoding: the model's own translations.

    ``pool`` holds target sentences (token tensors, EOS optional; ``None``:
    not translated, e.g. skipped as too long, and then no context); row
    ``i`` of ``index`` the pool positions of item ``i``'s target context,
    oldest first, ``-1`` = none (the source context's index, so the same
    sentences' translations); ``slots[i]`` the pool position that item
    ``i``'s own translation fills (``-1``: kept nowhere; ``slots=None``:
    nothing is recorded, the pool is fixed).

    Length: the generator's output length limit (``max_len``: ``--max-len-a``
    and ``-b``, and the model's target positions) bounds the whole decoder
    output, forced prefix included, as in training; so that the current
    sentence keeps room, item ``i``'s prefix keeps at most ``min(max_tokens,
    max_len) - reserve[i]`` of its newest tokens (``max_tokens``: the model's
    target limit; ``reserve``: room for the current sentence, its source
    length).  This only cuts runaway translations: with fairseq's default
    ``--max-len-b 200`` a normal previous sentence is kept whole.
    """

    def __init__(self, index: np.ndarray, pool: List[Optional[torch.Tensor]], sep: int, eos: int, pad: int,
                 slots: Optional[np.ndarray] = None, max_tokens: Optional[int] = None,
                 reserve: Optional[np.ndarray] = None):
        self.index = np.asarray(index, dtype=np.int64)
        self.pool = list(pool)
        self.slots = None if slots is None else np.asarray(slots, dtype=np.int64)
        self.sep, self.eos, self.pad = sep, eos, pad
        self.max_tokens = max_tokens
        self.reserve = None if reserve is None else np.asarray(reserve, dtype=np.int64)

    def previous(self, i: int) -> List[torch.Tensor]:
        """Item ``i``'s previous translations, oldest first: the newest ones
        up to the first that is missing (a skipped sentence), never across
        the gap, where an older translation would sit in the slot of the one
        left out (the model learnt ``t_{i-k} <sep> ... t_{i-1} <sep>``)."""
        out: List[torch.Tensor] = []
        for j in self.index[i]:
            out = [] if j < 0 or self.pool[j] is None else out + [self.pool[j]]
        return out

    def prefix(self, i: int, max_len: Optional[int] = None) -> torch.Tensor:
        """Item ``i``'s forced prefix (:func:`target_prefix` of its previous
        translations), cut to the length limits (see the class docstring)."""
        limits = [n for n in (self.max_tokens, max_len) if n is not None]
        cap = min(limits) if limits else None
        if cap is not None and self.reserve is not None:
            cap = max(int(cap - self.reserve[i]), 0)
        return target_prefix(self.previous(i), self.eos, self.sep, cap)

    def prefix_tokens(self, ids: Sequence[int], device=None, max_len: Optional[int] = None) -> torch.Tensor:
        """``B x P`` forced prefixes of items ``ids`` (a batch's rows),
        right-padded (fairseq's generator forces a row's tokens up to its
        first pad); ``P`` is 0 when no row has a previous translation.
        ``max_len``: the generator's output length limit for the batch
        (:func:`generator_max_len`)."""
        rows = [self.prefix(int(i), max_len) for i in ids]
        width = max((len(r) for r in rows), default=0)
        out = torch.full((len(rows), width), self.pad, dtype=torch.long)
        for k, r in enumerate(rows):
            out[k, :len(r)] = r
        return out if device is None else out.to(device)

    def record(self, ids: Sequence[int], hypos) -> None:
        """Keep the best hypothesis of each item (its ``tokens``, already cut
        to the current sentence) as the translation later items see."""
        if self.slots is None:
            return
        for i, beam in zip(ids, hypos):
            slot = int(self.slots[int(i)])
            if slot >= 0 and len(beam):
                self.pool[slot] = beam[0]["tokens"].detach().cpu()


def generator_max_len(generator, src_tokens: torch.Tensor) -> Optional[int]:
    """The output length limit fairseq's ``SequenceGenerator`` sets for a
    batch: ``min(max_len_a * T_src + max_len_b, model positions - 1)``
    (``None`` for a generator without these attributes or with
    ``--match-source-len``)."""
    a, b, limit = (getattr(generator, k, None) for k in ("max_len_a", "max_len_b", "max_len"))
    if a is None or b is None or getattr(generator, "match_source_len", False):
        return None
    max_len = int(a * src_tokens.size(1) + b)
    return min(max_len, int(limit) - 1) if limit is not None else max_len


def document_positions(docids: Sequence) -> np.ndarray:
    """Position of every line in its document (0 for a document's first line)."""
    seg = document_segments(docids)
    if len(seg) == 0:
        return seg
    starts = np.flatnonzero(np.concatenate([[True], seg[1:] != seg[:-1]]))
    return (np.arange(len(seg)) - np.repeat(starts, np.diff(np.append(starts, len(seg))))).astype(np.int64)


def split_concatenated(src_tokens: torch.Tensor, pad: int, eos: int, sep: int,
                       left_pad: bool = True):
    """Inverse of :func:`concat_context_source` on a padded batch ``B x T``:
    everything after the last ``<sep>`` of a row is its source, everything
    before it its context (re-terminated with ``</s>``; ``[</s>]`` if the row
    has no ``<sep>``).  Returns ``(src_tokens, src_lengths, ctx_tokens,
    ctx_lengths)``, padded on the same side as the input."""
    sources, contexts = [], []
    for row in src_tokens:
        row = row[row.ne(pad)]
        seps = row.eq(sep).nonzero()
        cut = int(seps[-1]) if len(seps) else -1
        sources.append(row[cut + 1:])
        ctx = row[:max(cut, 0)]
        contexts.append(torch.cat([ctx, row.new_tensor([eos])]))

    def collate(tokens):
        return (data_utils.collate_tokens(tokens, pad, eos, left_pad=left_pad),
                torch.tensor([len(t) for t in tokens], dtype=torch.long, device=src_tokens.device))

    src, src_lengths = collate(sources)
    ctx, ctx_lengths = collate(contexts)
    return src, src_lengths, ctx, ctx_lengths


class DocumentContextDataset(FairseqDataset):
    """A ``LanguagePairDataset`` whose samples carry document context.

    Args:
        pair: the sentence-level ``LanguagePairDataset``.
        context_index: ``len(pair) x N`` int array of indices into ``pool``,
            ``-1`` = no sentence (see :func:`compute_context_index`).
        pool: indexable of source token tensors the context is taken from
            (``pair.src`` for document data).
        pool_sizes: lengths of the pool's items (with EOS).
        sep: index of the separator symbol.
        input_mode: ``separate`` (batches get ``net_input["ctx_tokens"]`` and
            ``["ctx_lengths"]``, B x T_ctx, padded like the source),
            ``concat`` (context glued to the source), ``none``.
        max_context_tokens: cap on the context (``separate``) or on the
            concatenated source (``concat``); normally the model's
            ``--max-source-positions``.
        skip: optional boolean mask of items to leave out of every batch
            (interactive mode: the empty lines that separate documents).
        target_pool, target_pool_sizes: target token tensors the target
            context is taken from (``pair.tgt`` for document data) and their
            lengths; ``None`` (default): the target stays the sentence alone.
        target_index: ``len(pair) x M`` indices into ``target_pool``
            (default: ``context_index``, the same sentences' targets).
        target_sep: the separator's index in the target dictionary.
        max_target_tokens: cap on the concatenated target (the current
            sentence always survives).
        rounds: optional int array, one per item: batch round by round, in
            increasing order, never mixing two rounds in one batch (2-to-2
            decoding: an item's position in its document).
        translations: optional :class:`PreviousTranslations` that the
            decoding loop uses for the forced prefixes of these items; the
            collater then remembers its last batch (``last_batch``), which is
            how ``inference_step`` finds the rows of a fairseq-interactive
            batch (it keeps only ``src_tokens``/``src_lengths``).
    """

    def __init__(self, pair, context_index: np.ndarray, pool, pool_sizes: np.ndarray, sep: int,
                 input_mode: str = "separate", max_context_tokens: Optional[int] = None,
                 skip: Optional[np.ndarray] = None, target_pool=None, target_pool_sizes=None,
                 target_index: Optional[np.ndarray] = None, target_sep: Optional[int] = None,
                 max_target_tokens: Optional[int] = None, rounds: Optional[np.ndarray] = None,
                 translations: Optional[PreviousTranslations] = None):
        if input_mode not in INPUT_MODES:
            raise ValueError(f"input_mode must be one of {INPUT_MODES}, got {input_mode!r}")
        context_index = np.asarray(context_index, dtype=np.int64)
        if context_index.ndim != 2 or context_index.shape[0] != len(pair):
            raise ValueError(f"context_index must have shape ({len(pair)}, N), "
                             f"got {context_index.shape}")
        if getattr(pair, "buckets", None) is not None:
            # the pair's items are padded to their bucket's length, and the
            # context is glued from (and sized by) the unpadded sentences
            raise ValueError("--num-batch-buckets: not supported with document context; leave it at 0")
        super().__init__()
        self.pair = pair
        self.context_index = context_index
        self.pool = pool
        self.pool_sizes = np.asarray(pool_sizes, dtype=np.int64)
        self.sep = sep
        self.eos = pair.src_dict.eos()
        self.pad = pair.src_dict.pad()
        self.input_mode = input_mode
        self.max_context_tokens = max_context_tokens
        self.skip = skip
        self.target_pool = target_pool
        if target_pool is not None:
            target_index = context_index if target_index is None else np.asarray(target_index, dtype=np.int64)
            if target_index.ndim != 2 or target_index.shape[0] != len(pair):
                raise ValueError(f"target_index must have shape ({len(pair)}, M), got {target_index.shape}")
            if target_sep is None:
                raise ValueError("a target pool needs target_sep")
            self.target_pool_sizes = np.asarray(target_pool_sizes, dtype=np.int64)
        self.target_index = target_index
        self.target_sep = target_sep
        self.max_target_tokens = max_target_tokens
        if rounds is not None:
            rounds = np.asarray(rounds, dtype=np.int64)
            if rounds.shape != (len(pair),):
                raise ValueError(f"rounds must have shape ({len(pair)},), got {rounds.shape}")
        self.rounds = rounds
        self.translations = translations
        self.last_batch = None
        self._compute_sizes()

    # ------------------------------------------------------------------ sizes
    def _compute_sizes(self):
        index = self.context_index
        present = index >= 0
        lens = np.where(present, self.pool_sizes[np.clip(index, 0, None)] if len(self.pool_sizes)
                        else 0, 0)
        # each context sentence contributes its tokens minus EOS plus one <sep>
        # (or the final </s>), so a context of k>0 sentences is sum(len) long
        total = lens.sum(axis=1).astype(np.int64)
        cap = self.max_context_tokens
        src_sizes = np.asarray(self.pair.src_sizes, dtype=np.int64)
        if self.input_mode == "concat":
            sizes = src_sizes + total
            if cap is not None:
                sizes = np.minimum(sizes, np.maximum(cap, src_sizes))
            self.src_sizes = sizes
        else:
            self.src_sizes = src_sizes
        ctx = np.maximum(total, 1)
        self.ctx_sizes = np.minimum(ctx, cap) if cap is not None else ctx
        self.tgt_sizes = self.pair.tgt_sizes
        if self.target_pool is not None and self.tgt_sizes is not None:
            # the glued target context counts in --max-tokens like the glued source
            t_index = self.target_index
            t_lens = np.where(t_index >= 0, self.target_pool_sizes[np.clip(t_index, 0, None)]
                              if len(self.target_pool_sizes) else 0, 0).sum(axis=1).astype(np.int64)
            tgt = np.asarray(self.tgt_sizes, dtype=np.int64)
            self.tgt_sizes = tgt + t_lens
            if self.max_target_tokens is not None:
                self.tgt_sizes = np.minimum(self.tgt_sizes, np.maximum(self.max_target_tokens, tgt))
        self.sizes = (np.vstack((self.src_sizes, self.tgt_sizes)).T
                      if self.tgt_sizes is not None else self.src_sizes)

    def cap_context(self, limit: int) -> int:
        """Cap the context (``separate``) or the glued source (``concat``) at
        ``limit`` tokens; returns how many items (not skipped) lose their
        context's oldest tokens to the cap."""
        if self.input_mode == "none":
            return 0
        if self.max_context_tokens is None or self.max_context_tokens > limit:
            self.max_context_tokens = limit
            self._compute_sizes()
        index, pool_sizes = self.context_index, self.pool_sizes
        if index.size == 0 or len(pool_sizes) == 0:
            return 0
        lengths = np.where(index >= 0, pool_sizes[np.clip(index, 0, None)], 0).sum(axis=1)
        if self.input_mode == "concat":
            cut = (lengths > 0) & (np.asarray(self.pair.src_sizes) + lengths > limit)
        else:
            cut = lengths > limit
        if self.skip is not None:
            cut &= ~self.skip
        return int(cut.sum())

    # ------------------------------------------------------------------ items
    def context_sentences(self, index: int) -> List[torch.Tensor]:
        return [self.pool[j] for j in self.context_index[index] if j >= 0]

    def __getitem__(self, index):
        sample = self.pair[index]
        if self.input_mode == "none":
            return sample
        context = self.context_sentences(index)
        if self.input_mode == "concat":
            sample["source"] = concat_context_source(context, sample["source"], self.eos, self.sep,
                                                     self.max_context_tokens)
            if self.target_pool is not None and sample.get("target") is not None:
                previous = [self.target_pool[j] for j in self.target_index[index] if j >= 0]
                sample["target"] = concat_context_source(previous, sample["target"], self.pair.tgt_dict.eos(),
                                                         self.target_sep, self.max_target_tokens)
        else:
            sample["context"] = build_context_tokens(context, self.eos, self.sep,
                                                     self.max_context_tokens)
        return sample

    def __len__(self):
        return len(self.pair)

    def collater(self, samples, pad_to_length=None):
        batch = self.pair.collater(samples, pad_to_length=pad_to_length)
        if self.translations is not None:
            self.last_batch = batch or None
        if not batch or self.input_mode != "separate":
            return batch
        # the pair collater sorts the batch by source length: follow its order
        by_id = {s["id"]: s["context"] for s in samples}
        context = [by_id[i] for i in batch["id"].tolist()]
        batch["net_input"]["ctx_tokens"] = data_utils.collate_tokens(
            context, self.pad, self.eos, left_pad=self.pair.left_pad_source,
            pad_to_multiple=self.pair.pad_to_multiple)
        batch["net_input"]["ctx_lengths"] = torch.tensor([len(c) for c in context], dtype=torch.long)
        return batch

    # --------------------------------------------- batching (mirrors LanguagePairDataset)
    def num_tokens(self, index):
        return max(self.src_sizes[index], self.tgt_sizes[index] if self.tgt_sizes is not None else 0)

    def num_tokens_vec(self, indices):
        sizes = self.src_sizes[indices]
        if self.tgt_sizes is not None:
            sizes = np.maximum(sizes, self.tgt_sizes[indices])
        return sizes

    def size(self, index):
        return (self.src_sizes[index], self.tgt_sizes[index] if self.tgt_sizes is not None else 0)

    @property
    def shuffle(self) -> bool:
        return self.pair.shuffle

    # no length buckets (checked in __init__): fairseq's ordered_indices sorts by length
    buckets = None

    def ordered_indices(self):
        """``LanguagePairDataset.ordered_indices`` on this dataset's sizes
        (shuffled if the pair dataset shuffles, then sorted by target and
        source length, the glued ones with ``concat``), skipped items left
        out."""
        indices = LanguagePairDataset.ordered_indices(self)
        if self.skip is not None:
            indices = indices[~self.skip[indices]]
        return indices

    def batch_by_size(self, indices, max_tokens=None, max_sentences=None, required_batch_size_multiple=1):
        """fairseq's batching; with ``rounds``, of each round separately, the
        rounds in increasing order (length order kept within a round)."""
        if self.rounds is None:
            return super().batch_by_size(indices, max_tokens, max_sentences, required_batch_size_multiple)
        indices = np.asarray(indices, dtype=np.int64)
        batches = []
        for r in np.unique(self.rounds[indices]):
            batches.extend(super().batch_by_size(indices[self.rounds[indices] == r], max_tokens, max_sentences,
                                                 required_batch_size_multiple))
        return batches

    def filter_indices_by_size(self, indices, max_sizes):
        return data_utils.filter_paired_dataset_indices_by_size(
            self.src_sizes, self.tgt_sizes, indices, max_sizes)

    @property
    def supports_prefetch(self):
        return False

    # -------------------------------------------- attributes fairseq-generate reads
    @property
    def src(self):
        return self.pair.src

    @property
    def tgt(self):
        return self.pair.tgt

    @property
    def src_dict(self):
        return self.pair.src_dict

    @property
    def tgt_dict(self):
        return self.pair.tgt_dict

    @property
    def left_pad_source(self):
        return self.pair.left_pad_source

    def set_epoch(self, epoch):
        self.pair.set_epoch(epoch)
