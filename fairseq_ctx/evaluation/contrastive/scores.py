"""Scores made elsewhere (any system, no model): read one score per
candidate line (``--scores-in``) and write them back (``--scores-out``) so a
report can be recomputed from exactly the scores it was made from.
"""
import math
from typing import List, Sequence

import numpy as np

from fairseq_ctx.evaluation.contrastive.groups import ContrastiveDataError, Group
from fairseq_ctx.evaluation.contrastive.readers import read_lines

def read_scores(path, groups: Sequence[Group], maximize: bool = False) -> List[np.ndarray]:
    """Per group, the scores of its candidates from a file with one score per
    candidate line, in the order of the test set's text files (the order all
    three official scripts read).  The file holds losses (lower is better, the
    official scripts' default) unless ``maximize``; returned as log-prob-like
    values, higher is better, as :func:`evaluate` takes them (negation is
    exact, so nothing is lost)."""
    lines = read_lines(path)
    total = sum(len(g.candidates) for g in groups)
    if len(lines) != total:
        raise ContrastiveDataError(f"{path}: {len(lines)} lines, but the test set has {total} candidates "
                                   f"in {len(groups)} groups (one score per candidate line)")
    values = np.empty(total, dtype=np.float64)
    for i, line in enumerate(lines):
        try:
            values[i] = float(line.strip())
        except ValueError:
            raise ContrastiveDataError(f"{path}:{i + 1}: not a number: {line.strip()[:40]!r}") from None
        if math.isnan(values[i]):
            raise ContrastiveDataError(f"{path}:{i + 1}: nan is not a score")
    if not maximize:
        values = -values
    bounds = np.cumsum([0] + [len(g.candidates) for g in groups])
    return [values[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def write_scores(path, scores: Sequence[Sequence[float]], maximize: bool = False):
    """One score per candidate line: losses (the negated log-probabilities)
    unless ``maximize``; ``repr`` keeps every bit, so :func:`read_scores`
    gives back exactly the scores the report was computed from."""
    sign = 1.0 if maximize else -1.0
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(f"{sign * float(s)!r}\n" for sc in scores for s in sc)
