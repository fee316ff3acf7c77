"""Evaluation, in one area: scoring translations as the papers did, and
measuring how a model uses its context.

* :mod:`.conditions`: the contexts every analysis compares (true, none,
  shuffled, random), written once.
* :mod:`.cxmi`: CXMI and point-wise CXMI from token scores.
* :mod:`.contrastive`: contrastive test sets (Voita et al., ContraPro,
  Bawden et al.) read, scored and counted as their official scripts do;
  generated accuracy; the command ``fairseq-ctx-contrastive``.
* :mod:`.context_usage`: the command ``fairseq-ctx-context-usage`` (CXMI,
  contrastive and generated accuracy under every condition).

* :mod:`.bleu`: read hypotheses from a fairseq-generate log or a text file
  (:func:`read_hypotheses`), detokenized sacreBLEU with its signature
  (:func:`detok_bleu`), tokenized BLEU with compound splitting for En-De
  (:func:`compound_split_bleu`), paired bootstrap resampling against a
  baseline (:func:`paired_bootstrap`); chrF and TER (:func:`chrf`, :func:`ter`,
  :func:`corpus_score`) and the paired bootstrap of several metrics at once
  (:func:`paired_bootstrap_metrics`), all sacreBLEU's.
* :mod:`.document`: document-level BLEU (:func:`document_bleu`) and BLEU by
  position in the document (:func:`bleu_by_position`).
* :mod:`.length_buckets`: BLEU by source-length bucket (:func:`bleu_by_length`),
  as a table and a plot.
* :mod:`.score`: the command ``fairseq-ctx-score`` (``python3 -m fairseq_ctx.evaluation.score``).
"""
from .bleu import (
    METRICS,
    EvaluationError,
    PairedResult,
    chrf,
    compound_split,
    compound_split_bleu,
    compound_split_lines,
    corpus_score,
    detok_bleu,
    format_delta,
    is_generate_log,
    moses_tokenize,
    paired_bootstrap,
    paired_bootstrap_metrics,
    read_generate_log,
    read_hypotheses,
    read_lines,
    ter,
    tokenized_bleu,
)
from .document import (
    bleu_by_position,
    document_bleu,
    document_positions,
    document_runs,
    format_position_table,
    join_documents,
    read_docids,
)
from .length_buckets import (
    DEFAULT_EDGES,
    assign_buckets,
    binarized_lengths,
    bleu_by_length,
    bucket_labels,
    format_length_table,
    plot_length_buckets,
)

__all__ = [
    "EvaluationError", "PairedResult", "read_lines", "is_generate_log", "read_generate_log", "read_hypotheses",
    "detok_bleu", "compound_split", "moses_tokenize", "compound_split_lines", "compound_split_bleu",
    "tokenized_bleu", "paired_bootstrap", "DEFAULT_EDGES", "bucket_labels", "assign_buckets", "binarized_lengths",
    "bleu_by_length", "format_length_table", "plot_length_buckets", "METRICS", "chrf", "ter", "corpus_score",
    "format_delta", "paired_bootstrap_metrics", "read_docids", "document_runs", "join_documents", "document_bleu",
    "document_positions", "bleu_by_position", "format_position_table",
]
