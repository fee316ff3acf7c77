"""Per paper claim: does the study support it at this scale, refute it, or
can it not tell?  The rules are fixed here before any context family had its
third seed (2026-11-28), so the seeds still to come cannot shape them; they
read the per-seed records of ``benchmarks/study-bible-budget.json`` and
nothing else.

A claim is one of three kinds.

* **BLEU against a baseline** (every paper's main claim: the architecture
  translates better than the Transformer; read also against the
  capacity-matched FFN-768 model, so that a gain bought by parameters alone
  is not credited to the architecture; GRET against its control only).
  Per seed the paired bootstrap delta and its p-value (``rec["vs"]``).
  *Supports*: ahead in every seed, and p < 0.05 in a majority of them.
  *Refutes*: the mean delta over seeds is not above zero and no seed is
  significantly ahead (no gain at this scale, where the papers report
  +0.4 to +1.5 BLEU).  *Cannot tell*: anything between.
* **Relies on its context** (Voita et al.: shuffled context costs BLEU):
  the same rule on BLEU with the true context against shuffled context
  (``shuffled_delta_bleu``, ``shuffled_p_value``; the sign turned so that
  "ahead" is the true context ahead).
* **Decides pronouns with its context** (Voita et al.'s title: the model
  learns anaphora resolution): the balanced context test, true context
  against none, pooled over seeds.  Per seed, ``b`` items are right only
  with the true context (``usage.attribution.context_decided.items``) and
  ``c`` right only without it (``b`` minus the difference in items right).
  *Supports*: b > c with an exact one-sided sign test p < 0.05 and a gain
  (b - c)/N of at least 5 points.  *Refutes*: the one-sided 95% upper
  bound (Clopper-Pearson) of b/N, which bounds the gain from above, is
  below 5 points: the context decides fewer than one item in twenty.
  *Cannot tell*: anything between.

A claim waits while its family has fewer seeds than the study plans (three;
one for GRET, whose verdict then rests on one seed, and says so).
"""
from dataclasses import dataclass
from math import comb
from typing import Dict, List, Optional, Tuple

from fairseq_ctx.study.report import family

SUPPORTS, REFUTES, CANNOT_TELL = "supports", "refutes", "cannot tell"
ALPHA = 0.05
PRONOUN_GAIN = 0.05  # the smallest gain on the context test called a use of context: 5 points


@dataclass(frozen=True)
class Claim:
    paper: str
    text: str
    family: str
    kind: str                      # "bleu", "shuffled" or "pronouns"
    against: Optional[str] = None  # the baseline family of a "bleu" claim
    seeds: int = 3


CLAIMS = [
    Claim("Yang et al. 2019 (CSAN)", "translates better than the Transformer", "transformer_ctxsan", "bleu",
          "transformer"),
    Claim("Yang et al. 2019 (CSAN)", "... and not by its parameters alone (against FFN-768)",
          "transformer_ctxsan", "bleu", "transformer-wide"),
    Claim("Ampomah et al. 2021 (Enc-DC)", "translates better than the Transformer", "transformer_dc", "bleu",
          "transformer"),
    Claim("Ampomah et al. 2021 (Enc-DC)", "... and not by its parameters alone (against FFN-768)",
          "transformer_dc", "bleu", "transformer-wide"),
    Claim("Weng et al. 2020 (GRET)", "translates better than the Transformer trained as long from the same start",
          "transformer_gret", "bleu", "transformer-continued", seeds=1),
    Claim("Voita et al. 2018 (context encoder)", "translates better than the Transformer", "transformer_ctxenc",
          "bleu", "transformer"),
    Claim("Voita et al. 2018 (context encoder)", "... and not by its parameters alone (against FFN-768)",
          "transformer_ctxenc", "bleu", "transformer-wide"),
    Claim("Voita et al. 2018 (context encoder)", "relies on its context: shuffled context costs BLEU",
          "transformer_ctxenc", "shuffled"),
    Claim("Voita et al. 2018 (context encoder)", "decides pronouns with its context (the balanced context test)",
          "transformer_ctxenc", "pronouns"),
]


def sign_test(b: int, c: int) -> float:
    """One-sided exact sign test: P(X >= b) for X ~ Binomial(b + c, 1/2)."""
    n = b + c
    return sum(comb(n, k) for k in range(b, n + 1)) / 2 ** n if n else 1.0


