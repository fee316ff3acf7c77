"""The fairseq dataset of sentences with document context (Voita et al.,
ACL 2018): a :class:`DocumentContextDataset` wraps a fairseq
``LanguagePairDataset`` and gives every item the context sentences that a
context index names (row ``i``: positions in a pool of token tensors,
oldest first, ``-1`` = none).

Which sentences those are is :mod:`fairseq_ctx.data.context_selection`'s
rule (documents from docids, a context file, explicit contexts, the
interactive stream); how they are laid out in tokens is
:mod:`fairseq_ctx.data.token_layout`; how they reach the model (separate
keys, glued to the source, not at all) is the dataset's input mode, an
object of :mod:`fairseq_ctx.data.context_input` whose methods make the
items, the batches and the sizes.  This file is the fairseq side: sizes,
ordering, batching and the attributes fairseq-generate reads.

Batching: ``--max-tokens`` counts source and target tokens as in
``LanguagePairDataset`` (with ``concat``, the glued source and target); a
separate context is not counted, so a context-aware model and the
sentence-level baseline get the same batches.  With ``rounds`` (2-to-2
decoding, :mod:`fairseq_ctx.data.previous_translations`) items are batched
round by round, never two rounds in one batch.
"""
from typing import Callable, List, Optional

import numpy as np
import torch

from fairseq.data import FairseqDataset, LanguagePairDataset, data_utils

from fairseq_ctx.data.context_input import InputMode, mode_named


def _pool_lengths(index: np.ndarray, pool_sizes: np.ndarray) -> np.ndarray:
    """Per row of ``index``: the summed lengths (EOS included) of the pool
    items it names, 0 for none; a context of ``k`` sentences laid out with
    separators is this long (each EOS becomes a ``<sep>`` or the final ``</s>``)."""
    if len(pool_sizes) == 0:
        return np.zeros(len(index), dtype=np.int64)
    return np.where(index >= 0, pool_sizes[np.clip(index, 0, None)], 0).sum(axis=1).astype(np.int64)


