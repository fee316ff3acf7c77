"""Decoding documents: fairseq-interactive's document memory and the
round-by-round decoding of 2-to-2 models.

:class:`DocumentDecoding` is built from explicit values (a
:class:`~fairseq_ctx.data.sentence_dataset.SentenceSetup`: dictionaries,
separators, padding sides, limits) and is given the context rule and the
input mode with each buffer; it never sees the task.  The document task
owns one for fairseq-interactive (``task.documents``); the hub builds its
own datasets and decodes their rounds with :func:`decode_rows`.

fairseq-interactive hands the task one buffer of input lines at a time
(``build_dataset_for_inference``) and keeps only ``src_tokens`` and
``src_lengths`` of each batch.  So :class:`DocumentDecoding`:

* remembers the last ``--context-size`` lines of the current document
  across buffers (an empty line starts a new document and is not
  translated: :meth:`ContextRule.stream_index
  <fairseq_ctx.data.context_selection.ContextRule.stream_index>`), so that
  the output does not depend on ``--buffer-size``;
* glues a buffer's context to the source (``S-`` lines show ``context
  <sep> source``; the mode's ``stream``), since a separate context would
  not survive fairseq-interactive's batch; :meth:`model_input` splits it
  off again for a model that takes it separately;
* with ``--target-context`` (a 2-to-2 model) decodes round by round: the
  buffer's dataset batches a line only after the lines before it in its
  document (``rounds``), and :meth:`decode` forces each row's previous
  translations as the decoder's prefix and records the best hypotheses
  (:class:`~fairseq_ctx.data.previous_translations.PreviousTranslations`),
  carrying the remembered lines' translations over to the next buffer.
  The rows of a batch without ids (fairseq-interactive's) are those of the
  batch the buffer's dataset collated last, which this object hears of
  (the dataset's ``on_collate``; fairseq collates each batch just before
  decoding it); a batch that is not it stops rather than decode with
  another sentence's context.
"""
import logging
from typing import Callable, List, Optional, Sequence

import numpy as np
import torch

from fairseq_ctx.data.context_input import GLUED
from fairseq_ctx.data.context_selection import ContextRule, document_positions
from fairseq_ctx.data.previous_translations import PreviousTranslations, cut_warning, generator_max_len
from fairseq_ctx.data.sentence_dataset import SentenceSetup, sentence_dataset
from fairseq_ctx.data.token_layout import split_concatenated
from fairseq_ctx.errors import ConfigError

logger = logging.getLogger(__name__)


def decode_rows(translations: PreviousTranslations, ids: Sequence[int], generator, sample: dict,
                run: Callable[[torch.Tensor], list]) -> list:
    """Hypotheses of one batch of a dataset decoded round by round: rows
    ``ids`` get their previous translations as the forced prefix
    (``run(prefix_tokens)`` decodes), and their best hypotheses become the
    target context of the rows after them."""
    src = sample["net_input"]["src_tokens"]
    prefix = translations.prefix_tokens(ids, device=src.device, max_len=generator_max_len(generator, src))
    hypos = run(prefix)
    translations.record(ids, hypos)
    return hypos


