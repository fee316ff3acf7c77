"""A stateless Python API for translating sentences and documents with a
fairseq_ctx checkpoint (any architecture, with ``--task document_translation``
or plain ``--task translation``).

::

    from fairseq_ctx import hub
    model = hub.from_pretrained("runs/doc/checkpoint_best.pt", data_name_or_path="data/bible/bin",
                                bpe="sentencepiece", sentencepiece_model="data/bible/spm/spm.model")
    model.translate(["Y dijo Dios.", ""], context=["En el principio creó Dios los cielos y la tierra.", None])
    model.translate_document(["En el principio ...", "Y la tierra ...", "Y dijo Dios ..."])
    model.translate_documents([[...], [...]])

It follows :class:`fairseq.hub_utils.GeneratorHubInterface` (a subclass:
the same ``encode``/``decode``, tokenizer and BPE from the checkpoint's or the
caller's configuration, generation keyword arguments such as ``beam``,
``lenpen``, ``max_len_b``) and differs from fairseq's hub in three ways:

* **No state between calls.** fairseq's hub batches through the task's
  ``build_dataset_for_inference``, which for ``--task document_translation``
  is fairseq-interactive's document reader: it keeps the last sentences as
  the next call's context and reads an empty string as a document break,
  which gets no output (3 inputs gave 2 outputs).  Here every call builds
  its own :class:`~fairseq_ctx.data.document_context_dataset.DocumentContextDataset`
  from the sentences and contexts it is given and from nothing else.
* **As many outputs as inputs, in input order.**  An empty (or
  whitespace-only) string translates to ``""`` without reaching the model.
* **Context as the task defines it** (Voita et al., ACL 2018, Sect. 3: the
  context of a sentence is the preceding sentence(s) of its document):
  :meth:`translate` takes an explicit context per sentence;
  :meth:`translate_document` / :meth:`translate_documents` derive it from
  each document exactly as the task does from a ``.docids`` file (the
  checkpoint's :class:`~fairseq_ctx.data.context_selection.ContextRule`:
  ``--context-size``, ``--context-mode``, ``--context-seed``,
  ``--shuffle-context``), so their output is the output of
  ``fairseq-generate`` on the same sentences binarized with one document id
  per document.  Empty strings inside a document are not sentences
  (:func:`~fairseq_ctx.data.context_selection.split_documents`): they get
  ``""`` and are skipped as context.

How the context reaches the model is the task's rule
(:func:`fairseq_ctx.data.context_input.input_mode`): separate ``ctx_tokens``
for context-aware architectures, glued to the source with ``<sep>`` under
``--concat-context``, ignored by a sentence-level model (and by any
checkpoint of plain ``--task translation``).
Batches are sorted by source length and bounded by the configuration's
``max_tokens``/``batch_size`` (the checkpoint's unless overridden), as
``fairseq-generate`` batches; with source-side context every sentence's input
is known up front, so sentences of all documents batch freely.

Target context (a 2-to-2 model, trained with ``--concat-context
--target-context``; Tiedemann and Scherrer 2017): :meth:`translate_document`
/ :meth:`translate_documents` give each sentence its document's previous
``--context-size`` *translations* as the forced decoder prefix
(``t_prev <sep>``; the output keeps what follows the last separator).  A
sentence's input is then known only once the sentences before it are
translated, so documents are decoded in rounds: round ``i`` batches the
``i``-th sentence of every document (sorted by length, cut by
``max_tokens``/``batch_size``), after round ``i-1``.  :meth:`translate` takes
the previous translations explicitly (``target_context=``); without them the
model writes the previous sentence itself, as in ``fairseq-generate``.  The
rounds are set up and decoded by
:mod:`fairseq_ctx.tasks.document_decoding` (:meth:`DocumentDecoding.in_rounds`,
:func:`decode_rows`), as fairseq-interactive's buffers are; the hub holds its
own :class:`DocumentDecoding`, never the task's.
"""
import copy
import logging
import os
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from fairseq import utils
from fairseq.hub_utils import GeneratorHubInterface
from omegaconf import open_dict

