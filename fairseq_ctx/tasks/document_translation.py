"""``--task document_translation``: translation with document context
(Voita et al., ACL 2018, "Context-Aware Neural Machine Translation Learns
Anaphora Resolution").

Data: the usual ``fairseq-preprocess`` output plus one document id per line of
every split, in ``{split}.{src}-{tgt}.docids`` beside the ``.bin``/``.idx``
files (``{split}.{tgt}-{src}.docids`` is also accepted).  A document is a run
of consecutive lines with the same id.  A missing docids file, a docids file
whose line count differs from the data, and ``--context-size < 0`` fail when
the split is loaded, with a message naming the file or flag.

Explicit context instead of documents: when ``{split}.{src}-{tgt}.context.{src}``
(``.bin``/``.idx``, binarized with the source dictionary) lies beside a split,
line ``i`` of it is sentence ``i``'s context (an empty line: none) and no
docids are read (Voita et al. 2018's release, whose ``.en.context`` gives
each instance its previous sentence; ``scripts/prepare-opensubtitles-en-ru.sh``
writes it).  ``previous`` (``--context-size`` 0 or 1), ``random`` and
``--shuffle-context`` work on it; ``next``, a larger size and
``--target-context`` need documents and stop with one line naming the file.

Context of sentence ``i`` (see ``fairseq_ctx.data.document_context_dataset``):
``--context-mode previous`` (default) the ``--context-size`` (default 1)
preceding source sentences of its document, empty at a document start;
``next`` the following ones; ``random`` random sentences of the split (seeded
by ``--context-seed``).  ``--shuffle-context`` hands every sentence the
context of another sentence of the split (the paper's check that the model
uses its context; meant for evaluation).

How the model gets it:

* context-aware architectures (model class attribute ``accepts_context``,
  e.g. ``--arch transformer_ctxenc``): ``net_input`` carries ``ctx_tokens``
  (B x T_ctx, padded like the source) and ``ctx_lengths``;
* ``--concat-context``: the context is glued to the source with a separator
  symbol, for any architecture (the paper's concatenation row with
  ``--arch transformer``);
* ``--concat-context --target-context``: the 2-to-2 concatenation baseline
  (Tiedemann and Scherrer 2017): the previous ``--context-size`` *target*
  sentences of the document are glued to the target with the separator
  too, so the model is trained to produce ``t_prev <sep> t``; its loss and
  ``--max-tokens`` count the whole concatenation.  ``fairseq-generate`` (and
  every ``inference_step``) keeps only what follows the last separator of a
  hypothesis, and compares it with the reference sentence alone (the
  reference's context is cut off the same way), so there is one output
  sentence per input sentence.  The model generates the previous sentence
  itself there (as Tiedemann and Scherrer decode); a scorer that has the
  previous translations forces them as the decoder's prefix instead
  (``build_context_dataset(..., target_contexts=...)``, used by
  ``fairseq_ctx.contrastive``), and ``fairseq-ctx-translate``,
  ``fairseq_ctx.hub`` and ``fairseq-interactive`` force the model's own
  previous translations (``PreviousTranslations`` in
  ``fairseq_ctx.data.document_context_dataset``), decoding round by round;
* any other architecture translates sentence by sentence (the context keys
  are dropped before the model sees the batch), so a baseline runs with the
  same data and flags.

The separator symbol (``--context-separator``, default ``<sep>``) is added
with ``Dictionary.add_symbol`` to the source *and* target dictionaries when
the task is set up, every time and in every mode, so joined dictionaries stay
equal (``--share-all-embeddings`` keeps working), and any checkpoint trained
with this task has the same vocabulary size whatever the mode.  (It also
means a checkpoint trained with plain ``--task translation`` has one
embedding row fewer and must be evaluated with its own task.)

Outside training every sentence is batched: ``--required-batch-size-multiple``
applies to the training split only (:meth:`DocumentTranslationTask.get_batch_iterator`),
so ``fairseq-generate``/``-validate`` need no extra flag to translate them all.

The task flags are not read back from the checkpoint: pass the same
``--task document_translation --context-size ... [--concat-context]`` to
``fairseq-generate``/``-interactive``/``-validate`` as to training.

``fairseq-interactive``: each input line is translated with the preceding
lines of its document as context; an empty line starts a new document and is
not translated (it gets no ``H-`` line; ids keep counting input lines).  The
task remembers the last ``--context-size`` lines of the current document
between calls of ``build_dataset_for_inference``, i.e. across
``--buffer-size`` buffers, and the context is source text only, so the output
does not depend on ``--buffer-size`` or ``--batch-size``.  Only ``previous``
context exists there (no ``next``/``random``/``--shuffle-context``).  Because
fairseq-interactive keeps only ``src_tokens``/``src_lengths`` of a batch, the
context travels glued to the source (``S-`` lines show ``context <sep>
source``) and ``inference_step`` splits it off again for context-aware
models; a literal separator or ``</s>`` typed in an input line is read as
``<unk>``.  With ``--target-context`` the target context is the
translations of those lines: the buffer's dataset batches its lines round by
round (a line's position in its document), ``inference_step`` forces each
row's previous translations as the decoder's prefix and records the best
hypotheses (the rows of a fairseq-interactive batch, which carries no ids,
are those of the batch the dataset collated last), and the translations of
the remembered lines carry over to the next buffer.

For scorers (contrastive evaluation): :meth:`DocumentTranslationTask.build_context_dataset`
builds batches from explicit (context sentences, source, target) token lists,
and :meth:`DocumentTranslationTask.model_input` gives the ``net_input`` a given
model accepts.
"""
import logging
import os
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

