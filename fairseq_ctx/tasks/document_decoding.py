"""Decoding documents: fairseq-interactive's document memory and the
round-by-round decoding of 2-to-2 models, in one object that the document
task owns (``task.documents``) and the hub uses too.

fairseq-interactive hands the task one buffer of input lines at a time
(``build_dataset_for_inference``) and keeps only ``src_tokens`` and
``src_lengths`` of each batch.  So :class:`DocumentDecoding`:

* remembers the last ``--context-size`` lines of the current document
  across buffers (an empty line starts a new document and is not
  translated), so that the output does not depend on ``--buffer-size``;
* glues a buffer's context to the source (``S-`` lines show ``context
  <sep> source``), since a separate context would not survive
  fairseq-interactive's batch; :meth:`unglue` splits it off again for a
  model that takes it separately;
* with ``--target-context`` (a 2-to-2 model) decodes round by round: the
  buffer's dataset batches a line only after the lines before it in its
  document (``rounds``), and :meth:`decode` forces each row's previous
  translations as the decoder's prefix and records the best hypotheses
  (:class:`~fairseq_ctx.data.document_context_dataset.PreviousTranslations`),
  carrying the remembered lines' translations over to the next buffer.
  The rows of a batch are those of the batch the dataset collated last
  (fairseq collates each batch just before decoding it); a batch that is
  not it stops rather than decode with another sentence's context.

The hub decodes its own documents the same way, with nothing remembered
between its calls: it builds the dataset and the translations with
:meth:`translations`, and decodes them inside :meth:`decoding`.
"""
import contextlib
from typing import List, Optional, Sequence

import numpy as np
import torch

from fairseq_ctx.data.context_input import sentence_dataset
from fairseq_ctx.data.document_context_dataset import (
    PreviousTranslations,
    compute_context_index,
    document_positions,
    generator_max_len,
    split_concatenated,
)
from fairseq_ctx.errors import ConfigError