class DocumentDecoding(object):
    """The document memory and round-by-round decoding of fairseq-interactive
    (see the module docstring)."""

    def __init__(self, setup: SentenceSetup):
        self.setup = setup
        self.reset()
        # the buffer dataset whose batches are decoded with previous translations,
        # and the batch it collated last (its rows: fairseq-interactive drops the ids)
        self.dataset = None
        self.collated: Optional[dict] = None
        # True while the buffers glue a context that the model takes separately
        self.glued = False

    def reset(self):
        """Forget the document history (as an empty input line does)."""
        self.history: List[torch.Tensor] = []
        # the previous buffer's PreviousTranslations and the pool positions of
        # self.history in it (their translations)
        self.target_tail: Optional[tuple] = None

    # ----------------------------------------------------------- datasets
    def translations(self, index: np.ndarray, pool: Sequence[Optional[torch.Tensor]],
                     sources: Sequence[torch.Tensor], slots: Optional[np.ndarray] = None,
                     max_tokens: Optional[int] = None) -> PreviousTranslations:
        """The target context of ``sources``: row ``i`` of ``index`` points
        into ``pool`` (translations, ``None`` = none yet); ``slots[i]``: the
        pool position item ``i``'s own translation fills (None: the pool is
        fixed).  Prefixes are cut to ``max_tokens`` (default: the setup's
        target limit; the task cuts them to the models' too when it filters
        batches), leaving room for the sentence."""
        tgt = self.setup.tgt_dict
        limit = self.setup.max_target_positions if max_tokens is None else max_tokens
        return PreviousTranslations(index, list(pool), self.setup.tgt_sep, tgt.eos(), tgt.pad(), slots=slots,
                                    max_tokens=limit, reserve=np.array([len(t) for t in sources], dtype=np.int64))

    def in_rounds(self, rule: ContextRule, index: np.ndarray, pool: Sequence[Optional[torch.Tensor]],
                  sources: Sequence[torch.Tensor], docids: Sequence, slots: np.ndarray,
                  max_tokens: Optional[int] = None):
        """``(translations, rounds)`` of sentences decoded with their own
        previous translations (a 2-to-2 model): the context must come before
        each sentence in its document (refused in one line otherwise), and a
        sentence's round is its position in its document (``docids``)."""
        rule.require_in_order("a --target-context model (decoded with its previous translations)")
        return self.translations(index, pool, sources, slots, max_tokens), document_positions(docids)

    def buffer_dataset(self, src_tokens, src_lengths, mode, rule: ContextRule, constraints=None):
        """fairseq-interactive: the dataset of one buffer of input lines, in
        input order, with context from this buffer and the remembered lines
        of the previous ones; ``mode``: how the context reaches the models,
        ``rule``: the task's context rule."""
        d = self.setup.src_dict
        # symbols a typed line must not hold, read as <unk>: they keep the glued layout unambiguous
        # (a typed <pad> would be dropped as padding when split, a <s> hidden in the S- line while
        # alignments count it)
        device = src_tokens[0].device if len(src_tokens) else "cpu"
        reserved = torch.tensor([d.eos(), self.setup.sep, d.pad(), d.bos()], device=device)
        lines = []
        for t in src_tokens:
            t = t.clone()
            body = t[:-1]
            body[torch.isin(body, reserved)] = d.unk()
            lines.append(t)
        empty = np.array([len(t) <= 1 for t in lines], dtype=bool)
        n_history = len(self.history)
        pool = list(self.history) + lines
        index, tail = rule.stream_index(n_history, empty)
        translations = rounds = None
        if self.setup.target_context:
            # the target context is the translations of the context lines: of the
            # remembered lines (decoded with the previous buffer, which is done by
            # now) and of this buffer's earlier lines (filled in as they are
            # decoded, round by round: see decode); rounds count from the buffer's
            # start, an empty line (never decoded) a document of its own and a new one after it
            translations, rounds = self.in_rounds(
                rule, index, self._remembered_translations() + [None] * len(lines), lines,
                2 * np.cumsum(empty) - empty, slots=n_history + np.arange(len(lines)))
            self.target_tail = (translations, tail)
        self.history = [pool[j] for j in tail]
        self.glued = mode.stream is GLUED
        self.collated = None
        dataset = sentence_dataset(self.setup, lines, mode.stream, index, pool, shuffle=True,
                                   constraints=constraints, skip=empty, rounds=rounds, translations=translations,
                                   on_collate=self._heard if translations is not None else None)
        self.dataset = dataset if translations is not None else None
        return dataset

    def _heard(self, batch: dict):
        """The buffer dataset's collater made ``batch`` (the next one decoded)."""
        self.collated = batch or None

    def _remembered_translations(self) -> List[Optional[torch.Tensor]]:
        """Translations of the remembered lines (``self.history``), from the
        previous buffer's :class:`PreviousTranslations`."""
        if self.target_tail is None:
            return [None] * len(self.history)
        translations, positions = self.target_tail
        return [translations.pool[j] for j in positions]

    def limit_prefixes(self, dataset, max_tokens: int):
        """Cut the forced prefixes of ``dataset``'s previous translations to
        the models' target limit ``max_tokens`` (known when batches are filtered)."""
        translations = getattr(dataset, "translations", None)
        if translations is not None:
            translations.max_tokens = (max_tokens if translations.max_tokens is None
                                       else min(translations.max_tokens, max_tokens))

    # ----------------------------------------------------------- model input
    def unglue(self, sample: dict) -> dict:
        """A glued interactive batch with its context split off the source
        into ``ctx_tokens``/``ctx_lengths``."""
        d = self.setup.src_dict
        net_input = sample["net_input"]
        src, src_lengths, ctx, ctx_lengths = split_concatenated(
            net_input["src_tokens"], d.pad(), d.eos(), self.setup.sep, left_pad=self.setup.left_pad_source)
        return dict(sample, net_input=dict(net_input, src_tokens=src, src_lengths=src_lengths,
                                           ctx_tokens=ctx, ctx_lengths=ctx_lengths))

    @staticmethod
    def align_to_glued(sample: dict, net_sample: dict, hypos) -> None:
        """A batch split for the model (``net_sample`` from the glued
        ``sample``): its hypotheses' alignments (``--print-alignment``) point
        into the source the model read, while fairseq-interactive prints them
        against the glued line (``S-``). Moves them right, in place, by the
        tokens before the source (hard alignments: fairseq-interactive prints
        no soft ones)."""
        if net_sample is sample or "ctx_tokens" in sample["net_input"]:
            return
        # tokens before the source: the context's and its <sep> (one host copy a batch)
        shifts = (sample["net_input"]["src_lengths"] - net_sample["net_input"]["src_lengths"]).tolist()
        for shift, beam in zip(shifts, hypos):
            for h in beam:
                alignment = h.get("alignment")
                if shift and isinstance(alignment, list) and alignment and isinstance(alignment[0], tuple):
                    h["alignment"] = [(s + shift, t) for s, t in alignment]  # (source word, target word)

    def model_input(self, sample: dict, mode) -> dict:
        """``sample`` with the ``net_input`` a model under ``mode`` takes (a
        glued interactive batch split again for a separate-context model)."""
        return mode.model_input(sample, self.unglue if self.glued else None)

    # ----------------------------------------------------------- decoding
    def _rows(self, sample):
        """(PreviousTranslations, dataset ids of the rows) of a batch of the
        buffer decoded round by round, else (None, None).  A batch that
        carries its ids (fairseq-generate's, the hub's) is not one."""
        if self.dataset is None or "id" in sample:
            return None, None
        batch = self.collated
        if batch is None:  # e.g. collated in a worker process: the rows are unknown
            raise ConfigError("--target-context: the task did not collate the batch to decode, so its lines' "
                              "previous translations are unknown (use --num-workers 0); or translate documents "
                              "with fairseq-ctx-translate (fairseq_ctx.translate)")
        self.collated = None
        src = sample["net_input"]["src_tokens"]
        if src.shape != batch["net_input"]["src_tokens"].shape or \
                not torch.equal(src.cpu(), batch["net_input"]["src_tokens"]):
            raise ConfigError("--target-context: the batch to decode is not the one the task built last, so its "
                              "lines' previous translations are unknown; translate documents with "
                              "fairseq-ctx-translate (fairseq_ctx.translate) instead")
        return self.dataset.translations, batch["id"].tolist()

    def decode(self, generator, sample, prefix_tokens, run):
        """Hypotheses of one batch: ``run(prefix_tokens)`` decodes it.  A
        batch of the buffer decoded round by round goes through
        :func:`decode_rows`; a 2-to-2 model's outputs keep their last
        sentence (:meth:`keep_last_sentence`)."""
        translations, ids = (None, None) if prefix_tokens is not None else self._rows(sample)
        if translations is not None:
            before = len(translations.cut)
            hypos = decode_rows(translations, ids, generator, sample, self._cutting(sample, run))
            if len(translations.cut) > before:  # fairseq-interactive has no end of run to count them at
                logger.warning(cut_warning(len(translations.cut) - before, len(ids)) + " (in this batch)")
        else:
            hypos = self._cutting(sample, run)(prefix_tokens)
        return hypos

    def _cutting(self, sample, run):
        """``run`` whose hypotheses keep their last sentence (2-to-2 models),
        before they are recorded as translations."""
        if not self.setup.target_context:
            return run

        def cut(prefix):
            hypos = run(prefix)
            self.keep_last_sentence(sample, hypos)
            return hypos
        return cut

    def keep_last_sentence(self, sample, hypos):
        """2-to-2 outputs: every hypothesis keeps what follows its last
        separator (tokens and positional scores; its ``score`` stays that of
        the whole output), and ``sample["target"]`` (which fairseq-generate
        prints and scores against) is cut the same way, in place."""
        tgt = self.setup.tgt_dict
        sep, pad, eos = self.setup.tgt_sep, tgt.pad(), tgt.eos()
        flat = [h for beam in hypos for h in beam]
        if flat:
            # where each hypothesis's last sentence starts (0: no separator),
            # read from the device once for the batch (a sync on a GPU)
            tokens = torch.nn.utils.rnn.pad_sequence([h["tokens"] for h in flat], batch_first=True,
                                                     padding_value=-1)  # N x T; -1: no symbol, not even sep
            after = torch.arange(1, tokens.size(1) + 1, device=tokens.device)
            starts = (tokens.eq(sep) * after).amax(dim=1).tolist() if tokens.size(1) else [0] * len(flat)
            for h, cut in zip(flat, starts):
                if cut:
                    h["tokens"] = h["tokens"][cut:]
                    h["positional_scores"] = h["positional_scores"][cut:]
                    alignment = h.get("alignment")  # --print-alignment: of the kept tokens only
                    if isinstance(alignment, list) and alignment:
                        h["alignment"] = ([(s, t - cut) for s, t in alignment if t >= cut]
                                          if isinstance(alignment[0], tuple) else alignment[cut:])
        if sample.get("target") is not None:
            target, _, _, _ = split_concatenated(sample["target"], pad, eos, sep,
                                                 left_pad=self.setup.left_pad_target)
            sample["target"] = target