def upper_bound(k: int, n: int, alpha: float = ALPHA) -> float:
    """One-sided (1 - alpha) Clopper-Pearson upper bound of a binomial
    proportion: the p at which P(X <= k | n, p) = alpha (1 when k = n)."""
    if k >= n:
        return 1.0

    def cdf(p: float) -> float:
        return sum(comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k + 1))

    lo, hi = k / n, 1.0
    for _ in range(60):  # cdf falls as p grows; bisection to far below the printed precision
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) > alpha else (lo, mid)
    return hi


def _paired(pairs: List[Tuple[float, float]], what: str) -> Tuple[str, str]:
    """The BLEU rule on per-seed (delta, p-value) pairs, delta > 0 = ahead."""
    n = len(pairs)
    mean = sum(d for d, _ in pairs) / n
    ahead = sum(1 for d, _ in pairs if d > 0)
    sig_ahead = sum(1 for d, p in pairs if d > 0 and p < ALPHA)
    sig_behind = sum(1 for d, p in pairs if d < 0 and p < ALPHA)
    why = (f"{mean:+.2f} BLEU {what} on average, ahead in {ahead}/{n} seeds, p < 0.05 ahead in {sig_ahead}, "
           f"behind in {sig_behind}")
    if ahead == n and 2 * sig_ahead > n:
        return SUPPORTS, why
    if mean <= 0 and sig_ahead == 0:
        return REFUTES, why
    return CANNOT_TELL, why


def _pronouns(recs: List[Dict]) -> Tuple[str, str]:
    b = c = total = 0
    for rec in recs:
        usage = rec["usage"]
        test = usage["context_test"]
        groups = test["true"]["groups"]
        gained = round((test["true"]["accuracy"] - test["none"]["accuracy"]) * groups)
        decided = usage["attribution"]["context_decided"]["items"]
        b, c, total = b + decided, c + decided - gained, total + groups
    gain, bound, p = (b - c) / total, upper_bound(b, total), sign_test(b, c)
    why = (f"{b} of {total} items right only with the true context, {c} only without "
           f"(gain {100 * gain:+.1f} points, sign test p = {p:.3f}; at most {100 * bound:.1f}% decided by it, "
           f"95% bound)")
    if b > c and p < ALPHA and gain >= PRONOUN_GAIN:
        return SUPPORTS, why
    if bound < PRONOUN_GAIN:
        return REFUTES, why
    return CANNOT_TELL, why


def judge(claim: Claim, records: List[Dict]) -> Dict:
    """One claim's verdict from the evaluated records of its family."""
    recs = sorted((r for r in records if family(r["name"]) == claim.family and r.get("bleu") is not None),
                  key=lambda r: r["seed"])
    out = {"paper": claim.paper, "claim": claim.text, "family": claim.family, "seeds": len(recs)}
    if len(recs) < claim.seeds:
        return {**out, "verdict": f"waits ({len(recs)} of {claim.seeds} seed{'s' * (claim.seeds > 1)})", "why": ""}
    if claim.kind == "bleu":
        missing = [r["name"] for r in recs if claim.against not in r.get("vs", {})]
        if missing:
            return {**out, "verdict": f"waits (no pairing with {claim.against}: {', '.join(missing)})", "why": ""}
        verdict, why = _paired([(r["vs"][claim.against]["delta_bleu"], r["vs"][claim.against]["p_value"])
                                for r in recs], f"against {claim.against}")
    elif claim.kind == "shuffled":
        verdict, why = _paired([(-r["shuffled_delta_bleu"], r["shuffled_p_value"]) for r in recs],
                               "with the true context against shuffled")
    else:
        missing = [r["name"] for r in recs if "attribution" not in r.get("usage", {})]
        if missing:
            return {**out, "verdict": f"waits (no context test attribution: {', '.join(missing)})", "why": ""}
        verdict, why = _pronouns(recs)
    if claim.seeds == 1:
        why += " (one seed: seed noise not measured)"
    return {**out, "verdict": verdict, "why": why}


def verdicts(records: List[Dict]) -> List[Dict]:
    return [judge(claim, records) for claim in CLAIMS]


def markdown(records: List[Dict]) -> str:
    lines = ["| paper | claim | verdict | why |", "|---|---|---|---|"]
    for v in verdicts(records):
        lines.append(f"| {v['paper']} | {v['claim']} | {v['verdict']} | {v['why']} |")
    return "\n".join(lines)