class DocumentDecoding(object):
    """The document memory and round-by-round decoding of a document task
    (see the module docstring)."""

    def __init__(self, task):
        self.task = task
        self.reset()
        # the dataset whose batches are decoded with previous translations
        self.dataset = None
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
                     sources: Sequence[torch.Tensor], slots: Optional[np.ndarray] = None) -> PreviousTranslations:
        """The target context of ``sources``: row ``i`` of ``index`` points
        into ``pool`` (translations, ``None`` = none yet); ``slots[i]``: the
        pool position item ``i``'s own translation fills (None: the pool is
        fixed).  Prefixes are cut to the task's target limit (and the
        models', when batches are filtered), leaving room for the sentence."""
        tgt = self.task.target_dictionary
        return PreviousTranslations(index, list(pool), self.task.tgt_sep, tgt.eos(), tgt.pad(), slots=slots,
                                    max_tokens=self.task.cfg.max_target_positions,
                                    reserve=np.array([len(t) for t in sources], dtype=np.int64))

    def buffer_dataset(self, src_tokens, src_lengths, constraints=None):
        """fairseq-interactive: the dataset of one buffer of input lines, in
        input order, with context from this buffer and the remembered lines
        of the previous ones."""
        cfg = self.task.cfg
        if cfg.context_mode != "previous" or cfg.shuffle_context:
            raise ConfigError("interactive translation supports only --context-mode previous "
                              "without --shuffle-context")
        eos, unk, sep = self.task.source_dictionary.eos(), self.task.source_dictionary.unk(), self.task.sep
        lines = []
        for t in src_tokens:
            t = t.clone()
            body = t[:-1]
            body[(body == eos) | (body == sep)] = unk  # keep the glued layout unambiguous
            lines.append(t)
        empty = np.array([len(t) <= 1 for t in lines], dtype=bool)
        n_history = len(self.history)
        pool = list(self.history) + lines
        docids, doc = [0] * n_history, 0
        for is_empty in empty:
            # an empty line is a document of its own and starts a new one
            doc += int(is_empty)
            docids.append(doc)
            doc += int(is_empty)
        index = compute_context_index(docids, cfg.context_size, "previous")[n_history:]
        last_doc = docids[-1] if not empty[-1] else None
        tail = [j for j, d in enumerate(docids) if d == last_doc]
        tail = tail[-cfg.context_size:] if cfg.context_size else []
        translations = rounds = None
        if self.task.glues_target_context:
            # the target context is the translations of the context lines: of the
            # remembered lines (decoded with the previous buffer, which is done by
            # now) and of this buffer's earlier lines (filled in as they are
            # decoded, round by round: see decode)
            translations = self.translations(index, self._remembered_translations() + [None] * len(lines), lines,
                                             slots=n_history + np.arange(len(lines)))
            rounds = document_positions(docids[n_history:])
            self.target_tail = (translations, tail)
        self.history = [pool[j] for j in tail]
        self.glued = self.task.context_input == "separate"
        mode = "none" if self.task.context_input == "none" else "concat"
        dataset = sentence_dataset(self.task, lines, mode, index, pool, shuffle=True, constraints=constraints,
                                   skip=empty, rounds=rounds, translations=translations)
        self.dataset = dataset if translations is not None else None
        return dataset

    def _remembered_translations(self) -> List[Optional[torch.Tensor]]:
        """Translations of the remembered lines (``self.history``), from the
        previous buffer's :class:`PreviousTranslations`."""
        if self.target_tail is None:
            return [None] * len(self.history)
        translations, positions = self.target_tail
        return [translations.pool[j] for j in positions]

    def unglue(self, sample: dict) -> dict:
        """A glued interactive batch with its context split off the source
        into ``ctx_tokens``/``ctx_lengths``."""
        d = self.task.source_dictionary
        net_input = sample["net_input"]
        src, src_lengths, ctx, ctx_lengths = split_concatenated(
            net_input["src_tokens"], d.pad(), d.eos(), self.task.sep, left_pad=self.task.cfg.left_pad_source)
        return dict(sample, net_input=dict(net_input, src_tokens=src, src_lengths=src_lengths,
                                           ctx_tokens=ctx, ctx_lengths=ctx_lengths))

    # ----------------------------------------------------------- decoding
    @contextlib.contextmanager
    def decoding(self, dataset):
        """Decode the batches of ``dataset`` (which carries its
        ``translations``) round by round while in this block; the
        interactive state is back as it was afterwards."""
        saved, self.dataset = self.dataset, dataset if getattr(dataset, "translations", None) is not None else None
        try:
            yield
        finally:
            self.dataset = saved

    def _rows(self, sample):
        """(PreviousTranslations, dataset ids of the rows) of a batch of the
        dataset decoded round by round, else (None, None)."""
        dataset = self.dataset
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

    def decode(self, generator, sample, prefix_tokens, run):
        """Hypotheses of one batch: ``run(prefix_tokens)`` decodes it.  A
        batch of the dataset decoded round by round gets its rows' previous
        translations as the forced prefix, and its best hypotheses become
        the target context of the following lines; a 2-to-2 model's outputs
        keep their last sentence (:meth:`keep_last_sentence`)."""
        translations, ids = (None, None) if prefix_tokens is not None else self._rows(sample)
        if translations is not None:
            src = sample["net_input"]["src_tokens"]
            prefix_tokens = translations.prefix_tokens(ids, device=src.device,
                                                       max_len=generator_max_len(generator, src))
        hypos = run(prefix_tokens)
        if self.task.glues_target_context:
            self.keep_last_sentence(sample, hypos)
        if translations is not None:
            translations.record(ids, hypos)
        return hypos

    def keep_last_sentence(self, sample, hypos):
        """2-to-2 outputs: every hypothesis keeps what follows its last
        separator (tokens and positional scores; its ``score`` stays that of
        the whole output), and ``sample["target"]`` (which fairseq-generate
        prints and scores against) is cut the same way, in place."""
        tgt = self.task.target_dictionary
        sep, pad, eos = self.task.tgt_sep, tgt.pad(), tgt.eos()
        for beam in hypos:
            for h in beam:
                seps = h["tokens"].eq(sep).nonzero()
                if len(seps):
                    cut = int(seps[-1]) + 1
                    h["tokens"] = h["tokens"][cut:]
                    h["positional_scores"] = h["positional_scores"][cut:]
        if sample.get("target") is not None:
            target, _, _, _ = split_concatenated(sample["target"], pad, eos, sep,
                                                 left_pad=self.task.cfg.left_pad_target)
            sample["target"] = target
