"""The attribution report of ``fairseq-ctx-context-usage --attribution``: which
items are analysed, and the JSON (and HTML page) that says, for each, which
target tokens depend on the context and which context words they rely on
(:mod:`fairseq_ctx.evaluation.attribution`).

Items are either the sentences of ``--gen-subset`` with their true context
(the ``true`` condition's rule; the reference translation analysed), the
first ``--attribution-max-items`` of them, or, with a contrastive set, its
groups: each group's source and context, its true candidate as the
translation analysed (which context words make the model prefer the correct
form over what it would say without context).

The JSON, per item: the tokens of the context sentences, source and
translation; per target token the sensitivity measures (P-CXMI and KL in
bits, whether the argmax changes, the no-context choice); the sensitive
positions; and per sensitive token the contrastive gradient x input of every
context, source and target-context token, the top context token, and the
erasure drops.  ``summary`` counts the sensitive tokens and how often the
top-attributed context token is also the one whose erasure lowers ``f``
most (agreement of the two methods).
"""
import math
from typing import Dict, List, Optional, Sequence

import numpy as np

from fairseq_ctx.evaluation.attribution import METRICS, ContextAttributor, Item, sensitive_positions


def items_from_split(task, subset: str, rule, max_items: Optional[int]) -> List[Item]:
    """The first ``max_items`` sentences of ``subset`` with the context of
    ``rule`` and their references."""
    task.load_dataset(subset, context_rule=rule)
    ds = task.dataset(subset)
    n = len(ds) if max_items is None else min(max_items, len(ds))
    tgt_index = getattr(ds, "target_index", None)
    items = []
    for i in range(n):
        pair = ds.pair[i]
        tctx = []
        if getattr(task, "glues_target_context", False) and ds.target_pool is not None:
            tctx = [ds.target_pool[j] for j in tgt_index[i] if j >= 0]
        items.append(Item(pair["source"], pair["target"], ds.context_sentences(i), tctx))
    return items


def items_from_groups(groups, task, encode_source, encode_target, context_size: int,
                      target_context_size: int) -> List[Item]:
    """One item per contrastive group: its true candidate's source, its
    newest ``context_size`` context sentences and its translation, as the
    contrastive scorer reads them (:meth:`Candidate.tokens`)."""
    items = []
    for g in groups:
        src, ctx, tgt, tctx = g.candidates[g.true_index].tokens(
            task.source_dictionary, task.target_dictionary, encode_source, encode_target, context_size,
            target_context_size)
        items.append(Item(src, tgt, ctx, tctx))
    return items


def _finite(values):
    return [None if v is None or (isinstance(v, float) and math.isnan(v)) else round(float(v), 6) for v in values]


