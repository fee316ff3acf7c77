"""How document context reaches a model: decided here, once, for the task,
the hub and the contrastive scorer.

A sentence's context reaches a model in one of three ways
(:data:`INPUT_MODES`):

* ``concat``: glued to the source with the separator symbol
  (``--concat-context``; any architecture: the concatenation baseline);
* ``separate``: as ``net_input["ctx_tokens"]`` (B x T_ctx, padded like the
  source) and ``["ctx_lengths"]`` (B), for an architecture whose model class
  says ``accepts_context = True``;
* ``none``: not at all (any other architecture, and every task without
  document context, e.g. ``--task translation``): the sentence alone.

The choice depends on the task's flags *and* on the model, so it is made by
:func:`input_mode` when the model is known; until then a document dataset
carries the context separately (the task switches its datasets when it
builds a model).  Everything that builds a dataset of sentences given in
memory (fairseq-interactive's buffers, the hub, the scorer, tests) goes
through :func:`sentence_dataset`, which also reads explicit per-sentence
contexts (:func:`~fairseq_ctx.data.document_context_dataset.explicit_index`).
"""
from typing import Optional, Sequence

import numpy as np
import torch
from fairseq.data import LanguagePairDataset

from fairseq_ctx.data.document_context_dataset import INPUT_MODES, DocumentContextDataset, explicit_index
from fairseq_ctx.errors import ConfigError

__all__ = ["INPUT_MODES", "CONTEXT_KEYS", "accepts_context", "input_mode", "without_context", "sentence_dataset"]

# the net_input keys of a separate context
CONTEXT_KEYS = ("ctx_tokens", "ctx_lengths")


def unwrap_model(model):
    """The model inside fairseq's wrappers (DDP, ``BaseFairseqModel.module``)."""
    while hasattr(model, "module") and not hasattr(model, "encoder"):
        model = model.module
    return model


def accepts_context(model) -> bool:
    """True for an architecture that reads ``ctx_tokens`` (its model class
    sets ``accepts_context = True``)."""
    return bool(getattr(unwrap_model(model), "accepts_context", False))


def input_mode(task_cfg, models: Sequence = ()) -> str:
    """How the context reaches ``models`` (one of :data:`INPUT_MODES`) under
    a task with configuration ``task_cfg``: ``concat`` with
    ``--concat-context``; else ``separate`` when the models accept context
    (also while no model is known yet), ``none`` when they do not, or when
    the task has no document context (no ``concat_context`` flag).  An
    ensemble that mixes context-aware and sentence-level models stops."""
    concat = getattr(task_cfg, "concat_context", None)
    if concat is None:
        return "none"
    if concat:
        return "concat"
    flags = [accepts_context(m) for m in models]
    if any(flags) and not all(flags):
        raise ConfigError("cannot ensemble context-aware and sentence-level models")
    return "none" if flags and not flags[0] else "separate"


def without_context(sample: dict) -> dict:
    """``sample`` with the separate-context keys dropped from its net_input
    (the same dict when it has none)."""
    net_input = sample["net_input"]
    if not any(k in net_input for k in CONTEXT_KEYS):
        return sample
    return dict(sample, net_input={k: v for k, v in net_input.items() if k not in CONTEXT_KEYS})


def _sizes(tokens: Sequence[torch.Tensor]) -> np.ndarray:
    return np.array([len(t) for t in tokens], dtype=np.int64)


def sentence_dataset(task, sources: Sequence[torch.Tensor], mode: str,
                     context_index: Optional[np.ndarray] = None, pool: Sequence[torch.Tensor] = (),
                     contexts: Optional[Sequence[Sequence[torch.Tensor]]] = None,
                     targets: Optional[Sequence[torch.Tensor]] = None,
                     target_contexts: Optional[Sequence[Sequence[torch.Tensor]]] = None,
                     shuffle: bool = False, constraints=None, **kwargs) -> DocumentContextDataset:
    """A :class:`DocumentContextDataset` of sentences in memory, built with
    ``task``'s dictionaries, separators, padding sides and position limits.

    ``sources[i]`` (and ``targets[i]``): token tensors with EOS.  The
    context of item ``i`` is either ``pool[j]`` for ``j`` in
    ``context_index[i]`` (``-1`` skipped), or ``contexts[i]``, a list of
    token tensors oldest first (EOS optional); neither: none.
    ``target_contexts[i]``: the previous target sentences glued before
    ``targets[i]`` (2-to-2 scoring: needs ``--target-context``).  ``mode``:
    how the context reaches the model (:func:`input_mode`).  ``shuffle``
    and ``constraints`` go to the sentences' ``LanguagePairDataset``, the
    other keyword arguments (``skip``, ``rounds``, ``translations``) to
    the dataset."""
    cfg = task.cfg
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
        if not getattr(cfg, "target_context", False) or targets is None:
            raise ConfigError("target contexts need targets and a task with --concat-context --target-context")
        if len(target_contexts) != len(sources):
            raise ValueError(f"{len(target_contexts)} target contexts for {len(sources)} sentences")
        t_index, t_pool = explicit_index(target_contexts)
        kwargs.update(target_pool=t_pool, target_pool_sizes=_eos_sizes(t_pool, task.target_dictionary.eos()),
                      target_index=t_index, target_sep=task.tgt_sep, max_target_tokens=cfg.max_target_positions)
    pair = LanguagePairDataset(
        sources, _sizes(sources), task.source_dictionary,
        list(targets) if targets is not None else None, _sizes(targets) if targets is not None else None,
        task.target_dictionary, left_pad_source=cfg.left_pad_source, left_pad_target=cfg.left_pad_target,
        shuffle=shuffle, constraints=constraints)
    return DocumentContextDataset(pair, context_index, pool, _eos_sizes(pool, task.source_dictionary.eos()),
                                  task.sep, input_mode=mode, max_context_tokens=cfg.max_source_positions, **kwargs)


def _eos_sizes(tokens: Sequence[torch.Tensor], eos: int) -> np.ndarray:
    """Lengths with EOS counted (added where a sentence lacks it)."""
    return np.array([len(t) + (0 if len(t) and t[-1] == eos else 1) for t in tokens], dtype=np.int64)
