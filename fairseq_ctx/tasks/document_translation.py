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

Context of sentence ``i`` (the rule of :mod:`fairseq_ctx.data.context_selection`):
``--context-mode previous`` (default) the ``--context-size`` (default 1)
preceding source sentences of its document, empty at a document start;
``next`` the following ones; ``random`` random sentences of the split (seeded
by ``--context-seed``).  ``--shuffle-context`` hands every sentence the
context of another sentence of the split (the paper's check that the model
uses its context; meant for evaluation).

How the model gets it:

* context-aware architectures (model class attribute ``accepts_context``):
  ``net_input`` carries ``ctx_tokens`` (B x T_ctx, padded like the source)
  and ``ctx_lengths``;
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
  ``fairseq_ctx.evaluation.contrastive``), and ``fairseq-ctx-translate``,
  ``fairseq_ctx.hub`` and ``fairseq-interactive`` force the model's own
  previous translations, decoding round by round
  (:mod:`fairseq_ctx.tasks.document_decoding`);
* any other architecture translates sentence by sentence (the context keys
  are dropped before the model sees the batch), so a baseline runs with the
  same data and flags.

:mod:`fairseq_ctx.data.context_input` settles which of these applies, once
the model is known (:meth:`DocumentTranslationTask.build_model`), and
:mod:`fairseq_ctx.data.split_context` reads a split's docids or context
file.

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
task's :class:`~fairseq_ctx.tasks.document_decoding.DocumentDecoding`
(``task.documents``) remembers the last ``--context-size`` lines of the
current document across ``--buffer-size`` buffers, so the output does not
depend on ``--buffer-size`` or ``--batch-size``.  Only ``previous`` context
exists there (no ``next``/``random``/``--shuffle-context``).  The context
travels glued to the source (``S-`` lines show ``context <sep> source``); a
literal separator or ``</s>`` typed in an input line is read as ``<unk>``.
With ``--target-context`` the target context is the translations of those
lines, decoded round by round.

