"""How document context reaches a model: decided here, once, for the task,
the hub and the contrastive scorer, and carried out by the mode it decides.

A sentence's context reaches a model in one of three ways (one object
each, in :data:`INPUT_MODES` with the fourth below):

* ``concat`` (:data:`CONCAT`): glued to the source with the separator symbol
  (``--concat-context``; any architecture: the concatenation baseline);
* ``separate`` (:data:`SEPARATE`): as ``net_input["ctx_tokens"]`` (B x T_ctx,
  padded like the source) and ``["ctx_lengths"]`` (B), for an architecture
  whose model class says ``accepts_context = True``;
* ``none`` (:data:`NONE`): not at all (any other architecture, and every
  task without document context, e.g. ``--task translation``): the sentence
  alone.

A fourth mode carries ``separate`` where a batch keeps only the source:
fairseq-interactive's batches keep ``src_tokens`` and ``src_lengths``, so
``separate-glued`` (:data:`GLUED`, ``SEPARATE.stream``) glues the context
to the source for the journey, laid out as ``concat`` lays it out, and the
model's input splits it off again (:meth:`InputMode.model_input`).  It is
``separate`` in everything else: the context is cut to the limit on its
own and batching counts the sentence alone, so fairseq-interactive gives a
separate-context model what fairseq-generate gives it.

The choice depends on the task's flags *and* on the model, so it is made by
:func:`input_mode` when the model is known; until then a document dataset
carries the context separately (the task switches its datasets when it
builds a model).  What differs between the modes (a dataset item's tokens,
a batch's keys, the sizes batching counts, which contexts a length cap cuts,
the ``net_input`` a model gets, the layout fairseq-interactive's batches
carry) is a method of the mode object, so no caller compares mode names.
A mode is a ``str`` (its name) so that it prints, compares and is stored in
reports and configurations as the name it has always had.
"""
from typing import Callable, Dict, Optional, Sequence

import numpy as np
import torch
from fairseq.data import data_utils

from fairseq_ctx.data.token_layout import build_context_tokens, concat_context_source, glue_context
from fairseq_ctx.errors import ConfigError

__all__ = ["INPUT_MODES", "SEPARATE", "GLUED", "CONCAT", "NONE", "InputMode", "CONTEXT_KEYS", "accepts_context",
           "input_mode", "without_context"]

# the net_input keys of a separate context
CONTEXT_KEYS = ("ctx_tokens", "ctx_lengths")


def without_context(sample: dict) -> dict:
    """``sample`` with the separate-context keys dropped from its net_input
    (the same dict when it has none)."""
    net_input = sample["net_input"]
    if not any(k in net_input for k in CONTEXT_KEYS):
        return sample
    return dict(sample, net_input={k: v for k, v in net_input.items() if k not in CONTEXT_KEYS})


class InputMode(str):
    """How the context reaches the model; the base is ``none``'s behaviour
    (the sentence alone), which the other modes extend.  ``ds`` below is
    the :class:`~fairseq_ctx.data.document_context_dataset.DocumentContextDataset`
    whose item or batch is being made."""

    label = "none"
    # whether the model sees any context at all
    uses_context = False
    # the mode fairseq-interactive's buffers use: its batches keep only
    # src_tokens/src_lengths, so a context that reaches the model must be glued
    stream: "InputMode"
    # what a length cap counts, for the warning that names it
    cap_note = ""
    # how the context reaches the model, in the reports' words
    meaning = "ignored (sentence-level model)"

    def __new__(cls):
        return super().__new__(cls, cls.label)

    def __reduce__(self):
        # pickled (dataloader workers, deepcopy) as its name: back to the one object
        return mode_named, (self.label,)

    def source_sizes(self, src_sizes: np.ndarray, context_lengths: np.ndarray, cap: Optional[int]) -> np.ndarray:
        """Source lengths batching counts (``--max-tokens``): the sentences'."""
        return src_sizes

    def cut(self, src_sizes: np.ndarray, context_lengths: np.ndarray, limit: int) -> np.ndarray:
        """Which items' context a cap of ``limit`` tokens shortens: none."""
        return np.zeros(len(src_sizes), dtype=bool)

    def item(self, ds, index: int, sample: dict) -> dict:
        """Item ``index`` of ``ds`` from its sentence pair's ``sample``: as it is."""
        return sample

    def collate(self, ds, samples, batch: dict) -> dict:
        """The batch of ``samples`` (``batch``: the sentence pairs' collated)."""
        return batch

    def model_input(self, sample: dict, unglue: Optional[Callable[[dict], dict]] = None) -> dict:
        """``sample`` with the ``net_input`` a model under this mode takes:
        without the separate-context keys."""
        return without_context(sample)


