"""BLEU by source-sentence length, as the papers' length figures.

Ampomah et al. (DC, Section 7.4, Fig. 5) group the WMT14 En-De test set by
source length in subword tokens into <10, 10-20, 20-30, 30-40, 40-50 and >50;
Yang et al. (ctxsan, Fig. 5) into 10 groups following Tu et al. (2016); Weng
et al. (GRET, Fig. 5) into 4 groups, with no edges given.  The default edges
here, ``(10, 20, 30, 40, 50)``, give the DC paper's six groups.  Its labels
do not say which side of each edge is closed; here buckets are closed on the
right: ``<=10``, ``11-20``, ..., ``41-50``, ``>50`` (an empty source falls
in the first).  Each bucket's score is corpus BLEU over that bucket's
sentences (by default detokenized sacreBLEU, :func:`~.bleu.detok_bleu`).

The length of a source line is its number of whitespace-separated tokens:
pass the BPE/sentencepiece-segmented source to count subword tokens as the
DC paper does, or the tokenized source to count words.
"""
import bisect
import math
from typing import Callable, Dict, List, Mapping, Optional, Sequence

from .bleu import EvaluationError, detok_bleu

__all__ = ["DEFAULT_EDGES", "parse_edges", "check_edges", "bucket_labels", "assign_buckets", "bleu_by_length",
           "format_length_table", "plot_length_buckets"]

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
    """Labels of the ``len(edges) + 1`` buckets: ``<=e0``, ``e0+1-e1``, ..., ``>eK``."""
    check_edges(edges)
    labels = [f"<={edges[0]}"]
    for lo, hi in zip(edges, edges[1:]):
        labels.append(str(hi) if lo + 1 == hi else f"{lo + 1}-{hi}")
    labels.append(f">{edges[-1]}")
    return labels


def assign_buckets(lengths: Sequence[int], edges: Sequence[int] = DEFAULT_EDGES) -> List[int]:
    """Bucket index of each length: 0 for ``length <= edges[0]``, i for
    ``edges[i-1] < length <= edges[i]``, ``len(edges)`` beyond the last edge."""
    check_edges(edges)
    return [bisect.bisect_left(edges, n) for n in lengths]


def bleu_by_length(srcs: Sequence[str], hyps_by_system: Mapping[str, Sequence[str]], refs: Sequence[str],
                   edges: Sequence[int] = DEFAULT_EDGES,
                   score_fn: Optional[Callable[[Sequence[str], Sequence[str]], float]] = None) -> Dict:
    """Corpus BLEU of each system within each source-length bucket.

    ``srcs``: source lines (length = whitespace tokens); ``hyps_by_system``:
    name -> hypotheses aligned with ``refs``; ``score_fn(hyps, refs) ->
    float`` (default: detokenized sacreBLEU).  Returns a JSON-ready dict::

        {"edges": [...], "unit": "...", "systems": [names],
         "buckets": [{"label": "<=10", "min": 0, "max": 10, "n": 123,
                      "bleu": {name: score or None (empty bucket)}}, ...]}
    """
    if score_fn is None:
        def score_fn(h, r):
            return detok_bleu(h, r)[0]
    if len(srcs) != len(refs):
        raise EvaluationError(f"{len(srcs)} source lines, but {len(refs)} references")
    for name, hyps in hyps_by_system.items():
        if len(hyps) != len(refs):
            raise EvaluationError(f"{len(hyps)} hypotheses of {name!r}, but {len(refs)} references")
    edges = [int(e) for e in edges]
    idx = assign_buckets([len(s.split()) for s in srcs], edges)
    labels = bucket_labels(edges)
    bounds = [0] + [e + 1 for e in edges]
    buckets = []
    for b, label in enumerate(labels):
        members = [i for i, k in enumerate(idx) if k == b]
        sub_refs = [refs[i] for i in members]
        bleu = {name: (float(score_fn([hyps[i] for i in members], sub_refs)) if members else None)
                for name, hyps in hyps_by_system.items()}
        buckets.append({"label": label, "min": bounds[b], "max": edges[b] if b < len(edges) else None,
                        "n": len(members), "bleu": bleu})
    return {"edges": edges, "unit": "whitespace-separated source tokens",
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
