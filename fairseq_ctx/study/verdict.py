"""Per paper claim: does the study support it at this scale, refute it, or
can it not tell?  The rules read the per-seed records of
``benchmarks/study-bible-budget.json`` and nothing else.  They were fixed on
2026-11-28 after two of three seeds of the baselines, the context encoder
and Enc-DC and one of CSAN, knowing those results, and before any third
seed of a context family.

A claim is one of three kinds.

* **Translates better** (every paper's main claim), read against the plain
  baseline (the papers' comparison) and against the capacity-matched
  FFN-768 model (a gain bought by parameters is not the architecture's);
  GRET against its control only.  Per seed the paired bootstrap delta and
  its two-sided p-value (``rec["vs"]``, tallied by
  :func:`fairseq_ctx.study.report.tally`).  *Supports*: ahead in every
  seed, with p < 0.05 in a majority of them.  *Refutes*: the one-sided 95%
  upper bound of the mean delta over seeds (Student's t, n - 1 degrees of
  freedom, from the unrounded deltas) is below ``MIN_GAIN`` BLEU, so a
  gain of the size the papers report is excluded at this scale on this
  test set (the bound holds the seeds' spread, not the test set's sampling
  error, which the seeds share); never on one seed (no spread measured).
  With three seeds the bound exceeds the largest delta (t(0.95, 2)/sqrt(3)
  = 1.69 > 2/sqrt(3)), so refuting needs every seed below ``MIN_GAIN``.
  *Supports* is decided first: a gain smaller than ``MIN_GAIN`` that is
  consistent and significant supports the claim.  *Cannot tell*: anything
  between.
* **Relies on its context** (Voita et al.: shuffled context costs BLEU):
  the same rule on BLEU with the true context against shuffled context
  (``shuffled_delta_bleu``, ``shuffled_p_value``, the sign turned so that
  "ahead" is the true context ahead).
* **Decides pronouns with its context** (Voita et al.'s title: the model
  learns anaphora resolution): the balanced context test, true context
  against none.  Per seed, ``b`` items are right only with the true context
  (``usage.attribution.context_decided.items``) and ``c`` right only
  without it (``b`` minus the difference in items right).  Pooled over the
  seeds as ``N`` = seeds x items answers: the inference is about these
  items under retraining, not about pronouns in general.  *Supports*: an
  exact one-sided sign test of b against c gives p < 0.05 and the gain
  (b - c)/N is at least ``PRONOUN_GAIN``.  *Refutes*: a one-sided 95%
  upper bound of the gain is below ``PRONOUN_GAIN``: the Clopper-Pearson
  upper bound of b/N minus the lower bound of c/N, each at 97.5%
  (Bonferroni), so that both rare and balanced changes can refute: the
  context's net gain is below one answer in twenty.
  *Cannot tell*: anything between.

A claim waits until its family has the seeds the study plans (seeds 1-3;
GRET, a control of one seed by design, seed 1, and its verdict says "one
seed") and their records hold what its rule reads (the pairing with the
baseline of the same seed, the shuffled-context BLEU, the context test's
attribution); a later seed is not counted, so a rerun cannot change a
majority.
"""
from dataclasses import dataclass
from math import sqrt
from statistics import mean, stdev
from typing import Dict, List, Optional, Tuple

from fairseq_ctx.study.report import ALPHA, family, tally
from fairseq_ctx.study.runs import SEEDS
from fairseq_ctx.study.train import StudyError

MIN_GAIN = 0.4      # BLEU: about the smallest gain the papers report for the configurations studied
PRONOUN_GAIN = 0.05  # the smallest gain on the context test called a use of context: 5 points
SUPPORTS, REFUTES, CANNOT_TELL = "supports", "refutes", "cannot tell"


@dataclass(frozen=True)
class Claim:
    paper: str
    text: str
    family: str
    kind: str                      # "bleu", "shuffled" or "pronouns"
    against: Optional[str] = None  # the baseline family of a "bleu" claim
    seeds: int = len(SEEDS)