import numpy as np
import torch

from fairseq import utils
from fairseq.data import LanguagePairDataset, data_utils, indexed_dataset
from fairseq.dataclass import ChoiceEnum
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask

from fairseq_ctx.data.document_context_dataset import (
    DocumentContextDataset,
    PreviousTranslations,
    compute_context_index,
    derange,
    document_positions,
    generator_max_len,
    split_concatenated,
)
from fairseq_ctx.errors import ConfigError, DataError, MissingFileError
from fairseq_ctx.modules.ctxenc_state_cache import SharedStateCache

logger = logging.getLogger(__name__)

CONTEXT_KEYS = ("ctx_tokens", "ctx_lengths")


@dataclass
class DocumentTranslationConfig(TranslationConfig):
    context_size: int = field(default=1, metadata={
        "help": "number of context sentences per sentence (0 = none)"})
    context_mode: ChoiceEnum(["previous", "next", "random"]) = field(default="previous", metadata={
        "help": "which sentences form the context: the preceding ones of the same document, "
                "the following ones, or random sentences of the split (control)"})
    shuffle_context: bool = field(default=False, metadata={
        "help": "give every sentence the context of another sentence (evaluation control)"})
    concat_context: bool = field(default=False, metadata={
        "help": "glue the context to the source with the separator symbol "
                "(concatenation baseline, any architecture)"})
    context_separator: str = field(default="<sep>", metadata={
        "help": "separator symbol added to the dictionaries"})
    target_context: bool = field(default=False, metadata={
        "help": "with --concat-context: glue the previous target sentences to the target as well "
                "(2-to-2 concatenation); outputs keep the last sentence only"})
    context_seed: int = field(default=1, metadata={
        "help": "seed of --context-mode random and --shuffle-context"})
    reuse_sentence_states: bool = field(default=False, metadata={
        "help": "decoding (fairseq-generate, -interactive): transformer_ctxenc runs each sentence through "
                "its shared encoder layers once per run, as a source or as a context, whichever comes "
                "first (same translations, less encoder work); other models are unaffected"})


def unwrap_model(model):
    while hasattr(model, "module") and not hasattr(model, "encoder"):
        model = model.module
    return model