from fairseq_ctx.data.context_input import input_mode
from fairseq_ctx.data.context_selection import ContextRule, explicit_index, split_documents
from fairseq_ctx.data.previous_translations import PreviousTranslations, cut_warning
from fairseq_ctx.data.sentence_dataset import sentence_dataset
from fairseq_ctx.errors import ConfigError
from fairseq_ctx.tasks.document_decoding import DocumentDecoding, decode_rows
from fairseq_ctx.tasks.document_translation import DocumentTranslationTask

logger = logging.getLogger(__name__)

__all__ = ["from_pretrained", "DocumentHubInterface"]

# one explicit context of a sentence: nothing, one sentence, or sentences oldest first
ContextLike = Union[None, str, Sequence[str]]


def from_pretrained(model_name_or_path: str, checkpoint_file: str = "checkpoint_best.pt",
                    data_name_or_path: str = ".", **kwargs) -> "DocumentHubInterface":
    """Load a checkpoint as :class:`DocumentHubInterface`.

    As :func:`fairseq.hub_utils.from_pretrained`: ``model_name_or_path`` is
    the checkpoint's directory (or the checkpoint file itself, then
    ``checkpoint_file`` is ignored), ``data_name_or_path`` the binarized data
    directory holding the dictionaries (relative to the model directory when
    it starts with "."), and every keyword argument overrides the checkpoint's
    configuration by name (``beam=4``, ``bpe="sentencepiece"``,
    ``sentencepiece_model=PATH``, ``tokenizer="moses"``, ``context_size=2``,
    ``max_tokens=4096``, ...).  The task and its flags come from the
    checkpoint; a document flag other than it was trained with is checked
    (:meth:`DocumentTranslationTask.build_model`: ``context_size`` a warning,
    ``concat_context`` an error)."""
    import fairseq_ctx
    from fairseq import hub_utils

    fairseq_ctx.register()  # the archs and the task; weights-only loading

    if os.path.isfile(model_name_or_path):
        model_name_or_path, checkpoint_file = os.path.split(os.path.abspath(model_name_or_path))
    loaded = hub_utils.from_pretrained(model_name_or_path, checkpoint_file=checkpoint_file,
                                       data_name_or_path=data_name_or_path, **kwargs)
    return DocumentHubInterface(loaded["args"], loaded["task"], loaded["models"])


def _is_empty(sentence: str) -> bool:
    if not isinstance(sentence, str):
        raise TypeError(f"sentences must be strings, got {type(sentence).__name__}")
    return not sentence.strip()