class _None(InputMode):
    label = "none"


class _Concat(InputMode):
    label = "concat"
    meaning = "concatenated to the source"
    uses_context = True
    cap_note = ", counting the sentence itself with --concat-context"

    def source_sizes(self, src_sizes, context_lengths, cap):
        # each context sentence contributes its tokens minus EOS plus one <sep>
        sizes = src_sizes + context_lengths
        return np.minimum(sizes, np.maximum(cap, src_sizes)) if cap is not None else sizes

    def cut(self, src_sizes, context_lengths, limit):
        return (context_lengths > 0) & (src_sizes + context_lengths > limit)

    def item(self, ds, index, sample):
        sample["source"] = concat_context_source(ds.context_sentences(index), sample["source"], ds.eos, ds.sep,
                                                 ds.max_context_tokens)
        if ds.target_pool is not None and sample.get("target") is not None:
            previous = [ds.target_pool[j] for j in ds.target_index[index] if j >= 0]
            sample["target"] = concat_context_source(previous, sample["target"], ds.pair.tgt_dict.eos(),
                                                     ds.target_sep, ds.max_target_tokens)
        return sample


class _Separate(InputMode):
    label = "separate"
    meaning = "separate input"
    uses_context = True

    def cut(self, src_sizes, context_lengths, limit):
        return context_lengths > limit

    def item(self, ds, index, sample):
        sample["context"] = build_context_tokens(ds.context_sentences(index), ds.eos, ds.sep, ds.max_context_tokens)
        return sample

    def collate(self, ds, samples, batch):
        if not batch:
            return batch
        # the pair collater sorts the batch by source length: follow its order
        by_id = {s["id"]: s["context"] for s in samples}
        context = [by_id[i] for i in batch["id"].tolist()]
        batch["net_input"]["ctx_tokens"] = data_utils.collate_tokens(
            context, ds.pad, ds.eos, left_pad=ds.pair.left_pad_source, pad_to_multiple=ds.pair.pad_to_multiple)
        batch["net_input"]["ctx_lengths"] = torch.tensor([len(c) for c in context], dtype=torch.long)
        return batch

    def model_input(self, sample, unglue=None):
        # a glued fairseq-interactive batch (see ``stream``) is split again
        if unglue is not None and "ctx_tokens" not in sample["net_input"]:
            return unglue(sample)
        return sample


class _Glued(_Separate):
    label = "separate-glued"

    def item(self, ds, index, sample):
        # the separate context as cut on its own, glued where concat glues it
        context = build_context_tokens(ds.context_sentences(index), ds.eos, ds.sep, ds.max_context_tokens)
        sample["source"] = glue_context(context, sample["source"], ds.eos, ds.sep)
        return sample

    def collate(self, ds, samples, batch):
        return batch


NONE, CONCAT, SEPARATE, GLUED = _None(), _Concat(), _Separate(), _Glued()
NONE.stream, CONCAT.stream, SEPARATE.stream, GLUED.stream = NONE, CONCAT, GLUED, GLUED

# every mode by its name (a dataset may be given the name)
INPUT_MODES: Dict[str, InputMode] = {m: m for m in (SEPARATE, CONCAT, NONE, GLUED)}


def mode_named(mode) -> InputMode:
    """The mode object of ``mode`` (a mode or its name); unknown: ValueError."""
    try:
        return INPUT_MODES[mode]
    except KeyError:
        raise ValueError(f"input_mode must be one of {tuple(INPUT_MODES)}, got {mode!r}") from None


def unwrap_model(model):
    """The model inside fairseq's wrappers (DDP, ``BaseFairseqModel.module``)."""
    while hasattr(model, "module") and not hasattr(model, "encoder"):
        model = model.module
    return model


def accepts_context(model) -> bool:
    """True for an architecture that reads ``ctx_tokens`` (its model class
    sets ``accepts_context = True``)."""
    return bool(getattr(unwrap_model(model), "accepts_context", False))


def input_mode(task_cfg, models: Sequence = ()) -> InputMode:
    """How the context reaches ``models`` (``separate``, ``concat`` or ``none``) under
    a task with configuration ``task_cfg``: ``concat`` with
    ``--concat-context``; else ``separate`` when the models accept context
    (also while no model is known yet), ``none`` when they do not, or when
    the task has no document context (no ``concat_context`` flag).  An
    ensemble that mixes context-aware and sentence-level models stops."""
    concat = getattr(task_cfg, "concat_context", None)
    if concat is None:
        return NONE
    if concat:
        return CONCAT
    flags = [accepts_context(m) for m in models]
    if any(flags) and not all(flags):
        raise ConfigError("cannot ensemble context-aware and sentence-level models")
    return NONE if flags and not flags[0] else SEPARATE
