"""Document-level scores: d-BLEU and BLEU by position in the document.

Documents are given as the document task reads them: one document id per
sentence (a ``{split}.{src}-{tgt}.docids`` file), a document being a run of
consecutive sentences with the same id (the rule of
:mod:`fairseq_ctx.data.context_selection`, which these functions call).

Document-level BLEU (d-BLEU)
    :func:`document_bleu`: each document's sentences joined with a space, in
    order, for hypotheses and references alike, then corpus BLEU over the
    documents (sacreBLEU, its defaults and signature): d-BLEU as Liu et al.
    2020 (mBART) and Bao et al. 2021 (G-Transformer) define it, BLEU of whole
    documents, each the concatenation of its sentences. (G-Transformer's
    code scores its model instances, documents cut into segments of at most
    its data builder's ``--max-tokens``, so on longer documents its
    published numbers are not this one's.)  It counts
    n-grams that cross sentence boundaries and computes one brevity penalty
    over whole documents, so it differs from sentence-level corpus BLEU.
    :func:`join_documents` gives the joined texts, so that the paired
    bootstrap can resample documents (:func:`~.bleu.paired_bootstrap` on them).

BLEU by document position
    :func:`bleu_by_position`: corpus BLEU of the first sentence of every
    document and of all later ones, separately: with the task's previous-
    sentence context (Voita et al. 2018) the first sentence has none, so a
    context model can use context only on the later sentences.
"""
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from fairseq_ctx.data import context_selection
from fairseq_ctx.data.context_selection import document_segments

from .bleu import EvaluationError, _check_lengths, detok_bleu, format_delta, read_lines

__all__ = ["read_docids", "document_runs", "join_documents", "document_bleu", "document_positions",
           "bleu_by_position", "format_position_table"]


def read_docids(path, n: int) -> List[str]:
    """Document ids of ``n`` sentences, one a line (the task's ``.docids``
    format); another line count is an :class:`EvaluationError` naming the file."""
    docids = read_lines(path)
    if len(docids) != n:
        raise EvaluationError(f"{path}: {len(docids)} document ids, but the reference has {n} lines; "
                              "give one document id per reference line")
    return docids


def document_runs(docids: Sequence[str]) -> List[Tuple[int, int]]:
    """``(start, end)`` of every document: runs of consecutive equal ids (an id
    that comes back after another document starts a new document), the
    task's documents (:func:`~fairseq_ctx.data.context_selection.document_segments`)."""
    segments = document_segments(list(docids))
    edges = [0, *(np.flatnonzero(np.diff(segments)) + 1).tolist(), len(segments)] if len(segments) else [0]
    return list(zip(edges[:-1], edges[1:]))


def join_documents(lines: Sequence[str], docids: Sequence[str]) -> List[str]:
    """One string per document: its lines joined with a space (empty lines
    add nothing)."""
    _check_lengths(lines, docids, "lines")
    return [" ".join(line for line in lines[a:b] if line.strip()) for a, b in document_runs(docids)]


def document_bleu(hyps: Sequence[str], refs: Sequence[str], docids: Sequence[str], tokenize: Optional[str] = None,
                  trg_lang: str = "") -> Tuple[float, str]:
    """d-BLEU (see the module docstring): ``(score, signature)`` of sacreBLEU
    on the joined documents."""
    _check_lengths(hyps, refs)
    return detok_bleu(join_documents(hyps, docids), join_documents(refs, docids), tokenize=tokenize,
                      trg_lang=trg_lang)


def document_positions(docids: Sequence[str]) -> List[int]:
    """Position of every sentence in its document (0 for the first)."""
    return context_selection.document_positions(list(docids)).tolist()


def bleu_by_position(hyps: Mapping[str, Sequence[str]], refs: Sequence[str], docids: Sequence[str],
                     score_fn: Optional[Callable[[Sequence[str], Sequence[str]], float]] = None) -> Dict:
    """Corpus BLEU of each system on the first sentences of the documents and
    on the later ones.  Returns ``{"groups": [{"label", "n", "scores": {name:
    score}}, ...]}`` (a group without sentences has ``None`` scores)."""
    _check_lengths(docids, refs, "document ids")
    score_fn = score_fn or (lambda h, r: detok_bleu(h, r)[0])
    positions = document_positions(docids)
    groups = []
    for label, member in (("first", lambda p: p == 0), ("later", lambda p: p > 0)):
        idx = [i for i, p in enumerate(positions) if member(p)]
        scores = {name: (score_fn([h[i] for i in idx], [refs[i] for i in idx]) if idx else None)
                  for name, h in hyps.items()}
        groups.append({"label": label, "n": len(idx), "scores": scores})
    return {"groups": groups, "documents": len(document_runs(docids))}


def format_position_table(result: Dict, baseline: Optional[str] = None) -> str:
    """The groups of :func:`bleu_by_position` as a text table, with each
    system's difference from ``baseline``."""
    groups = result["groups"]
    names = list(groups[0]["scores"])
    width = max([8] + [len(n) + 2 for n in names])
    head = f"{'system':<{width}}" + "".join(f"{g['label'] + ' (' + str(g['n']) + ')':>20}" for g in groups)
    lines = [head]
    for name in names:
        line = f"{name:<{width}}"
        for g in groups:
            s = g["scores"][name]
            cell = "-" if s is None else f"{s:.2f}"
            if baseline and name != baseline and s is not None and g["scores"].get(baseline) is not None:
                cell += f" ({format_delta(s - g['scores'][baseline])})"
            line += f"{cell:>20}"
        lines.append(line)
    return "\n".join(lines)
