"""Conditional cross-mutual information (CXMI) of a model's context use.

Fernandes, Yin, Neubig and Martins (ACL 2021), "Measuring and Increasing
Context Usage in Context-Aware Machine Translation", Eq. 2-3: with a model
q scoring the reference Y of source X with context C and without it,

    CXMI(C -> Y | X) = H_q(Y | X) - H_q(Y | X, C)
                     ~ -1/N sum_i log q(y_i | x_i) + 1/N sum_i log q(y_i | x_i, c_i)

estimated on a corpus. The headline estimate here is the mean over the
corpus's reference tokens (every token weighs the same), in nats and in
bits. The authors' script (neulab/contextual-mt ``docmt_cxmi.py``) prints
another one: the mean over sentences of each sentence's mean over its
tokens (fairseq's ``SequenceScorer`` ``score``), in nats; it is reported
beside (``cxmi_sentence_mean_nats``), and the two differ when sentences of
different lengths gain differently. (Eq. 3 as printed averages whole
sentences' log-probabilities over sentences: the per-sentence sums, in the
per-sentence part of the report.) Point-wise CXMI
(P-CXMI, Fernandes et al. ACL 2023, "When Does Translation Require
Context?", Eq. 3) is the per-token difference
``log q(y_t | y_<t, x, c) - log q(y_t | y_<t, x)``: which words gain from
the context.

The "without" side need not be no context: against a shuffled or a random
context the same difference says how much the *true* context helps beyond
any context (a model that only uses context as noise or a length signal
scores about zero there).

Intervals: a bootstrap over sentences (resampling whole sentences with their
tokens, the unit the test set samples), percentile 95% interval.
"""
import math
from typing import Dict, List, Sequence

import numpy as np

LN2 = math.log(2)


def _deltas(with_context: Sequence[np.ndarray], without: Sequence[np.ndarray]) -> List[np.ndarray]:
    if len(with_context) != len(without):
        raise ValueError(f"{len(with_context)} sentences scored with context, {len(without)} without")
    out = []
    for i, (a, b) in enumerate(zip(with_context, without)):
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if a.shape != b.shape:
            raise ValueError(f"sentence {i}: {a.size} token scores with context, {b.size} without")
        out.append(a - b)
    return out


def bootstrap_interval(sums: np.ndarray, counts: np.ndarray, samples: int = 1000, seed: int = 1,
                       level: float = 0.95):
    """Percentile interval of ``sum(sums) / sum(counts)`` over ``samples``
    resamples of the sentences (with replacement)."""
    rng = np.random.default_rng(seed)
    n = len(sums)
    picks = rng.integers(0, n, size=(samples, n))
    stats = sums[picks].sum(axis=1) / counts[picks].sum(axis=1)
    lo, hi = np.quantile(stats, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


def cxmi(with_context: Sequence[np.ndarray], without: Sequence[np.ndarray], samples: int = 1000,
         seed: int = 1) -> Dict:
    """CXMI of log-probabilities per reference token (natural log), one
    array per sentence, with and without the context: the corpus estimate
    (mean over tokens) in nats and bits with its bootstrap interval,
    ``docmt_cxmi.py``'s estimate (mean over sentences of their token means,
    nats), and per sentence the summed and the mean difference (bits)."""
    deltas = _deltas(with_context, without)
    sums = np.array([d.sum() for d in deltas])
    counts = np.array([d.size for d in deltas], dtype=np.float64)
    if counts.sum() == 0:
        raise ValueError("no reference tokens to score")
    if not counts.all():
        raise ValueError(f"sentence {int(np.argmin(counts))}: no token scores")
    nats = float(sums.sum() / counts.sum())
    lo, hi = bootstrap_interval(sums, counts, samples, seed)
    return {"cxmi_nats": nats, "cxmi_bits": nats / LN2,
            "ci95_nats": [lo, hi], "ci95_bits": [lo / LN2, hi / LN2],
            "cxmi_sentence_mean_nats": float((sums / counts).mean()),
            "bootstrap": {"samples": samples, "seed": seed, "unit": "sentence"},
            "tokens": int(counts.sum()), "sentences": len(deltas),
            "per_sentence_bits": [{"sum": float(s / LN2), "mean": float(s / c / LN2)}
                                  for s, c in zip(sums, counts)]}


def top_pcxmi(with_context: Sequence[np.ndarray], without: Sequence[np.ndarray], k: int = 20) -> List[Dict]:
    """The ``k`` tokens with the largest P-CXMI: ``{"sentence": index,
    "position": token index, "pcxmi_bits": value}``, largest first (ties:
    earlier sentence, then earlier position)."""
    deltas = _deltas(with_context, without)
    flat = [(-float(d[t]), i, t) for i, d in enumerate(deltas) for t in range(d.size)]
    flat.sort()
    return [{"sentence": i, "position": t, "pcxmi_bits": -v / LN2} for v, i, t in flat[:k]]