def accepts_context(model) -> bool:
    return bool(getattr(unwrap_model(model), "accepts_context", False))


def _cap_context(dataset: DocumentContextDataset, limit: int):
    """Cap ``dataset``'s context (or glued source) at ``limit`` tokens and warn
    about the contexts that lose their oldest tokens to the cap."""
    if dataset.input_mode == "none":
        return
    if dataset.max_context_tokens is None or dataset.max_context_tokens > limit:
        dataset.max_context_tokens = limit
        dataset._compute_sizes()
    index, pool_sizes = dataset.context_index, dataset.pool_sizes
    if index.size == 0 or len(pool_sizes) == 0:
        return
    lengths = np.where(index >= 0, pool_sizes[np.clip(index, 0, None)], 0).sum(axis=1)
    if dataset.input_mode == "concat":
        cut = (lengths > 0) & (np.asarray(dataset.pair.src_sizes) + lengths > limit)
    else:
        cut = lengths > limit
    if dataset.skip is not None:
        cut &= ~dataset.skip
    if cut.any():
        logger.warning(f"{int(cut.sum())} of {len(dataset)} sentences have a context longer than the model's "
                       f"source limit of {limit} tokens (--max-source-positions"
                       f"{', counting the sentence itself with --concat-context' if dataset.input_mode == 'concat' else ''}"
                       "): its oldest tokens are dropped")


