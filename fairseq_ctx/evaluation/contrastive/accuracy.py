"""Accuracy of scores on a contrastive test set: a group is right when its
true candidate scores best; ties follow ``--ties`` (each suite's official
rule by default); results broken down by the groups' metadata.
"""
from collections import defaultdict
from typing import Any, Dict, Sequence

import numpy as np

from fairseq_ctx.evaluation.contrastive.groups import TIE_MODES, TIE_RULES, Group

def group_credit(scores: Sequence[float], true_index: int, ties: str = "wrong",
                 tolerance: float = 0.0, rule: str = "strict"):
    """Credit of one group (higher score = better) and whether the true
    candidate tied for the best with another one: ``(credit, tied)``.

    ``ties="official"`` applies ``rule``: ``first`` (Voita's ``np.argmin``
    over losses: the first of the candidates tied for the best wins, so the
    group is right when that one is the true candidate, which also makes a
    group that lists the true translation twice right when its first copy is
    ``true_ind``) or ``strict`` (ContraPro, Bawden: the true candidate must
    beat every other one, a tie is wrong)."""
    if ties not in TIE_MODES:
        raise ValueError(f"--ties must be one of {TIE_MODES}, got {ties!r}")
    if rule not in TIE_RULES:
        raise ValueError(f"tie rule must be one of {TIE_RULES}, got {rule!r}")
    scores = np.asarray(scores, dtype=np.float64)
    true = scores[true_index]
    best = scores >= scores.max() - tolerance  # the candidates tied for the best
    tied = bool(best[true_index]) and int(best.sum()) > 1
    if ties == "official" and rule == "first":
        return float(int(np.argmax(best)) == true_index), tied
    others = np.delete(scores, true_index)
    if (others > true + tolerance).any():
        return 0.0, tied
    n_tied = int((others >= true - tolerance).sum())
    if n_tied == 0:
        return 1.0, False
    return {"official": 0.0, "wrong": 0.0, "right": 1.0, "half": 1.0 / (n_tied + 1)}[ties], True


def evaluate(groups: Sequence[Group], scores: Sequence[Sequence[float]], ties: str = "official",
             tolerance: float = 0.0) -> Dict[str, Any]:
    """Accuracy overall and per value of every ``meta`` key of the groups,
    and, when the groups belong to blocks, how many blocks are entirely
    right.  ``scores[g][c]``: score of candidate ``c`` of group ``g``, higher
    is better."""
    if len(scores) != len(groups):
        raise ValueError(f"{len(scores)} score lists for {len(groups)} groups")

    def bucket():
        return {"groups": 0, "correct": 0.0, "tied": 0}

    total = bucket()
    by: Dict[str, Dict[str, Dict]] = defaultdict(lambda: defaultdict(bucket))
    blocks: Dict[str, bool] = {}
    for g, s in zip(groups, scores):
        if len(s) != len(g.candidates):
            raise ValueError(f"{g.where}: {len(s)} scores for {len(g.candidates)} candidates")
        credit, tied = group_credit(s, g.true_index, ties, tolerance, g.rule)
        for b in [total] + [by[k][str(v)] for k, v in g.meta.items()]:
            b["groups"] += 1
            b["correct"] += credit
            b["tied"] += int(tied)
        if g.block is not None:
            blocks[g.block] = blocks.get(g.block, True) and credit == 1.0

    def finish(b):
        b["accuracy"] = b["correct"] / b["groups"] if b["groups"] else float("nan")
        return b

    def order(v):
        return (0, int(v), "") if v.lstrip("-").isdigit() else (1, 0, v)

    res = {**finish(total), "ties": ties, "tie_tolerance": tolerance,
           "by": {k: {v: finish(b) for v, b in sorted(d.items(), key=lambda kv: order(kv[0]))}
                  for k, d in by.items()}}
    if blocks:
        res["blocks"] = {"total": len(blocks), "all_correct": int(sum(blocks.values()))}
    return res


def format_results(res: Dict[str, Any]) -> str:
    def line(b):
        correct = f"{b['correct']:.2f}".rstrip("0").rstrip(".")  # fractional with --ties half
        return (f"{b['accuracy']:.4f} ({correct}/{b['groups']} groups, "
                f"{b['tied']} with the true candidate tied for best)")

    rule = (" (each suite's own script: Voita's argmin gives a tie to the first tied candidate, "
            "ContraPro and Bawden count it wrong)" if res["ties"] == "official" else "")
    out = [f"accuracy: {line(res)}; ties count as {res['ties']}{rule}"]
    for key, values in res["by"].items():
        out.append(f"by {key}:")
        width = max(len(v) for v in values)
        for v, b in values.items():
            out.append(f"  {key} {v:<{width}}  {line(b)}")
    if "blocks" in res:
        out.append(f"blocks entirely right: {res['blocks']['all_correct']}/{res['blocks']['total']}")
    return "\n".join(out)
