"""BLEU by source-sentence length, as the papers' length figures.

Ampomah et al. (DC, Section 7.4, Fig. 5) group the WMT14 En-De test set by
source length in subword tokens into "<10, 10-20, 20-30, 30-40, 40-50, and
>50"; their text reads the groups as closed on the left ("fewer than ten
subword tokens", "greater than or equal to 20"), so here a bucket is
``[lo, hi)``: ``<10``, ``10-19``, ``20-29``, ``30-39``, ``40-49``, ``>=50``
(labels give the lengths each bucket holds, both ends included).  Yang et
al. (ctxsan, Fig. 5) use 10 groups following Tu et al. (2016) and Weng et
al. (GRET, Fig. 5) 4 groups; neither gives edges nor the unit.  The default
edges, ``(10, 20, 30, 40, 50)``, give DC's six groups.  Each bucket's score
is corpus BLEU over that bucket's sentences (by default detokenized
sacreBLEU, :func:`~.bleu.detok_bleu`).

A sentence's length is either given (``lengths=``; e.g. the binarized
source's sizes without ``</s>``, :func:`binarized_lengths`, which count the
subword tokens the model reads, DC's unit) or the number of
whitespace-separated tokens of its source line (pass the BPE-segmented
source to count subwords, the tokenized source to count words).
"""
import bisect
import math
from typing import Callable, Dict, List, Mapping, Optional, Sequence

from .bleu import EvaluationError, detok_bleu

__all__ = ["DEFAULT_EDGES", "parse_edges", "check_edges", "bucket_labels", "assign_buckets", "bleu_by_length",
           "binarized_lengths", "format_length_table", "plot_length_buckets"]

DEFAULT_EDGES = (10, 20, 30, 40, 50)


def parse_edges(text: str) -> List[int]:
    """``"10,20,30"`` -> ``[10, 20, 30]``; edges must be increasing positive integers."""
    try:
        edges = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise EvaluationError(f"bucket edges must be comma-separated integers, not {text!r}") from None
    check_edges(edges)
    return edges


def check_edges(edges: Sequence[int]):
    if not edges:
        raise EvaluationError("at least one bucket edge is needed")
    if any(int(e) != e or e < 1 for e in edges) or any(b <= a for a, b in zip(edges, edges[1:])):
        raise EvaluationError(f"bucket edges must be strictly increasing positive integers, not {list(edges)}")


def bucket_labels(edges: Sequence[int] = DEFAULT_EDGES) -> List[str]:
    """Labels of the ``len(edges) + 1`` buckets, closed on the left:
    ``<e0``, ``e0-(e1-1)``, ..., ``>=eK`` (a bucket holding one length is
    labelled by it)."""
    check_edges(edges)
    labels = [f"<{edges[0]}"]
    for lo, hi in zip(edges, edges[1:]):
        labels.append(str(lo) if lo + 1 == hi else f"{lo}-{hi - 1}")
    labels.append(f">={edges[-1]}")
    return labels


def assign_buckets(lengths: Sequence[int], edges: Sequence[int] = DEFAULT_EDGES) -> List[int]:
    """Bucket index of each length: 0 for ``length < edges[0]``, i for
    ``edges[i-1] <= length < edges[i]``, ``len(edges)`` from the last edge on
    (``bisect_right``: a length equal to an edge opens the next bucket, as
    DC's "greater than or equal to 20")."""
    check_edges(edges)
    return [bisect.bisect_right(edges, n) for n in lengths]


def binarized_lengths(prefix, dictionary=None) -> List[int]:
    """Source lengths in subword tokens from a fairseq-binarized split:
    ``prefix`` is the path without ``.idx``/``.bin`` (e.g.
    ``data/bin/test.en-de.en``).  fairseq-preprocess appends ``</s>`` to
    every sentence, so the sizes minus one are the tokens the model reads;
    that every sentence does end with ``</s>`` is checked (``dictionary``:
    the split's, default ``dict.<lang>.txt`` beside it), rather than assumed.
    Index i is sentence id i, the ids of fairseq-generate's lines."""
    import os

    from fairseq.data import Dictionary, data_utils

    prefix = str(prefix)
    dataset = data_utils.load_indexed_dataset(prefix, None)
    if dataset is None:
        raise EvaluationError(f"{prefix}: no binarized dataset ({prefix}.idx / .bin)")
    if dictionary is None:
        dict_path = os.path.join(os.path.dirname(prefix), f"dict.{prefix.rsplit('.', 1)[-1]}.txt")
        dictionary = Dictionary.load(dict_path) if os.path.isfile(dict_path) else Dictionary()
    eos = dictionary.eos()
    lengths = []
    for i in range(len(dataset)):
        tokens = dataset[i]
        if len(tokens) == 0 or int(tokens[-1]) != eos:
            raise EvaluationError(f"{prefix}: sentence {i} does not end with </s> (index {eos}); "
                                  "its size is not its length plus one")
        lengths.append(len(tokens) - 1)
    return lengths


