"""Scoring translations as the papers did.

* :mod:`.bleu`: read hypotheses from a fairseq-generate log or a text file
  (:func:`read_hypotheses`), detokenized sacreBLEU with its signature
  (:func:`detok_bleu`), tokenized BLEU with compound splitting for En-De
  (:func:`compound_split_bleu`), paired bootstrap resampling against a
  baseline (:func:`paired_bootstrap`).
* :mod:`.length_buckets`: BLEU by source-length bucket (:func:`bleu_by_length`),
  as a table and a plot.
* :mod:`.score`: the command ``python3 -m fairseq_ctx.evaluation.score``.
"""
from .bleu import (
    EvaluationError,
    PairedResult,
    compound_split,
    compound_split_bleu,
    compound_split_lines,
    detok_bleu,
    is_generate_log,
    moses_tokenize,
    paired_bootstrap,
    read_generate_log,
    read_hypotheses,
    read_lines,
    tokenized_bleu,
)
from .length_buckets import (
    DEFAULT_EDGES,
    assign_buckets,
    bleu_by_length,
    bucket_labels,
    format_length_table,
    plot_length_buckets,
)

__all__ = [
    "EvaluationError", "PairedResult", "read_lines", "is_generate_log", "read_generate_log", "read_hypotheses",
    "detok_bleu", "compound_split", "moses_tokenize", "compound_split_lines", "compound_split_bleu",
    "tokenized_bleu", "paired_bootstrap", "DEFAULT_EDGES", "bucket_labels", "assign_buckets", "bleu_by_length",
    "format_length_table", "plot_length_buckets",
]