class DocumentHubInterface(GeneratorHubInterface):
    """fairseq's hub interface with explicit, per-call document context (see
    the module docstring).  Build it with :func:`from_pretrained`, or from a
    full fairseq configuration, a task and models as fairseq's class."""

    def __init__(self, cfg, task, models):
        super().__init__(cfg, task, models)
        self.document_task = isinstance(task, DocumentTranslationTask)
        self.context_input = input_mode(task.cfg, self.models)
        # the 2-to-2 set-up; per call, nothing remembered (the interactive memory is unused)
        self.decoding = DocumentDecoding(task.sentence_setup) if self.document_task else None

    # ------------------------------------------------------------ context
    @property
    def context_size(self) -> int:
        """Context sentences per sentence that :meth:`translate_document` gives
        (the task's ``--context-size``; 0 when the model uses no context)."""
        return self.context_rule.size

    @property
    def context_rule(self) -> ContextRule:
        """Which sentences are a sentence's context: the task's rule, none
        when the model uses no context."""
        if not self.context_input.uses_context:
            return ContextRule(size=0)
        return ContextRule.from_cfg(self.task.cfg)

    def context_index(self, docids: Sequence) -> np.ndarray:
        """Row ``i``: indices of sentence ``i``'s context sentences among the
        given sentences (``-1``: none), as the task computes it from a docids
        file."""
        return self.context_rule.index(docids)

    @property
    def target_context(self) -> bool:
        """True for a 2-to-2 model (``--concat-context --target-context``):
        its previous translations are its target context, a forced prefix."""
        return self.document_task and self.task.glues_target_context

    def context_dataset(self, sources: Sequence[torch.Tensor], context_index: Optional[np.ndarray] = None,
                        pool: Optional[Sequence[torch.Tensor]] = None, rounds: Optional[np.ndarray] = None,
                        translations: Optional[PreviousTranslations] = None):
        """A dataset of ``sources`` (token tensors with EOS) whose item ``i``
        has the context sentences ``pool[j]`` for ``j`` in
        ``context_index[i]`` (``-1`` skipped); no context when
        ``context_index`` is None.  ``rounds``/``translations``: batch round
        by round, decoding with previous translations as the forced prefix
        (see :meth:`document_dataset`).  Built fresh on every call: nothing
        is remembered."""
        if not self.document_task:
            sources = list(sources)
            return self.task.build_dataset_for_inference(sources, torch.tensor([len(t) for t in sources]))
        if context_index is None or pool is None:
            context_index, pool = None, ()
        return sentence_dataset(self.task.sentence_setup, sources, self.context_input, context_index, pool,
                                rounds=rounds, translations=translations)

    def document_dataset(self, sources: Sequence[torch.Tensor], docids: Sequence):
        """The dataset of sentences ``sources`` of the documents ``docids``
        (one id per sentence; a document is a run of equal ids), each with
        the context the task gives it.  For a 2-to-2 model
        (:attr:`target_context`) it batches round by round (round ``i``: the
        ``i``-th sentence of every document) and carries the documents'
        :class:`PreviousTranslations`, which :meth:`iterate` fills and forces
        as the decoder's prefix; otherwise all sentences batch freely."""
        sources = list(sources)
        index = self.context_index(docids)
        if not self.target_context:
            return self.context_dataset(sources, index, sources)
        translations, rounds = self.decoding.in_rounds(self.context_rule, index, [None] * len(sources), sources,
                                                       docids, slots=np.arange(len(sources)),
                                                       max_tokens=self._target_limit)
        return self.context_dataset(sources, index, sources, rounds=rounds, translations=translations)

    @property
    def _target_limit(self) -> Optional[int]:
        """The models' and the task's target limit (forced prefixes fit it)."""
        return self.max_positions[1] if isinstance(self.max_positions, tuple) else None

    # --------------------------------------------------------- generation
    def build_generator(self, prefix_allowed_tokens_fn=None, **overrides):
        """The sequence generator of the configuration's generation flags,
        each keyword argument overriding one (``beam=4``, ``lenpen=0.6``)."""
        gen_args = copy.deepcopy(self.cfg.generation)
        with open_dict(gen_args):
            for k, v in overrides.items():
                if v is not None:  # beam=None: the configuration's
                    setattr(gen_args, k, v)
        return self.task.build_generator(self.models, gen_args, prefix_allowed_tokens_fn=prefix_allowed_tokens_fn)

    def iterate(self, dataset, generator, skip_invalid_size_inputs: bool = False,
                inference_step_args: Optional[dict] = None
                ) -> Iterator[Tuple[List[int], List[List[Dict[str, torch.Tensor]]], dict]]:
        """Translate ``dataset`` batch by batch (length-sorted, batch-size
        multiple 1 so no sentence is dropped); yields ``(ids, hypotheses,
        batch)`` per batch, ids being positions in the dataset.  A dataset
        with :class:`PreviousTranslations` (``dataset.translations``) is
        decoded with each row's previous translations as the forced prefix,
        and each batch's best hypotheses are recorded for the batches after
        it; how many of those prefixes were cut to the output limit is
        logged once, when the iteration ends or the caller stops it."""
        itr = self.task.get_batch_iterator(
            dataset=dataset, max_tokens=self.cfg.dataset.max_tokens, max_sentences=self.cfg.dataset.batch_size,
            max_positions=self.max_positions, ignore_invalid_inputs=skip_invalid_size_inputs,
            required_batch_size_multiple=1, disable_iterator_cache=True).next_epoch_itr(shuffle=False)
        translations = getattr(dataset, "translations", None)
        decoded = 0
        try:
            for batch in itr:
                ids = batch["id"].tolist()  # before the batch moves to the device
                batch = utils.apply_to_sample(lambda t: t.to(self.device), batch)
                if translations is None:
                    hypos = self.task.inference_step(generator, self.models, batch, **(inference_step_args or {}))
                else:
                    hypos = decode_rows(translations, ids, generator, batch, lambda prefix: self.task.inference_step(
                        generator, self.models, batch, prefix_tokens=prefix, **(inference_step_args or {})))
                decoded += len(ids)
                yield ids, hypos, batch
        finally:  # also when the caller stops early (the generator is closed)
            if translations is not None and translations.cut:  # of the sentences decoded (not those skipped)
                logger.warning(cut_warning(len(translations.cut), decoded))

    def generate(self, tokenized_sentences, beam: Optional[int] = None, verbose: bool = False,
                 skip_invalid_size_inputs: bool = False, inference_step_args=None,
                 prefix_allowed_tokens_fn=None, *, contexts: Optional[Sequence[Sequence[torch.Tensor]]] = None,
                 docids: Optional[Sequence] = None,
                 target_contexts: Optional[Sequence[Sequence[torch.Tensor]]] = None,
                 **kwargs) -> List[List[Dict[str, torch.Tensor]]]:
        """Hypotheses of each tokenized sentence, in input order (fairseq's
        ``generate``), with ``contexts`` (per sentence, a list of context token
        tensors, oldest first) or ``docids`` (one document id per sentence:
        the task's context within each document) or neither (no context).
        ``target_contexts`` (2-to-2 models only, with ``contexts`` or none):
        per sentence, the previous target sentences forced as the decoder's
        prefix; with ``docids`` a 2-to-2 model's own previous translations
        are (see :meth:`document_dataset`).  A sentence skipped by
        ``skip_invalid_size_inputs`` gets ``[]``."""
        if torch.is_tensor(tokenized_sentences) and tokenized_sentences.dim() == 1:
            ctx = None if contexts is None else [contexts]
            tctx = None if target_contexts is None else [target_contexts]
            return self.generate(tokenized_sentences.unsqueeze(0), beam, verbose, skip_invalid_size_inputs,
                                 inference_step_args, prefix_allowed_tokens_fn, contexts=ctx,
                                 target_contexts=tctx, **kwargs)[0]
        sources = list(tokenized_sentences)
        if contexts is not None and docids is not None:
            raise ValueError("give contexts or docids, not both")
        if target_contexts is not None:
            if docids is not None:
                raise ValueError("give target_contexts or docids, not both (with docids the previous "
                                 "translations are the target context)")
            if not self.target_context:
                raise ConfigError("target contexts need a model trained with --concat-context --target-context")
            if len(target_contexts) != len(sources):
                raise ValueError(f"{len(target_contexts)} target contexts for {len(sources)} sentences")
        index, pool = None, None
        if contexts is not None:
            if len(contexts) != len(sources):
                raise ValueError(f"{len(contexts)} contexts for {len(sources)} sentences")
            if not self.context_input.uses_context and any(len(c) for c in contexts):
                logger.warning("this model uses no context (sentence-level architecture without "
                               "--concat-context, or --task translation): the contexts are ignored")
            index, pool = explicit_index(contexts)
        elif docids is not None:
            if len(docids) != len(sources):
                raise ValueError(f"{len(docids)} document ids for {len(sources)} sentences")
        outputs: List[List[Dict[str, torch.Tensor]]] = [[] for _ in sources]
        if not sources:
            return outputs
        generator = self.build_generator(prefix_allowed_tokens_fn, beam=beam, **kwargs)
        if docids is not None:
            dataset = self.document_dataset(sources, docids)
        else:
            translations = None
            if target_contexts is not None:
                t_index, t_pool = explicit_index(target_contexts)
                translations = self.decoding.translations(t_index, t_pool, sources, max_tokens=self._target_limit)
            dataset = self.context_dataset(sources, index, pool, translations=translations)
        for ids, hypos, _ in self.iterate(dataset, generator, skip_invalid_size_inputs, inference_step_args):
            for i, h in zip(ids, hypos):
                outputs[i] = h
        if verbose:
            for tokens, hypos in zip(sources, outputs):
                logger.info(f"S\t{self.src_dict.string(tokens)}")
                for h in hypos:
                    logger.info(f"H\t{h['score']}\t{self.decode(h['tokens'])}")
        return outputs

    # ------------------------------------------------------------- strings
    def decode(self, tokens) -> str:
        """Target tokens (a tensor on any device, or a list of ids) to text:
        ``--post-process`` (if given), BPE decoding, detokenization, as
        fairseq-interactive's ``D-`` lines."""
        # on the host: Dictionary.string reads the tensor token by token
        text = self.tgt_dict.string(torch.as_tensor(tokens).cpu(), self.cfg.common_eval.post_process,
                                    extra_symbols_to_ignore={self.tgt_dict.eos()})
        return self.detokenize(self.remove_bpe(text))

    def _normalize_contexts(self, context, n: int) -> List[List[str]]:
        if context is None:
            return [[] for _ in range(n)]
        if isinstance(context, str) or len(context) != n:
            raise ValueError(f"context must hold one entry per sentence ({n}): None, a sentence, or a list of "
                             "sentences oldest first")
        out = []
        for c in context:
            items = [] if c is None else [c] if isinstance(c, str) else list(c)
            out.append([s for s in items if not _is_empty(s)])
        return out

    def sample(self, sentences, beam: Optional[int] = None, verbose: bool = False, *, context=None,
               target_context=None, **kwargs):
        if isinstance(sentences, str):
            return self.sample([sentences], beam, verbose, context=None if context is None else [context],
                               target_context=None if target_context is None else [target_context],
                               **kwargs)[0]
        sentences = list(sentences)
        contexts = self._normalize_contexts(context, len(sentences))
        keep = [i for i, s in enumerate(sentences) if not _is_empty(s)]
        tctx = None
        if target_context is not None:
            t_contexts = self._normalize_contexts(target_context, len(sentences))
            tctx = [[self._encode_target(t) for t in t_contexts[i]] for i in keep]
        hypos = self.generate([self.encode(sentences[i]) for i in keep], beam, verbose,
                              contexts=[[self.encode(c) for c in contexts[i]] for i in keep],
                              target_contexts=tctx, **kwargs)
        return self._fill(len(sentences), keep, hypos)

    def _encode_target(self, sentence: str) -> torch.LongTensor:
        """A target-language sentence to target token ids (tokenizer, BPE,
        target dictionary), as ``encode`` does for the source."""
        return self.tgt_dict.encode_line(self.apply_bpe(self.tokenize(sentence)), add_if_not_exist=False).long()

    def translate(self, sentences, beam: Optional[int] = None, verbose: bool = False, *, context=None,
                  target_context=None, **kwargs):
        """Translate ``sentences`` (a list, or one string), each with its own
        ``context``: None (no context), or a list with one entry per sentence,
        each None, one source sentence, or a list of source sentences oldest
        first (given as they are: the caller chooses how many).  Returns one
        string per sentence, ``""`` for an empty one.  ``beam`` and the other
        generation keywords default to the configuration's (fairseq's hub
        uses beam 5 whatever the configuration says).  ``target_context``
        (2-to-2 models only), the same shape as ``context``: previous
        translations (target-language text) forced as the decoder's prefix."""
        return self.sample(sentences, beam, verbose, context=context, target_context=target_context, **kwargs)

    def translate_documents(self, documents: Sequence[Sequence[str]], beam: Optional[int] = None,
                            verbose: bool = False, **kwargs) -> List[List[str]]:
        """Translate each document (a list of sentences in order) with the
        context the task gives its sentences; all documents batch together
        (a 2-to-2 model's round by round, its previous translations as target
        context: see the module docstring).  Returns one list of translations
        per document, aligned with it."""
        if isinstance(documents, str) or any(isinstance(d, str) for d in documents):
            raise TypeError("documents must be a list of documents, each a list of sentences")
        flat = [s for doc in documents for s in doc]
        keep, docids = split_documents([_is_empty(s) for s in flat], [d for d, doc in enumerate(documents) for _ in doc])
        keep = keep.tolist()
        hypos = self.generate([self.encode(flat[k]) for k in keep], beam, verbose, docids=docids, **kwargs)
        texts = self._fill(len(flat), keep, hypos)
        out, start = [], 0
        for doc in documents:
            out.append(texts[start:start + len(doc)])
            start += len(doc)
        return out

    def translate_document(self, sentences: Sequence[str], beam: Optional[int] = None, verbose: bool = False,
                           **kwargs) -> List[str]:
        """Translate one document (see :meth:`translate_documents`)."""
        if isinstance(sentences, str):
            raise TypeError("a document is a list of sentences, not one string")
        return self.translate_documents([sentences], beam, verbose, **kwargs)[0]

    def _fill(self, n: int, keep: List[int], hypos) -> List[str]:
        texts = [""] * n
        for i, h in zip(keep, hypos):
            texts[i] = self.decode(h[0]["tokens"]) if h else ""
        return texts