class DocumentContextDataset(FairseqDataset):
    """A ``LanguagePairDataset`` whose samples carry document context.

    Args:
        pair: the sentence-level ``LanguagePairDataset``.
        context_index: ``len(pair) x N`` int array of indices into ``pool``,
            ``-1`` = no sentence; ``pool``: source token tensors (``pair.src``
            for document data), ``pool_sizes`` their lengths with EOS.
        sep: index of the separator symbol.
        input_mode: how the context reaches the model, a mode of
            :mod:`fairseq_ctx.data.context_input` or its name: ``separate``
            (batches get ``net_input["ctx_tokens"]`` and ``["ctx_lengths"]``,
            B x T_ctx, padded like the source), ``concat`` (context glued to
            the source), ``none``, or ``separate-glued`` (``separate`` glued
            to the source for fairseq-interactive's batches, split again
            before the model).
        max_context_tokens: cap on the context (``separate``) or on the
            concatenated source (``concat``); normally the model's
            ``--max-source-positions``.
        skip: optional boolean mask of items to leave out of every batch
            (interactive mode: the empty lines that separate documents).
        target_pool, target_pool_sizes, target_index: the target context
            (``pair.tgt`` for document data; lengths; default index:
            ``context_index``); ``None``: the target is the sentence alone.
        target_sep: the separator's index in the target dictionary.
        max_target_tokens: cap on the concatenated target (the current
            sentence always survives).
        rounds: optional int array, one per item: batch round by round, in
            increasing order, never mixing two rounds in one batch (2-to-2
            decoding: an item's position in its document).
        translations: the items' ``PreviousTranslations`` (2-to-2 decoding),
            carried for the decoding that made them; never read here.
        on_collate: optional callable given every batch the collater makes
            (fairseq-interactive keeps only ``src_tokens``/``src_lengths`` of
            a batch, so the decoding that needs its rows' ids listens here:
            :class:`~fairseq_ctx.tasks.document_decoding.DocumentDecoding`).
    """

    def __init__(self, pair, context_index: np.ndarray, pool, pool_sizes: np.ndarray, sep: int,
                 input_mode="separate", max_context_tokens: Optional[int] = None,
                 skip: Optional[np.ndarray] = None, target_pool=None, target_pool_sizes=None,
                 target_index: Optional[np.ndarray] = None, target_sep: Optional[int] = None,
                 max_target_tokens: Optional[int] = None, rounds: Optional[np.ndarray] = None,
                 translations=None, on_collate: Optional[Callable[[dict], None]] = None):
        context_index = np.asarray(context_index, dtype=np.int64)
        if context_index.ndim != 2 or context_index.shape[0] != len(pair):
            raise ValueError(f"context_index must have shape ({len(pair)}, N), got {context_index.shape}")
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
        self._input_mode = mode_named(input_mode)
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
        self.on_collate = on_collate
        self._compute_sizes()

    @property
    def input_mode(self) -> InputMode:
        return self._input_mode

    @input_mode.setter
    def input_mode(self, mode):
        """The task switches its datasets' mode once the model is known."""
        self._input_mode = mode_named(mode)
        self._compute_sizes()

    # ------------------------------------------------------------------ sizes
    def _compute_sizes(self):
        total = _pool_lengths(self.context_index, self.pool_sizes)
        cap = self.max_context_tokens
        self.src_sizes = self.input_mode.source_sizes(np.asarray(self.pair.src_sizes, dtype=np.int64), total, cap)
        ctx = np.maximum(total, 1)
        self.ctx_sizes = np.minimum(ctx, cap) if cap is not None else ctx
        self.tgt_sizes = self.pair.tgt_sizes
        if self.target_pool is not None and self.tgt_sizes is not None:
            # the glued target context counts in --max-tokens like the glued source
            tgt = np.asarray(self.tgt_sizes, dtype=np.int64)
            self.tgt_sizes = tgt + _pool_lengths(self.target_index, self.target_pool_sizes)
            if self.max_target_tokens is not None:
                self.tgt_sizes = np.minimum(self.tgt_sizes, np.maximum(self.max_target_tokens, tgt))
        self.sizes = (np.vstack((self.src_sizes, self.tgt_sizes)).T
                      if self.tgt_sizes is not None else self.src_sizes)

    def cap_context(self, limit: int) -> int:
        """Cap the context (``separate``) or the glued source (``concat``) at
        ``limit`` tokens; returns how many items (not skipped) lose their
        context's oldest tokens to the cap."""
        if not self.input_mode.uses_context:
            return 0
        lengths = _pool_lengths(self.context_index, self.pool_sizes)
        return self._cap("max_context_tokens", limit, self.input_mode.cut(
            np.asarray(self.pair.src_sizes, dtype=np.int64), lengths, limit))

    def cap_target_context(self, limit: int) -> int:
        """Cap the glued target (``--target-context``) at ``limit`` tokens;
        returns how many items (not skipped) lose their target context's
        oldest tokens to the cap (0 without target context)."""
        if self.target_pool is None or self.pair.tgt_sizes is None:
            return 0
        context = _pool_lengths(self.target_index, self.target_pool_sizes)
        return self._cap("max_target_tokens", limit,
                         (context > 0) & (np.asarray(self.pair.tgt_sizes, dtype=np.int64) + context > limit))

    def _cap(self, attr: str, limit: int, cut: np.ndarray) -> int:
        """Lower the cap ``attr`` to ``limit`` (the sizes follow); returns how
        many items of ``cut`` (those that lose tokens to it) are not skipped."""
        if getattr(self, attr) is None or getattr(self, attr) > limit:
            setattr(self, attr, limit)
            self._compute_sizes()
        if self.skip is not None:
            cut = cut & ~self.skip
        return int(cut.sum())

    # ------------------------------------------------------------------ items
    def context_sentences(self, index: int) -> List[torch.Tensor]:
        return [self.pool[j] for j in self.context_index[index] if j >= 0]

    def __getitem__(self, index):
        return self.input_mode.item(self, index, self.pair[index])

    def __len__(self):
        return len(self.pair)

    def collater(self, samples, pad_to_length=None):
        batch = self.input_mode.collate(self, samples, self.pair.collater(samples, pad_to_length=pad_to_length))
        if self.on_collate is not None:
            self.on_collate(batch)
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
    src = property(lambda self: self.pair.src)
    tgt = property(lambda self: self.pair.tgt)
    src_dict = property(lambda self: self.pair.src_dict)
    tgt_dict = property(lambda self: self.pair.tgt_dict)
    left_pad_source = property(lambda self: self.pair.left_pad_source)

    def set_epoch(self, epoch):
        self.pair.set_epoch(epoch)
