"""Datasets of sentences given in memory (fairseq-interactive's buffers, the
hub, the contrastive scorer, tests): :func:`sentence_dataset` builds a
:class:`~fairseq_ctx.data.document_context_dataset.DocumentContextDataset`
from token tensors, with a context index into a pool or explicit
per-sentence contexts (:func:`~fairseq_ctx.data.context_selection.explicit_index`).

What such a dataset is built with (dictionaries, separators, padding sides,
position limits, whether the target carries context) is a
:class:`SentenceSetup` that the document task hands out
(``DocumentTranslationTask.sentence_setup``): the data layer takes these
values, never the task.
"""
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import torch
from fairseq.data import Dictionary, LanguagePairDataset

from fairseq_ctx.data.context_selection import explicit_index
from fairseq_ctx.data.document_context_dataset import DocumentContextDataset
from fairseq_ctx.errors import ConfigError


@dataclass(frozen=True)
class SentenceSetup:
    """The values a dataset of sentences is built with: the dictionaries and
    the separator's index in each (``sep``, ``tgt_sep``), the padding sides
    (``--left-pad-source``/``-target``), the position limits (the context is
    capped at ``max_source_positions``, a glued target at
    ``max_target_positions``) and ``target_context`` (``--target-context``:
    the target is glued to the previous target sentences)."""

    src_dict: Dictionary
    tgt_dict: Dictionary
    sep: int
    tgt_sep: int
    left_pad_source: bool
    left_pad_target: bool
    max_source_positions: Optional[int]
    max_target_positions: Optional[int]
    target_context: bool = False


def _sizes(tokens: Sequence[torch.Tensor]) -> np.ndarray:
    return np.array([len(t) for t in tokens], dtype=np.int64)


def eos_sizes(tokens: Sequence[torch.Tensor], eos: int) -> np.ndarray:
    """Lengths with EOS counted (added where a sentence lacks it)."""
    return np.array([len(t) + (0 if len(t) and t[-1] == eos else 1) for t in tokens], dtype=np.int64)


def sentence_dataset(setup: SentenceSetup, sources: Sequence[torch.Tensor], mode,
                     context_index: Optional[np.ndarray] = None, pool: Sequence[torch.Tensor] = (),
                     contexts: Optional[Sequence[Sequence[torch.Tensor]]] = None,
                     targets: Optional[Sequence[torch.Tensor]] = None,
                     target_contexts: Optional[Sequence[Sequence[torch.Tensor]]] = None,
                     shuffle: bool = False, constraints=None, **kwargs) -> DocumentContextDataset:
    """A :class:`DocumentContextDataset` of sentences in memory, built as
    ``setup`` says.

    ``sources[i]`` (and ``targets[i]``): token tensors with EOS.  The
    context of item ``i`` is either ``pool[j]`` for ``j`` in
    ``context_index[i]`` (``-1`` skipped), or ``contexts[i]``, a list of
    token tensors oldest first (EOS optional); neither: none.
    ``target_contexts[i]``: the previous target sentences glued before
    ``targets[i]`` (2-to-2 scoring: needs ``setup.target_context``).
    ``mode``: how the context reaches the model
    (:func:`~fairseq_ctx.data.context_input.input_mode`).  ``shuffle`` and
    ``constraints`` go to the sentences' ``LanguagePairDataset``, the other
    keyword arguments (``skip``, ``rounds``, ``translations``,
    ``on_collate``) to the dataset."""
    sources = list(sources)
    if contexts is not None:
        if context_index is not None:
            raise ValueError("give contexts or a context index, not both")
        if len(contexts) != len(sources):
            raise ValueError(f"{len(contexts)} contexts for {len(sources)} sentences")
        context_index, pool = explicit_index(contexts)
    elif context_index is None:
        context_index = np.zeros((len(sources), 0), dtype=np.int64)
    pool = list(pool)
    if target_contexts is not None:
        if not setup.target_context or targets is None:
            raise ConfigError("target contexts need targets and a task with --concat-context --target-context")
        if len(target_contexts) != len(sources):
            raise ValueError(f"{len(target_contexts)} target contexts for {len(sources)} sentences")
        t_index, t_pool = explicit_index(target_contexts)
        kwargs.update(target_pool=t_pool, target_pool_sizes=eos_sizes(t_pool, setup.tgt_dict.eos()),
                      target_index=t_index, target_sep=setup.tgt_sep,
                      max_target_tokens=setup.max_target_positions)
    pair = LanguagePairDataset(
        sources, _sizes(sources), setup.src_dict,
        list(targets) if targets is not None else None, _sizes(targets) if targets is not None else None,
        setup.tgt_dict, left_pad_source=setup.left_pad_source, left_pad_target=setup.left_pad_target,
        shuffle=shuffle, constraints=constraints)
    return DocumentContextDataset(pair, context_index, pool, eos_sizes(pool, setup.src_dict.eos()), setup.sep,
                                  input_mode=mode, max_context_tokens=setup.max_source_positions, **kwargs)