def analyse(attributor: ContextAttributor, items: Sequence[Item], metric: str = "kl", std: float = 1.0,
            scope: str = "set", min_bits: float = 1e-4, labels: Optional[Sequence[Dict]] = None) -> Dict:
    """The report (see the module docstring) of ``items``; ``labels[i]``,
    where given, is merged into item ``i``'s entry (a contrastive group's
    name and verdicts)."""
    if metric not in METRICS:
        raise ValueError(f"--attribution-metric must be one of {METRICS}, got {metric!r}")
    src_dict, tgt_dict = attributor.src_dict, attributor.tgt_dict
    sens = attributor.sensitivity(items)
    positions, cuts = sensitive_positions([s[metric] for s in sens], std=std, scope=scope, min_bits=min_bits)
    contrasts = [s["none_argmax"][p] for s, p in zip(sens, positions)]
    attributions = attributor.attribute(items, positions, contrasts)
    erasures = attributor.erasure(items, positions, contrasts)

    def words(d, tokens, eos=True):
        ids = tokens.tolist() if eos else tokens.tolist()[:-1]
        return [d[t] for t in ids]

    out_items, n_sensitive, agree, top_on_context = [], 0, 0, 0
    for i, item in enumerate(items):
        s = sens[i]
        rows = []
        for k, a in enumerate(attributions[i]):
            t = a["position"]
            top = _top(a["context"])
            er = erasures[i]
            er_tokens = [[None if v is None else v[k] for v in sent] for sent in er["context"]]
            er_top = _top(er_tokens)
            if top is not None:
                top_on_context += 1
                agree += int(er_top is not None and er_top[:2] == top[:2])
            rows.append({
                "position": t, "token": tgt_dict[int(item.target[t])],
                "contrast": None if a["contrast"] == int(item.target[t]) else tgt_dict[a["contrast"]],
                "f": round(a["f"], 6),
                "context": [_finite(c) for c in a["context"]],
                "target_context": [_finite(c) for c in a["target_context"]],
                "source": _finite(a["source"]),
                "top": None if top is None else {"side": "context", "sentence": top[0], "token": top[1]},
                "erasure": {"context": [_finite(c) for c in er_tokens],
                            "sentences": _finite([None if v is None else v[k] for v in er["sentences"]]),
                            "top": None if er_top is None else {"sentence": er_top[0], "token": er_top[1]}},
            })
        n_sensitive += len(rows)
        out_items.append({
            "id": i, **(labels[i] if labels is not None else {}),
            "context": [{"tokens": words(src_dict, c, eos=False)} for c in item.context],
            "target_context": [{"tokens": words(tgt_dict, c, eos=False)} for c in item.target_context],
            "source": {"tokens": words(src_dict, item.source)},
            "target": {"tokens": words(tgt_dict, item.target)},
            "sensitivity": {"pcxmi_bits": _finite(s["pcxmi"]), "kl_bits": _finite(s["kl"]),
                            "argmax_changed": [bool(x) for x in s["changed"]],
                            "no_context_argmax": [tgt_dict[int(x)] for x in s["none_argmax"]]},
            "threshold_bits": round(cuts[i], 6) if math.isfinite(cuts[i]) else None,
            "sensitive": [int(p) for p in positions[i]],
            "attributions": rows,
        })
    for it in out_items:
        for part in ("context", "target_context"):
            for c in it[part]:
                c["text"] = " ".join(c["tokens"])
        for part in ("source", "target"):
            it[part]["text"] = " ".join(it[part]["tokens"])
    return {
        "metric": metric, "threshold": {"std": std, "scope": scope, "min_bits": min_bits,
                                        "value": round(cuts[0], 6) if cuts and math.isfinite(cuts[0]) else None},
        "method": "contrastive gradient x input (PECoRe CCI), erasure as the faithfulness check",
        "aggregate": attributor.aggregate,
        "reference": "Sarti et al., ICLR 2024 (PECoRe); Yin & Neubig 2022 (contrastive explanations)",
        "summary": {"items": len(items), "target_tokens": int(sum(len(s[metric]) for s in sens)),
                    "sensitive_tokens": n_sensitive,
                    "top_attribution_equals_top_erasure": agree, "with_context_tokens": top_on_context},
        "items": out_items,
    }


def _top(per_sentence) -> Optional[tuple]:
    """``(sentence, token, value)`` of the largest value (None entries skipped)."""
    best = None
    for s, values in enumerate(per_sentence):
        for j, v in enumerate(values):
            if v is not None and not (isinstance(v, float) and math.isnan(v)) and (best is None or v > best[2]):
                best = (s, j, float(v))
    return best


def cue_share(report: Dict, cues) -> Dict:
    """Share of the positive attribution mass on the context that falls on
    cue tokens, over the sensitive tokens, against the share a uniform
    attribution would give (the cues' share of the context tokens), and
    per token the excess of the former over the latter (mean, 95% bootstrap
    interval, how many tokens exceed).  ``cues(item)`` gives, for an item of the report, one bool per context
    token (its sentences' tokens in order); items without a cue are skipped."""
    shares, uniform = [], []
    for it in report["items"]:
        mask = np.asarray(cues(it), dtype=bool)
        n = sum(len(c["tokens"]) for c in it["context"])
        if len(mask) != n:
            raise ValueError(f"cue_share: item {it.get('id')} has {n} context tokens, its cue mask {len(mask)}")
        if not mask.any():
            continue
        for row in it["attributions"]:
            scores = np.array([0.0 if v is None else max(v, 0.0) for c in row["context"] for v in c])
            if scores.sum() <= 0:
                continue
            shares.append(float(scores[mask].sum() / scores.sum()))
            uniform.append(float(mask.mean()))
    excess = np.array(shares) - np.array(uniform)
    # the per-token excess over uniform: its mean with a 95% bootstrap interval over the tokens
    # (10,000 resamples, seed 1), and how many tokens put more than uniform on the cues
    ci = None
    if len(excess) > 1:
        means = np.random.default_rng(1).choice(excess, size=(10000, len(excess))).mean(axis=1)
        ci = [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))]
    return {"sensitive_tokens": len(shares), "cue_share": float(np.mean(shares)) if shares else None,
            "uniform_share": float(np.mean(uniform)) if uniform else None,
            "excess": float(excess.mean()) if len(excess) else None, "excess_ci95": ci,
            "above_uniform": int((excess > 0).sum())}