VOITA, DC, CSAN = "Voita et al. 2018 (context encoder)", "Ampomah et al. 2021 (Enc-DC)", "Yang et al. 2019 (CSAN)"
EQUAL_SIZE = "... and not by its parameters alone (against FFN-768)"
# in the order of the family table
CLAIMS = [
    Claim(VOITA, "translates better than the Transformer", "transformer_ctxenc", "bleu", "transformer"),
    Claim(VOITA, EQUAL_SIZE, "transformer_ctxenc", "bleu", "transformer-wide"),
    Claim(VOITA, "relies on its context: shuffled context costs BLEU", "transformer_ctxenc", "shuffled"),
    Claim(VOITA, "decides pronouns with its context (the balanced context test)", "transformer_ctxenc", "pronouns"),
    Claim(DC, "translates better than the Transformer", "transformer_dc", "bleu", "transformer"),
    Claim(DC, EQUAL_SIZE, "transformer_dc", "bleu", "transformer-wide"),
    Claim(CSAN, "translates better than the Transformer", "transformer_ctxsan", "bleu", "transformer"),
    Claim(CSAN, EQUAL_SIZE, "transformer_ctxsan", "bleu", "transformer-wide"),
    Claim("Weng et al. 2020 (GRET)", "translates better than the Transformer trained as long from the same start",
          "transformer_gret", "bleu", "transformer-continued", seeds=1),
]


def sign_test(b: int, c: int) -> float:
    """One-sided exact sign test: P(X >= b) for X ~ Binomial(b + c, 1/2)
    (scipy's ``binomtest``)."""
    from scipy.stats import binomtest  # scipy comes with scikit-learn, a fairseq requirement (scripts/install.sh)

    return float(binomtest(b, b + c, 0.5, alternative="greater").pvalue) if b + c else 1.0


def upper_bound(k: int, n: int, alpha: float = ALPHA) -> float:
    """One-sided (1 - alpha) Clopper-Pearson upper bound of a binomial
    proportion: the p at which P(X <= k | n, p) = alpha, the (1 - alpha)
    quantile of Beta(k + 1, n - k); 1 when k = n."""
    from scipy.stats import beta

    return 1.0 if k >= n else float(beta.ppf(1 - alpha, k + 1, n - k))


def lower_bound(k: int, n: int, alpha: float = ALPHA) -> float:
    """One-sided (1 - alpha) Clopper-Pearson lower bound: the alpha quantile
    of Beta(k, n - k + 1); 0 when k = 0."""
    from scipy.stats import beta

    return 0.0 if k <= 0 else float(beta.ppf(alpha, k, n - k + 1))


def t_quantile(df: int, q: float = 1 - ALPHA) -> float:
    from scipy.stats import t

    return float(t.ppf(q, df))


def _paired(deltas: List[float], p_values: List[float], what: str) -> Tuple[str, str]:
    """The BLEU rule on per-seed deltas (> 0: ahead) and p-values."""
    t = tally(deltas, p_values)
    n = t["n"]
    why = (f"{t['mean']:+.2f} BLEU {what} on average, ahead in {t['wins']}/{n} seeds, p < 0.05 ahead in "
           f"{t['significant_wins']}, behind in {t['significant_losses']}")
    if n > 1:  # from the unrounded deltas: tally's 4-decimal mean and sd could move a bound across MIN_GAIN
        bound = mean(deltas) + t_quantile(n - 1) * stdev(deltas) / sqrt(n)
        why += f"; one-sided 95% upper bound {bound:+.3f}"
    if t["wins"] == n and 2 * t["significant_wins"] > n:
        return SUPPORTS, why
    if n > 1 and bound < MIN_GAIN:
        return REFUTES, why
    return CANNOT_TELL, why