@register_task("document_translation", dataclass=DocumentTranslationConfig)
class DocumentTranslationTask(TranslationTask):
    """Translation with the context of surrounding sentences (see module docstring)."""

    cfg: DocumentTranslationConfig

    def __init__(self, cfg: DocumentTranslationConfig, src_dict, tgt_dict):
        super().__init__(cfg, src_dict, tgt_dict)
        # appended to both, so dictionaries read from equal files stay equal
        self.sep = src_dict.add_symbol(cfg.context_separator)
        self.tgt_sep = tgt_dict.add_symbol(cfg.context_separator)
        # set by build_model; None until a model is known
        self.model_accepts_context: Optional[bool] = None
        self._history: List[torch.Tensor] = []
        # --target-context, interactive: the previous buffer's PreviousTranslations
        # and the pool positions of self._history in it (their translations)
        self._target_tail: Optional[tuple] = None
        self._inference_dataset: Optional[DocumentContextDataset] = None
        self._packed_inference = False

    @classmethod
    def setup_task(cls, cfg: DocumentTranslationConfig, **kwargs):
        if cfg.context_size < 0:
            raise ConfigError(f"--context-size must be >= 0, got {cfg.context_size}")
        if getattr(cfg, "target_context", False) and not cfg.concat_context:
            raise ConfigError("--target-context needs --concat-context (the 2-to-2 baseline glues the "
                              "context to both sides)")
        if getattr(cfg, "num_batch_buckets", 0):
            raise ConfigError("--num-batch-buckets: not supported with --task document_translation (the context "
                              "is glued from and sized by unpadded sentences); leave it at 0")
        return super().setup_task(cfg, **kwargs)

    # ---------------------------------------------------------------- data
    def _input_mode(self) -> str:
        if self.cfg.concat_context:
            return "concat"
        return "none" if self.model_accepts_context is False else "separate"

    def docids_path(self, data_path: str, split: str) -> str:
        src, tgt = self.cfg.source_lang, self.cfg.target_lang
        candidates = [os.path.join(data_path, f"{split}.{a}-{b}.docids") for a, b in ((src, tgt), (tgt, src))]
        for path in candidates:
            if os.path.exists(path):
                return path
        raise MissingFileError(
            f"document_translation: no document ids for split '{split}': expected {candidates[0]} "
            "(one document id per line of the split, beside the binarized data)")

    @staticmethod
    def read_docids(path: str, num_lines: int) -> np.ndarray:
        # split on "\n" only, like the binarizer counts lines (str.splitlines
        # would also split on \x0b, \u2028, ...)
        with open(path, encoding="utf-8", newline="") as f:
            docids = [line.rstrip("\r") for line in f.read().split("\n")]
        if docids and docids[-1] == "":
            docids.pop()
        if len(docids) != num_lines:
            raise DataError(
                f"document_translation: {path} has {len(docids)} lines but the split has "
                f"{num_lines} sentences; the docids file must have one line per sentence")
        return np.array(docids)

    def explicit_context_prefix(self, data_path: str, split: str) -> Optional[str]:
        """``{split}.{src}-{tgt}.context.{src}`` (``.bin``/``.idx``; the pair may be
        reversed) when it exists: the context sentence of every line, binarized
        with the source dictionary (Voita et al. 2018's ``.en.context``, written
        by ``scripts/prepare-opensubtitles-en-ru.sh``). It takes the place of
        docids for the split."""
        src, tgt = self.cfg.source_lang, self.cfg.target_lang
        for a, b in ((src, tgt), (tgt, src)):
            prefix = os.path.join(data_path, f"{split}.{a}-{b}.context.{src}")
            if indexed_dataset.dataset_exists(prefix, impl="mmap"):
                return prefix
        return None

    def _explicit_context(self, prefix: str, pair):
        """(context index, pool, pool sizes) from an explicit context file: line
        ``i``'s context is line ``i`` of the file (none where it is empty)."""
        n = len(pair)
        ctx = data_utils.load_indexed_dataset(prefix, self.source_dictionary, dataset_impl="mmap")
        if ctx is None or len(ctx) != n:
            raise DataError(f"document_translation: {prefix}.idx has {0 if ctx is None else len(ctx)} lines but "
                            f"the split has {n} sentences; the context file must have one line per sentence")
        size, mode = self.cfg.context_size, self.cfg.context_mode
        if mode == "next":
            raise ConfigError(f"--context-mode next needs documents (docids): {prefix} holds only each sentence's "
                              "previous sentence (use the 2019 release: prepare-opensubtitles-en-ru.sh --release 2019)")
        if mode == "random":   # random sentences of the split, as with docids
            index = compute_context_index(np.arange(n), size, "random", seed=self.cfg.context_seed,
                                          shuffle=self.cfg.shuffle_context)
            return index, pair.src, pair.src_sizes
        if size > 1:
            raise ConfigError(f"--context-size {size}: {prefix} holds one context sentence per line")
        present = np.asarray(ctx.sizes) > 1   # an empty line is binarized as </s> alone
        index = np.where(present, np.arange(n), -1)[:, None][:, :size]
        if self.cfg.shuffle_context:   # as compute_context_index shuffles
            index = derange(index, np.random.default_rng(self.cfg.context_seed))
        return index.astype(np.int64), ctx, ctx.sizes

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        paths = utils.split_paths(self.cfg.data)
        if split != self.cfg.train_subset:
            paths = paths[:1]
        data_path = paths[(epoch - 1) % len(paths)]
        ctx_prefix = self.explicit_context_prefix(data_path, split)
        if ctx_prefix is not None and self.glues_target_context:
            raise ConfigError(f"--target-context needs the previous target sentences, which {ctx_prefix} (source "
                              "side only) does not have")
        docids_file = None if ctx_prefix else self.docids_path(data_path, split)
        super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)
        pair = self.datasets[split]
        if ctx_prefix is not None:
            index, pool, pool_sizes = self._explicit_context(ctx_prefix, pair)
            source = f"explicit context {os.path.basename(ctx_prefix)}"
        else:
            docids = self.read_docids(docids_file, len(pair))
            index = compute_context_index(docids, self.cfg.context_size, self.cfg.context_mode,
                                          seed=self.cfg.context_seed, shuffle=self.cfg.shuffle_context)
            pool, pool_sizes = pair.src, pair.src_sizes
            source = f"{len(set(docids.tolist()))} documents"
        self.datasets[split] = DocumentContextDataset(
            pair, index, pool, pool_sizes, self.sep, input_mode=self._input_mode(),
            max_context_tokens=self.cfg.max_source_positions, **self._target_context_args(pair))
        if split == self.cfg.train_subset and combine:
            # fairseq-train loads its training split with combine=True; only
            # that split keeps --required-batch-size-multiple (get_batch_iterator)
            self._training_dataset = self.datasets[split]
        logger.info(f"{split}: {len(pair)} sentences, {source}, "
                    f"context {self.cfg.context_mode} x{self.cfg.context_size}"
                    f"{' shuffled' if self.cfg.shuffle_context else ''}, input {self._input_mode()}")

    def get_batch_iterator(self, dataset, max_tokens=None, max_sentences=None, max_positions=None,
                           ignore_invalid_inputs=False, required_batch_size_multiple=1, **kwargs):
        """fairseq's iterator, with ``--required-batch-size-multiple`` applied to
        the training split only: fairseq 0.12 drops the last batch when its
        size is not a multiple (``data_utils.batch_by_size``; fairseq #5036),
        which in generate/validate/interactive silently loses up to N-1
        sentences (552 of 553 translated with the default of 8).  Every other
        dataset (validation, test, inference) is batched with multiple 1."""
        if required_batch_size_multiple > 1 and dataset is not getattr(self, "_training_dataset", None):
            logger.info(f"document_translation: --required-batch-size-multiple {required_batch_size_multiple} "
                        "applies to the training split only; batching this one with 1 so that no "
                        "sentence is dropped")
            required_batch_size_multiple = 1
        return super().get_batch_iterator(dataset, max_tokens, max_sentences, max_positions, ignore_invalid_inputs,
                                          required_batch_size_multiple, **kwargs)

    @property
    def glues_target_context(self) -> bool:
        # getattr: the configuration of a checkpoint saved before the flag existed lacks it
        return bool(getattr(self.cfg, "target_context", False))

    def _target_context_args(self, pair) -> dict:
        """DocumentContextDataset arguments of the glued target context (none
        without --target-context, or for data without targets)."""
        if not self.glues_target_context or pair.tgt is None:
            return {}
        return dict(target_pool=pair.tgt, target_pool_sizes=pair.tgt_sizes, target_sep=self.tgt_sep,
                    max_target_tokens=self.cfg.max_target_positions)

    def build_context_dataset(self, sources: Sequence[torch.Tensor], contexts: Sequence[Sequence[torch.Tensor]],
                              targets: Optional[Sequence[torch.Tensor]] = None, model=None,
                              target_contexts: Optional[Sequence[Sequence[torch.Tensor]]] = None):
        """Dataset of explicitly given examples, for scorers and tests.

        ``sources[i]``/``targets[i]``: token tensors (with EOS, as from
        ``Dictionary.encode_line``); ``contexts[i]``: list of context sentence
        token tensors, oldest first (may be empty); ``target_contexts[i]``
        likewise the previous target sentences, glued before ``targets[i]``
        (a forced decoder prefix; only with ``--target-context``).  The context reaches
        ``model`` (default: the last model built) the way this task's flags
        say; use ``dataset.collater([dataset[i] for i in ids])`` for a batch
        and :meth:`model_input` for the keys the model takes."""
        mode = self._input_mode() if model is None else (
            "concat" if self.cfg.concat_context else "separate" if accepts_context(model) else "none")
        pair = LanguagePairDataset(
            list(sources), np.array([len(s) for s in sources]), self.source_dictionary,
            list(targets) if targets is not None else None,
            np.array([len(t) for t in targets]) if targets is not None else None,
            self.target_dictionary, left_pad_source=self.cfg.left_pad_source,
            left_pad_target=self.cfg.left_pad_target, shuffle=False)
        target = {}
        if target_contexts is not None:
            if not self.glues_target_context or targets is None:
                raise ConfigError("target contexts need targets and a task with --concat-context --target-context")
            target = dict(target_contexts=target_contexts, target_sep=self.tgt_sep,
                          max_target_tokens=self.cfg.max_target_positions)
        return DocumentContextDataset.from_explicit(
            pair, contexts, self.sep, input_mode=mode, max_context_tokens=self.cfg.max_source_positions,
            **target)

    def build_dataset_for_inference(self, src_tokens, src_lengths, constraints=None):
        """Interactive translation: lines of one buffer, in input order; context
        from this buffer and the remembered tail of the previous ones."""
        if self.cfg.context_mode != "previous" or self.cfg.shuffle_context:
            raise ConfigError("interactive translation supports only --context-mode previous "
                              "without --shuffle-context")
        eos, unk = self.source_dictionary.eos(), self.source_dictionary.unk()
        lines = []
        for t in src_tokens:
            t = t.clone()
            body = t[:-1]
            body[(body == eos) | (body == self.sep)] = unk  # keep the glued layout unambiguous
            lines.append(t)
        empty = np.array([len(t) <= 1 for t in lines], dtype=bool)
        n_history = len(self._history)
        pool = list(self._history) + lines
        docids, doc = [0] * n_history, 0
        for is_empty in empty:
            # an empty line is a document of its own and starts a new one
            doc += int(is_empty)
            docids.append(doc)
            doc += int(is_empty)
        index = compute_context_index(docids, self.cfg.context_size, "previous")[n_history:]
        last_doc = docids[-1] if not empty[-1] else None
        tail = [j for j, d in enumerate(docids) if d == last_doc]
        tail = tail[-self.cfg.context_size:] if self.cfg.context_size else []
        translations = rounds = None
        if self.glues_target_context:
            # the target context is the translations of the context lines: of the
            # remembered lines (decoded with the previous buffer, which is done by
            # now) and of this buffer's earlier lines (filled in as they are
            # decoded, round by round: see inference_step)
            tgt = self.target_dictionary
            translations = PreviousTranslations(
                index, self._remembered_translations() + [None] * len(lines), self.tgt_sep, tgt.eos(), tgt.pad(),
                slots=n_history + np.arange(len(lines)), max_tokens=self.cfg.max_target_positions,
                reserve=np.array([len(t) for t in lines], dtype=np.int64))
            rounds = document_positions(docids[n_history:])
            self._target_tail = (translations, tail)
        self._history = [pool[j] for j in tail]
        pair = LanguagePairDataset(lines, src_lengths, self.source_dictionary,
                                   tgt_dict=self.target_dictionary, constraints=constraints)
        self._packed_inference = bool(self.model_accepts_context) and not self.cfg.concat_context
        mode = "concat" if (self.cfg.concat_context or self._packed_inference) else "none"
        dataset = DocumentContextDataset(
            pair, index, pool, np.array([len(t) for t in pool], dtype=np.int64), self.sep,
            input_mode=mode, max_context_tokens=self.cfg.max_source_positions, skip=empty,
            rounds=rounds, translations=translations)
        self._inference_dataset = dataset if translations is not None else None
        return dataset

    def _remembered_translations(self) -> List[Optional[torch.Tensor]]:
        """Translations of the remembered lines (``self._history``), from the
        previous buffer's :class:`PreviousTranslations`."""
        if self._target_tail is None:
            return [None] * len(self._history)
        translations, positions = self._target_tail
        return [translations.pool[j] for j in positions]

    def reset_document(self):
        """Forget the interactive document history (as an empty input line does)."""
        self._history = []
        self._target_tail = None

    # --------------------------------------------------------------- model
    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        self.model_accepts_context = accepts_context(model)
        if not self.model_accepts_context and not self.cfg.concat_context and self.cfg.context_size > 0:
            logger.info("sentence-level architecture without --concat-context: context is ignored")
        for dataset in self.datasets.values():
            if isinstance(dataset, DocumentContextDataset) and dataset.input_mode != "concat":
                dataset.input_mode = "separate" if self.model_accepts_context else "none"
        return model

    def filter_indices_by_size(self, indices, dataset, max_positions=None, ignore_invalid_inputs=False):
        """fairseq's size filter (skip with ``--skip-invalid-size-inputs-valid-test``,
        else stop), with two changes for document data.

        ``max_positions`` is the limit of the task *and* the models, so the
        context is capped here at the models' source limit (the datasets were
        built with the task's ``--max-source-positions``, which at decoding
        time does not know the checkpoint's), and a warning says how many
        contexts lose their oldest tokens to it.  A sentence over the limit
        without the skip flag is a one-line error naming it and the limit
        (fairseq raises a bare ``Exception`` with a stack trace)."""
        limit = max_positions[0] if isinstance(max_positions, tuple) else max_positions
        if isinstance(dataset, DocumentContextDataset) and limit is not None:
            _cap_context(dataset, int(limit))
        translations = getattr(dataset, "translations", None)
        if translations is not None and isinstance(max_positions, tuple) and max_positions[1] is not None:
            # the forced prefix of previous translations fits the models' target limit
            cap = int(max_positions[1])
            translations.max_tokens = cap if translations.max_tokens is None else min(translations.max_tokens, cap)
        indices, ignored = dataset.filter_indices_by_size(indices, max_positions)
        if len(ignored) == 0:
            return indices
        if not ignore_invalid_inputs:
            i = int(ignored[0])
            split = next((name for name, d in self.datasets.items() if d is dataset), None)
            if split is not None:
                what = f"sentence {i} of '{split}' (line {i + 1})"
            else:  # interactive: the dataset is one input buffer
                text = self.source_dictionary.string(dataset.src[i])
                what = f"input line '{text[:40]}{'...' if len(text) > 40 else ''}'"
            raise DataError(
                f"{what} has (source, target) length {tuple(int(n) for n in dataset.size(i))} tokens, longer "
                f"than the {max_positions} the model takes (--max-source-positions, --max-target-positions); "
                f"{len(ignored)} sentence(s) are too long. Skip them with --skip-invalid-size-inputs-valid-test")
        logger.warning(f"{len(ignored):,} samples have invalid sizes and will be skipped, "
                       f"max_positions={max_positions}, first few sample ids={ignored[:10]}")
        return indices

    def model_input(self, models, sample):
        """``sample`` with the ``net_input`` the given model(s) accept: context
        keys dropped for sentence-level models; for context-aware models a
        glued interactive batch is split into source and context."""
        flags = [accepts_context(m) for m in models]
        if any(flags) and not all(flags):
            raise ConfigError("cannot ensemble context-aware and sentence-level models")
        net_input = sample["net_input"]
        if all(flags):
            if "ctx_tokens" not in net_input and self._packed_inference:
                src, src_lengths, ctx, ctx_lengths = split_concatenated(
                    net_input["src_tokens"], self.source_dictionary.pad(), self.source_dictionary.eos(),
                    self.sep, left_pad=self.cfg.left_pad_source)
                net_input = dict(net_input, src_tokens=src, src_lengths=src_lengths,
                                 ctx_tokens=ctx, ctx_lengths=ctx_lengths)
                return dict(sample, net_input=net_input)
            return sample
        if any(k in net_input for k in CONTEXT_KEYS):
            net_input = {k: v for k, v in net_input.items() if k not in CONTEXT_KEYS}
            return dict(sample, net_input=net_input)
        return sample

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        return super().train_step(self.model_input([model], sample), model, criterion, optimizer,
                                  update_num, ignore_grad)

    def valid_step(self, sample, model, criterion):
        return super().valid_step(self.model_input([model], sample), model, criterion)

    def inference_step(self, generator, models, sample, prefix_tokens=None, constraints=None):
        """fairseq's, with the context keys the models take; 2-to-2 outputs
        keep their last sentence.  A batch of a dataset of
        :meth:`build_dataset_for_inference` with ``--target-context``
        (fairseq-interactive, fairseq's hub) is decoded with its rows'
        previous translations as the forced prefix, and its best hypotheses
        become the target context of the following lines."""
        if getattr(self.cfg, "reuse_sentence_states", False):
            self._reuse_shared_states(models)
        translations, ids = (None, None) if prefix_tokens is not None else self._interactive_rows(sample)
        if translations is not None:
            src = sample["net_input"]["src_tokens"]
            prefix_tokens = translations.prefix_tokens(ids, device=src.device,
                                                       max_len=generator_max_len(generator, src))
        hypos = super().inference_step(generator, models, self.model_input(models, sample),
                                       prefix_tokens=prefix_tokens, constraints=constraints)
        if self.glues_target_context:
            self._keep_last_sentence(sample, hypos)
        if translations is not None:
            translations.record(ids, hypos)
        return hypos

    def _reuse_shared_states(self, models):
        """--reuse-sentence-states: give every model whose encoder can reuse the
        shared-layer states of earlier sentences (transformer_ctxenc) one
        cache for the whole run (:mod:`fairseq_ctx.modules.ctxenc_state_cache`)."""
        for model in models:
            encoder = getattr(unwrap_model(model), "encoder", None)
            if encoder is not None and hasattr(encoder, "state_cache") and encoder.state_cache is None:
                encoder.state_cache = SharedStateCache()

    def _interactive_rows(self, sample):
        """(PreviousTranslations, dataset ids of the rows) of an interactive
        2-to-2 batch, else (None, None).  fairseq-interactive hands
        ``inference_step`` only ``src_tokens``/``src_lengths``, so the rows are
        those of the batch the inference dataset collated last (fairseq
        collates each batch just before decoding it); a batch that is not it
        (``src_tokens`` differ) stops rather than decode with another
        sentence's context."""
        dataset = self._inference_dataset
        if dataset is None:
            return None, None
        batch = dataset.last_batch
        if batch is None:  # e.g. collated in a worker process: the rows are unknown
            raise ConfigError("--target-context: the task did not collate the batch to decode, so its lines' "
                              "previous translations are unknown (use --num-workers 0); or translate documents "
                              "with fairseq-ctx-translate (fairseq_ctx.translate)")
        dataset.last_batch = None
        src = sample["net_input"]["src_tokens"]
        if src.shape != batch["net_input"]["src_tokens"].shape or \
                not torch.equal(src.cpu(), batch["net_input"]["src_tokens"]):
            raise ConfigError("--target-context: the batch to decode is not the one the task built last, so its "
                              "lines' previous translations are unknown; translate documents with "
                              "fairseq-ctx-translate (fairseq_ctx.translate) instead")
        return dataset.translations, batch["id"].tolist()

    def _keep_last_sentence(self, sample, hypos):
        """2-to-2 outputs: every hypothesis keeps what follows its last
        separator (tokens and positional scores; its ``score`` stays that of
        the whole output), and ``sample["target"]`` (which fairseq-generate
        prints and scores against) is cut the same way, in place."""
        sep, pad, eos = self.tgt_sep, self.target_dictionary.pad(), self.target_dictionary.eos()
        for beam in hypos:
            for h in beam:
                seps = h["tokens"].eq(sep).nonzero()
                if len(seps):
                    cut = int(seps[-1]) + 1
                    h["tokens"] = h["tokens"][cut:]
                    h["positional_scores"] = h["positional_scores"][cut:]
        if sample.get("target") is not None:
            target, _, _, _ = split_concatenated(sample["target"], pad, eos, sep,
                                                 left_pad=self.cfg.left_pad_target)
            sample["target"] = target