def bleu_by_length(srcs: Optional[Sequence[str]], hyps_by_system: Mapping[str, Sequence[str]], refs: Sequence[str],
                   edges: Sequence[int] = DEFAULT_EDGES,
                   score_fn: Optional[Callable[[Sequence[str], Sequence[str]], float]] = None,
                   lengths: Optional[Sequence[int]] = None, unit: Optional[str] = None) -> Dict:
    """Corpus BLEU of each system within each source-length bucket.

    ``srcs``: source lines (length = whitespace tokens), or None with
    ``lengths`` (one source length per reference, e.g. from
    :func:`binarized_lengths`); ``unit`` names what was counted (stored in
    the result and the plot's axis); ``hyps_by_system``: name -> hypotheses
    aligned with ``refs``; ``score_fn(hyps, refs) -> float`` (default:
    detokenized sacreBLEU).  Returns a JSON-ready dict::

        {"edges": [...], "unit": "...", "groups": 6, "closed": "left", "systems": [names],
         "buckets": [{"label": "<10", "min": 0, "max": 9, "n": 123,
                      "bleu": {name: score or None (empty bucket)}}, ...]}

    (``min``/``max`` both included; ``max`` None for the last bucket).
    """
    if score_fn is None:
        def score_fn(h, r):
            return detok_bleu(h, r)[0]
    if lengths is None:
        if srcs is None:
            raise EvaluationError("bleu_by_length needs the source lines or their lengths")
        if len(srcs) != len(refs):
            raise EvaluationError(f"{len(srcs)} source lines, but {len(refs)} references")
        lengths = [len(s.split()) for s in srcs]
        unit = unit or "whitespace-separated source tokens"
    elif len(lengths) != len(refs):
        raise EvaluationError(f"{len(lengths)} source lengths, but {len(refs)} references")
    for name, hyps in hyps_by_system.items():
        if len(hyps) != len(refs):
            raise EvaluationError(f"{len(hyps)} hypotheses of {name!r}, but {len(refs)} references")
    edges = [int(e) for e in edges]
    idx = assign_buckets(lengths, edges)
    labels = bucket_labels(edges)
    bounds = [0] + edges
    buckets = []
    for b, label in enumerate(labels):
        members = [i for i, k in enumerate(idx) if k == b]
        sub_refs = [refs[i] for i in members]
        bleu = {name: (float(score_fn([hyps[i] for i in members], sub_refs)) if members else None)
                for name, hyps in hyps_by_system.items()}
        buckets.append({"label": label, "min": bounds[b], "max": edges[b] - 1 if b < len(edges) else None,
                        "n": len(members), "bleu": bleu})
    return {"edges": edges, "unit": unit or "source tokens", "groups": len(labels), "closed": "left",
            "systems": list(hyps_by_system), "buckets": buckets}


def format_length_table(result: Mapping, baseline: Optional[str] = None) -> str:
    """A text table of :func:`bleu_by_length`'s result: one row per bucket
    (label, sentences, each system's BLEU; with ``baseline``, the others'
    differences from it in parentheses)."""
    systems = list(result["systems"])
    width = max([10] + [len(s) + 2 for s in systems])
    head = f"{'src length':<12}{'sents':>7}" + "".join(f"{s:>{width + 9 if baseline and s != baseline else width}}"
                                                       for s in systems)
    rows = [head]
    for b in result["buckets"]:
        cells = []
        for s in systems:
            v = b["bleu"][s]
            cell = "-" if v is None else f"{v:.2f}"
            if baseline and s != baseline:
                base = b["bleu"][baseline]
                delta = "" if v is None or base is None else f" ({v - base:+.2f})"
                cells.append(f"{cell + delta:>{width + 9}}")
            else:
                cells.append(f"{cell:>{width}}")
        rows.append(f"{b['label']:<12}{b['n']:>7}" + "".join(cells))
    return "\n".join(rows)


def plot_length_buckets(result: Mapping, path, baseline: Optional[str] = None, title: Optional[str] = None):
    """Write a PNG (matplotlib, Agg backend): BLEU per bucket, one line per
    system; with ``baseline``, a second panel of each system's difference
    from it (as Yang et al.'s Fig. 5).  Empty buckets are gaps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    buckets = result["buckets"]
    xs = list(range(len(buckets)))
    ticks = [f"{b['label']}\n(n={b['n']})" for b in buckets]

    def series(name):
        return [math.nan if b["bleu"][name] is None else b["bleu"][name] for b in buckets]

    panels = 2 if baseline and len(result["systems"]) > 1 else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.0 * panels, 4.2), squeeze=False)
    ax = axes[0][0]
    for name in result["systems"]:
        ax.plot(xs, series(name), marker="o", label=name,
                color="grey" if name == baseline else None, linestyle="--" if name == baseline else "-")
    ax.set_ylabel("BLEU")
    ax.set_title("BLEU by source length")
    if panels == 2:
        ax2 = axes[0][1]
        base = series(baseline)
        ax2.axhline(0.0, color="grey", linestyle="--", label=baseline)
        for name in result["systems"]:
            if name != baseline:
                ax2.plot(xs, [v - b for v, b in zip(series(name), base)], marker="o", label=name)
        ax2.set_ylabel(f"BLEU difference from {baseline}")
        ax2.set_title("difference from the baseline")
    for a in axes[0]:
        a.set_xticks(xs)
        a.set_xticklabels(ticks, fontsize=8)
        a.set_xlabel(f"source length ({result.get('unit', 'tokens')})")
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