def _pronouns(recs: List[Dict]) -> Tuple[str, str]:
    """The pronoun rule, pooled over the seeds' context-test answers."""
    b = c = total = 0
    for rec in recs:
        usage = rec["usage"]
        test = usage["context_test"]
        groups = test["true"]["groups"]
        right_true, right_none = round(test["true"]["accuracy"] * groups), round(test["none"]["accuracy"] * groups)
        decided = usage["attribution"]["context_decided"]["items"]
        undone = decided - (right_true - right_none)
        if not (0 <= undone <= right_none and decided <= right_true and decided + undone <= groups):
            raise StudyError(f"{rec['name']}: {decided} items decided by the context do not fit {right_true} "
                             f"right with it and {right_none} without (a stale usage report?)")
        b, c, total = b + decided, c + undone, total + groups
    gain, p = (b - c) / total, sign_test(b, c)
    bound = upper_bound(b, total, ALPHA / 2) - lower_bound(c, total, ALPHA / 2)
    why = (f"{b} of {total} answers right only with the true context, {c} only without: gain "
           f"{100 * gain:+.1f} points (sign test p = {p:.3f}), one-sided 95% upper bound {100 * bound:+.1f}")
    if p < ALPHA and gain >= PRONOUN_GAIN:
        return SUPPORTS, why
    if bound < PRONOUN_GAIN:
        return REFUTES, why
    return CANNOT_TELL, why


def judge(claim: Claim, records: List[Dict]) -> Dict:
    """One claim's verdict from the evaluated records of its family's
    planned seeds (1 to ``claim.seeds``)."""
    recs = sorted((r for r in records if family(r["name"]) == claim.family and r.get("bleu") is not None
                   and 1 <= r["seed"] <= claim.seeds), key=lambda r: r["seed"])
    out = {"paper": claim.paper, "claim": claim.text, "family": claim.family, "seeds": len(recs)}

    def waits(why: str) -> Dict:
        return {**out, "verdict": f"waits ({why})", "why": ""}

    if len(recs) < claim.seeds:
        return waits(f"{len(recs)} of {claim.seeds} seed{'s' * (claim.seeds > 1)}")
    if claim.kind == "bleu":
        missing = [r["name"] for r in recs if claim.against not in r.get("vs", {})]
        if missing:
            return waits(f"no pairing with {claim.against}: {', '.join(missing)}")
        pairs = [r["vs"][claim.against] for r in recs]
        verdict, why = _paired([x["delta_bleu"] for x in pairs], [x["p_value"] for x in pairs],
                               f"against {claim.against}")
    elif claim.kind == "shuffled":
        missing = [r["name"] for r in recs if r.get("shuffled_delta_bleu") is None]
        if missing:
            return waits(f"no shuffled-context BLEU: {', '.join(missing)}")
        verdict, why = _paired([-r["shuffled_delta_bleu"] for r in recs], [r["shuffled_p_value"] for r in recs],
                               "with the true context against shuffled")
    elif claim.kind == "pronouns":
        missing = [r["name"] for r in recs if "attribution" not in r.get("usage", {})]
        if missing:
            return waits(f"no context test attribution: {', '.join(missing)}")
        verdict, why = _pronouns(recs)
    else:
        raise ValueError(f"unknown kind of claim: {claim.kind}")
    if claim.seeds == 1:
        verdict += " (one seed)"
    return {**out, "verdict": verdict, "why": why}


def verdicts(records: List[Dict]) -> List[Dict]:
    """Every claim of :data:`CLAIMS`, judged (:func:`judge`)."""
    return [judge(claim, records) for claim in CLAIMS]


def markdown(records: List[Dict]) -> str:
    """The verdicts as the Markdown table docs/study.md carries."""
    lines = ["| paper | claim | verdict at this scale | why |", "|---|---|---|---|"]
    for v in verdicts(records):
        lines.append(f"| {v['paper']} | {v['claim']} | {v['verdict']} | {v['why']} |")
    return "\n".join(lines)