For scorers (contrastive evaluation): :meth:`DocumentTranslationTask.build_context_dataset`
builds batches from explicit (context sentences, source, target) token lists,
and :meth:`DocumentTranslationTask.model_input` gives the ``net_input`` a given
model accepts.
"""
import logging
from dataclasses import dataclass, field
from typing import Optional, Sequence

import torch
from fairseq import utils
from fairseq.dataclass import ChoiceEnum
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask
from omegaconf import II

from fairseq_ctx.data import split_context
from fairseq_ctx.data.context_input import input_mode
from fairseq_ctx.data.context_selection import CONTEXT_MODES, ContextRule
from fairseq_ctx.data.document_context_dataset import DocumentContextDataset
from fairseq_ctx.data.sentence_dataset import SentenceSetup, sentence_dataset
from fairseq_ctx.errors import ConfigError, DataError
from fairseq_ctx.tasks.document_decoding import DocumentDecoding
from fairseq_ctx.tasks import half_decoding

logger = logging.getLogger(__name__)


@dataclass
class DocumentTranslationConfig(TranslationConfig):
    context_size: int = field(default=1, metadata={
        "help": "number of context sentences per sentence (0 = none)"})
    context_mode: ChoiceEnum(list(CONTEXT_MODES)) = field(default="previous", metadata={
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
        "help": "decoding (fairseq-generate, -interactive): a model whose encoder runs each sentence through "
                "layers that see nothing else (the context encoder) does so once per run, as a source or as a "
                "context, whichever comes first (same translations, less encoder work); other models are "
                "unaffected"})
    # fairseq's --bf16, read outside training (tasks/half_decoding.py); no flag of its own
    bf16: bool = II("common.bf16")


@register_task("document_translation", dataclass=DocumentTranslationConfig)
class DocumentTranslationTask(TranslationTask):
    """Translation with the context of surrounding sentences (see module docstring)."""

    cfg: DocumentTranslationConfig
    read_docids = staticmethod(split_context.read_docids)

    def __init__(self, cfg: DocumentTranslationConfig, src_dict, tgt_dict):
        super().__init__(cfg, src_dict, tgt_dict)
        # appended to both, so dictionaries read from equal files stay equal
        self.sep = src_dict.add_symbol(cfg.context_separator)
        self.tgt_sep = tgt_dict.add_symbol(cfg.context_separator)
        # how the context reaches the model; settled by build_model
        self.context_input = input_mode(cfg)
        # fairseq-interactive's document memory and round-by-round decoding
        self.documents = DocumentDecoding(self.sentence_setup)
        # the document flags of the checkpoint whose task state was loaded last
        # (load_state_dict), for the next build_model(from_checkpoint=True)
        self._checkpoint_flags = None

    @classmethod
    def setup_task(cls, cfg: DocumentTranslationConfig, **kwargs):
        if cfg.context_size < 0:
            raise ConfigError(f"--context-size must be >= 0, got {cfg.context_size}")
        if getattr(cfg, "target_context", False) and not cfg.concat_context:
            raise ConfigError("--target-context needs --concat-context (the 2-to-2 baseline glues the "
                              "context to both sides)")
        if getattr(cfg, "load_alignments", False) and cfg.concat_context:
            raise ConfigError("--load-alignments: not supported with --concat-context (the context glued in "
                              "front of each sentence moves the token positions the alignments index)")
        if getattr(cfg, "num_batch_buckets", 0):
            raise ConfigError("--num-batch-buckets: not supported with --task document_translation (the context "
                              "is glued from and sized by unpadded sentences); leave it at 0")
        task = super().setup_task(cfg, **kwargs)
        # whether cfg is this command line's or a checkpoint's (--bf16 outside training: half_decoding.py)
        task.set_up_from_checkpoint = bool(kwargs.get("from_checkpoint", False))
        return task

    # ---------------------------------------------------------------- data
    def load_dataset(self, split, epoch=1, combine=False, context_rule: Optional[ContextRule] = None, **kwargs):
        """fairseq's split with each sentence's context, chosen by
        ``context_rule`` (default: this task's flags, :attr:`context_rule`).
        An evaluation that compares contexts (true, none, shuffled, random:
        :mod:`fairseq_ctx.evaluation.conditions`) passes its rule here rather
        than changing the task's configuration."""
        rule = self.context_rule if context_rule is None else context_rule
        paths = utils.split_paths(self.cfg.data)
        if split != self.cfg.train_subset:
            paths = paths[:1]
        data_path = paths[(epoch - 1) % len(paths)]
        super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)
        pair = self.datasets[split]
        index, pool, pool_sizes, source = split_context.split_context(
            data_path, split, pair, self.source_dictionary, self.cfg.source_lang, self.cfg.target_lang, rule,
            target_context=self.glues_target_context, combined=combine)
        target = {}
        if self.glues_target_context and pair.tgt is not None:
            target = dict(target_pool=pair.tgt, target_pool_sizes=pair.tgt_sizes, target_sep=self.tgt_sep,
                          max_target_tokens=self.cfg.max_target_positions)
        self.datasets[split] = DocumentContextDataset(
            pair, index, pool, pool_sizes, self.sep, input_mode=self.context_input,
            max_context_tokens=self.cfg.max_source_positions, **target)
        if split == self.cfg.train_subset and combine:
            # fairseq-train loads its training split with combine=True; only
            # that split keeps --required-batch-size-multiple (get_batch_iterator)
            self._training_dataset = self.datasets[split]
        logger.info(f"{split}: {len(pair)} sentences, {source}, "
                    f"context {rule.mode} x{rule.size}{' shuffled' if rule.shuffle else ''}, "
                    f"input {self.context_input}")

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

    @property
    def context_rule(self) -> ContextRule:
        """Which sentences are each sentence's context, under the current flags."""
        return ContextRule.from_cfg(self.cfg)

    @property
    def sentence_setup(self) -> SentenceSetup:
        """What a dataset of sentences in memory is built with under this
        task (dictionaries, separators, padding sides, limits)."""
        cfg = self.cfg
        return SentenceSetup(self.source_dictionary, self.target_dictionary, self.sep, self.tgt_sep,
                             cfg.left_pad_source, cfg.left_pad_target, cfg.max_source_positions,
                             cfg.max_target_positions, self.glues_target_context)

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
        mode = self.context_input if model is None else input_mode(self.cfg, [model])
        return sentence_dataset(self.sentence_setup, sources, mode, contexts=contexts, targets=targets,
                                target_contexts=target_contexts)

    def build_dataset_for_inference(self, src_tokens, src_lengths, constraints=None):
        """Interactive translation: lines of one buffer, in input order; context
        from this buffer and the remembered tail of the previous ones
        (:meth:`DocumentDecoding.buffer_dataset`)."""
        return self.documents.buffer_dataset(src_tokens, src_lengths, self.context_input, self.context_rule,
                                             constraints)

    def reset_document(self):
        """Forget the interactive document history (as an empty input line does)."""
        self.documents.reset()

    # --------------------------------------------------------------- model
    def build_model(self, cfg, from_checkpoint=False):
        if from_checkpoint:
            from fairseq_ctx import checkpoint_checks

            # the flags the checkpoint recorded in its task state, else (saved
            # without them) its task configuration as loaded, else the model's
            loaded = checkpoint_checks.take_loaded_task_cfg()
            recorded, self._checkpoint_flags = self._checkpoint_flags, None
            self._check_trained_flags(recorded if recorded is not None
                                      else self._flags_of(loaded if loaded is not None else cfg))
        model = super().build_model(cfg, from_checkpoint)
        if from_checkpoint:  # fairseq-generate, -interactive, -validate, hubs: --bf16 (half_decoding.py)
            model = half_decoding.for_inference(model, self.cfg, getattr(self, "set_up_from_checkpoint", False))
        self.context_input = input_mode(self.cfg, [model])
        if not self.context_input.uses_context and self.cfg.context_size > 0:
            logger.info("sentence-level architecture without --concat-context: context is ignored")
        for dataset in self.datasets.values():
            if isinstance(dataset, DocumentContextDataset):
                dataset.input_mode = self.context_input
        return model

    # flags that change what the model reads: decoding without the ones it was
    # trained with gives it another input format, with no error from the model
    FORMAT_FLAGS = ("concat_context", "target_context", "context_separator")
    # flags that choose which sentences: another value is an evaluation choice
    SELECTION_FLAGS = ("context_size", "context_mode")
    # the key of those flags in the task state a checkpoint saves ("task_state":
    # fairseq's trainer saves state_dict(), and load_model_ensemble_and_task,
    # behind generate, interactive, validate and the hubs, gives it to
    # load_state_dict right before building that checkpoint's model). Unlike
    # the checkpoint's configuration, arg_overrides (fairseq-validate's flags,
    # the hubs' keyword arguments, --model-overrides) do not reach it.
    FLAGS_STATE_KEY = "document_flags"

    @classmethod
    def _flags_of(cls, cfg) -> dict:
        """The document flags of a task configuration (None for a flag it
        lacks), as plain values a weights-only load reads back."""
        def plain(value):
            return value if value is None or isinstance(value, (bool, int)) else str(value)

        return {flag: plain(getattr(cfg, flag, None)) for flag in cls.FORMAT_FLAGS + cls.SELECTION_FLAGS}

    def state_dict(self):
        # this task's own flags, never ones loaded from a checkpoint (a model
        # fine-tuned with other flags records those it was fine-tuned with)
        return {**super().state_dict(), self.FLAGS_STATE_KEY: self._flags_of(self.cfg)}

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        # None when the checkpoint was saved without them
        self._checkpoint_flags = state_dict.pop(self.FLAGS_STATE_KEY, None)
        super().load_state_dict(state_dict)

    def _check_trained_flags(self, trained: dict) -> None:
        """A checkpoint decoded (generate, interactive, validate, the hubs)
        with document-task flags other than it was trained with: one line for
        a flag that changes the input format (a ``--concat-context`` model
        without it would translate as a sentence-level model), a warning for
        the context's size or mode. ``trained``: the flags the checkpoint
        recorded (:attr:`FLAGS_STATE_KEY`), or for one saved without them
        those of its task configuration as loaded
        (:func:`~fairseq_ctx.checkpoint_checks.take_loaded_task_cfg`), else
        of its model configuration (which holds every flag for a legacy
        architecture); a checkpoint trained without this task has none of
        the flags: nothing to compare."""
        def shown(flag, value):
            name = "--" + flag.replace("_", "-")
            return (name if value else f"no {name}") if isinstance(value, bool) else f"{name} {value}"

        given_flags = self._flags_of(self.cfg)
        for flag in self.FORMAT_FLAGS + self.SELECTION_FLAGS:
            was, given = trained.get(flag), given_flags[flag]
            if was is None or given is None or str(was) == str(given):
                continue
            said = (f"the checkpoint was trained with {shown(flag, was)}, this command gives "
                    f"{shown(flag, given)}")
            if flag in self.FORMAT_FLAGS:
                raise ConfigError(f"--{flag.replace('_', '-')}: {said}; decode with the document-task flags it "
                                  "was trained with")
            logger.warning(f"--{flag.replace('_', '-')}: {said} (the context it is evaluated with differs "
                           "from its training)")

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
            cut = dataset.cap_context(int(limit))
            if cut:
                logger.warning(f"{cut} of {len(dataset)} sentences have a context longer than the model's source "
                               f"limit of {limit} tokens (--max-source-positions{dataset.input_mode.cap_note}): its "
                               "oldest tokens are dropped")
        if isinstance(max_positions, tuple) and max_positions[1] is not None:
            if isinstance(dataset, DocumentContextDataset):
                cut = dataset.cap_target_context(int(max_positions[1]))
                if cut:
                    logger.warning(f"{cut} of {len(dataset)} sentences have a target context longer than the "
                                   f"model's target limit of {max_positions[1]} tokens (--max-target-positions, "
                                   "counting the sentence itself with --target-context): its oldest tokens are "
                                   "dropped")
            # the forced prefix of previous translations fits the models' target limit
            self.documents.limit_prefixes(dataset, int(max_positions[1]))
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
        keys dropped unless the context reaches them separately; a glued
        interactive batch is split into source and context for them."""
        return self.documents.model_input(sample, input_mode(self.cfg, models))

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        return super().train_step(self.model_input([model], sample), model, criterion, optimizer,
                                  update_num, ignore_grad)

    def valid_step(self, sample, model, criterion):
        return super().valid_step(self.model_input([model], sample), model, criterion)

    def build_generator(self, models, args, *rest, **kwargs):
        """fairseq's, refusing ``--match-source-len`` with ``--concat-context``:
        the generator would match the glued source (context included), not
        the sentence."""
        if getattr(args, "match_source_len", False) and self.cfg.concat_context:
            raise ConfigError("--match-source-len: not supported with --concat-context (the output would match "
                              "the length of the source with its context glued in front, not the sentence's)")
        return super().build_generator(models, args, *rest, **kwargs)

    def inference_step(self, generator, models, sample, prefix_tokens=None, constraints=None):
        """fairseq's, with the context keys the models take; 2-to-2 outputs
        keep their last sentence, and a batch of fairseq-interactive's decoded
        round by round (``--target-context``) is decoded with its rows'
        previous translations as the forced prefix
        (:meth:`DocumentDecoding.decode`; the hub forces its own); the
        alignments of a glued batch split for the models point into the glued
        line fairseq-interactive prints (:meth:`DocumentDecoding.align_to_glued`)."""
        net_sample = self.model_input(models, sample)
        hypos = self.documents.decode(generator, sample, prefix_tokens, lambda prefix: super(
            DocumentTranslationTask, self).inference_step(generator, models, net_sample, prefix_tokens=prefix,
                                                          constraints=constraints))
        self.documents.align_to_glued(sample, net_sample, hypos)
        return hypos
