"""The study's verdict per paper claim (fairseq_ctx/study/verdict.py): its
statistics against scipy's, each rule on made-up records, and the copy in
docs/study.md against the committed results."""
import re
from fractions import Fraction
from math import comb

import pytest

from fairseq_ctx.study import verdict as v
from fairseq_ctx.study.train import StudyError
from tests.utils import REPO

pytestmark = pytest.mark.unit


def _binomial_cdf(k, n, p):
    """P(X <= k) for X ~ Binomial(n, p), summed term by term from the
    definition (exact binomial coefficients; n up to a few hundred)."""
    return sum(comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k + 1))


@pytest.mark.parametrize("b,c", [(0, 0), (1, 0), (0, 3), (8, 2), (20, 2), (10, 5), (7, 7), (140, 120)])
def test_sign_test_is_the_exact_binomial_tail(b, c):
    n = b + c
    want = 1.0 if n == 0 else float(sum(Fraction(comb(n, i), 2 ** n) for i in range(b, n + 1)))
    assert v.sign_test(b, c) == pytest.approx(want, rel=1e-9)
    assert v.sign_test(8, 2) == 56 / 1024  # C(10,8) + C(10,9) + C(10,10) = 56 of 2^10


@pytest.mark.parametrize("k,n", [(0, 10), (0, 270), (1, 180), (10, 270), (44, 90), (89, 90), (150, 200)])
@pytest.mark.parametrize("alpha", [0.05, 0.025])
def test_the_bounds_are_clopper_pearsons(k, n, alpha):
    # the upper bound is the p at which k or fewer has probability alpha,
    # the lower bound the p at which k or more has
    upper, lower = v.upper_bound(k, n, alpha), v.lower_bound(k, n, alpha)
    assert _binomial_cdf(k, n, upper) == pytest.approx(alpha, abs=1e-9)
    if k == 0:
        assert lower == 0.0
    else:
        assert 1 - _binomial_cdf(k - 1, n, lower) == pytest.approx(alpha, abs=1e-9)
    assert v.upper_bound(n, n, alpha) == 1.0
    assert v.upper_bound(0, n, alpha) == pytest.approx(1 - alpha ** (1 / n), abs=1e-12)  # the closed form at k = 0
    assert v.lower_bound(n, n, alpha) == pytest.approx(alpha ** (1 / n), abs=1e-12)


def test_t_quantile_is_students():
    assert v.t_quantile(2) == pytest.approx(2.919986, abs=1e-6)  # the printed tables' t(0.95, 2)


def _name(fam, seed):
    return fam if seed == 1 else f"{fam}-seed{seed}"


def _bleu(fam, base, deltas):
    return [{"name": _name(fam, s), "seed": s, "bleu": 20.0,
             "vs": {base: {"run": base, "delta_bleu": d, "p_value": p}}} for s, (d, p) in enumerate(deltas, 1)]


def _claim(fam, kind, against=None):
    return next(c for c in v.CLAIMS if (c.family, c.kind, c.against) == (fam, kind, against))


DC = _claim("transformer_dc", "bleu", "transformer")


@pytest.mark.parametrize("deltas,want,bound", [
    ([(0.5, 0.01), (0.3, 0.04), (0.2, 0.30)], v.SUPPORTS, "+0.591"),     # ahead in 3/3, significant in 2
    ([(0.5, 0.01), (0.3, 0.06), (0.2, 0.30)], v.CANNOT_TELL, "+0.591"),  # ahead in 3/3, significant in 1
    ([(0.5, 0.01), (0.3, 0.01), (0.0, 0.50)], v.CANNOT_TELL, "+0.691"),  # a tie is not ahead
    ([(0.2, 0.30), (-0.1, 0.5), (-0.1, 0.6)], v.REFUTES, "+0.292"),      # a gain of 0.4 excluded
    ([(0.35, 0.1), (-0.2, 0.3), (-0.15, 0.4)], v.CANNOT_TELL, "+0.513"),  # mean 0, yet 0.4 not excluded
    ([(0.6, 0.01), (-0.4, 0.1), (-0.3, 0.2)], v.CANNOT_TELL, "+0.895"),
    ([(-0.4, 0.01), (-0.3, 0.02), (-0.5, 0.01)], v.REFUTES, "-0.231"),
    # the bound is 0.400057 from the deltas, 0.399991 from tally's rounded mean and sd
    ([(-2.17, 0.001), (-0.26, 0.3), (-1.20, 0.001)], v.CANNOT_TELL, "+0.400"),
    # supports is decided first: a consistent, significant gain below MIN_GAIN
    ([(0.3, 0.01), (0.3, 0.01), (0.3, 0.01)], v.SUPPORTS, "+0.300"),
])
def test_the_bleu_rule(deltas, want, bound):
    got = v.judge(DC, _bleu("transformer_dc", "transformer", deltas) + _bleu("transformer", "x", [(0, 1)]))
    assert (got["verdict"], got["seeds"]) == (want, 3)
    assert f"ahead in {sum(d > 0 for d, _ in deltas)}/3 seeds" in got["why"]
    assert got["why"].endswith(f"one-sided 95% upper bound {bound}")


def test_a_claim_waits_for_its_seeds_and_its_pairings_and_ignores_later_seeds():
    recs = _bleu("transformer_dc", "transformer", [(0.5, 0.01), (0.4, 0.01)])
    assert v.judge(DC, recs)["verdict"] == "waits (2 of 3 seeds)"
    recs.append({"name": "transformer_dc-seed3", "seed": 3, "bleu": None})  # trained, not evaluated
    assert v.judge(DC, recs)["verdict"] == "waits (2 of 3 seeds)"
    recs[-1] = _bleu("transformer_dc", "transformer-wide", [(0, 1)] * 3)[2]
    assert v.judge(DC, recs)["verdict"] == "waits (no pairing with transformer: transformer_dc-seed3)"
    recs = _bleu("transformer_dc", "transformer", [(0.5, 0.01), (0.4, 0.01), (0.3, 0.2), (-2.0, 0.001)])
    assert v.judge(DC, recs)["verdict"] == v.SUPPORTS  # a fourth seed is not the study's


def test_gret_is_judged_on_its_one_seed_against_its_control_and_never_refuted():
    gret = _claim("transformer_gret", "bleu", "transformer-continued")
    assert gret.seeds == 1 and not any(c.family == "transformer_gret" and c.against != gret.against
                                       for c in v.CLAIMS)
    assert v.judge(gret, [])["verdict"] == "waits (0 of 1 seed)"
    got = v.judge(gret, _bleu("transformer_gret", "transformer-continued", [(0.8, 0.003)]))
    assert got["verdict"] == "supports (one seed)" and "upper bound" not in got["why"]
    got = v.judge(gret, _bleu("transformer_gret", "transformer-continued", [(-1.5, 0.001)]))
    assert got["verdict"] == "cannot tell (one seed)"


def test_the_shuffled_rule_counts_the_true_context_ahead():
    claim = _claim("transformer_ctxenc", "shuffled")
    recs = [{"name": _name("transformer_ctxenc", s), "seed": s, "bleu": 20.0, "shuffled_delta_bleu": d,
             "shuffled_p_value": p} for s, (d, p) in enumerate([(-0.53, 0.046), (-0.43, 0.072), (-0.6, 0.01)], 1)]
    got = v.judge(claim, recs)
    assert got["verdict"] == v.SUPPORTS and got["why"].startswith("+0.52 BLEU with the true context against")
    recs[2]["shuffled_delta_bleu"] = 0.1
    assert v.judge(claim, recs)["verdict"] == v.CANNOT_TELL
    del recs[1]["shuffled_delta_bleu"]
    assert v.judge(claim, recs)["verdict"] == "waits (no shuffled-context BLEU: transformer_ctxenc-seed2)"


PRONOUNS = _claim("transformer_ctxenc", "pronouns")


def _context_test(seeds):
    """(decided, right with true, right without) per seed, 90 items, the
    accuracies rounded as the records keep them."""
    return [{"name": _name("transformer_ctxenc", s), "seed": s, "bleu": 20.0,
             "usage": {"context_test": {"true": {"accuracy": round(t / 90, 4), "groups": 90},
                                        "none": {"accuracy": round(n / 90, 4), "groups": 90}},
                       "attribution": {"context_decided": {"items": d}}}}
            for s, (d, t, n) in enumerate(seeds, 1)]


@pytest.mark.parametrize("seeds,want,why", [
    ([(8, 55, 48), (7, 54, 48), (8, 56, 49)], v.SUPPORTS, "23 of 270 answers right only with the true context, 3 "),
    ([(0, 46, 46), (1, 47, 46), (0, 46, 46)], v.REFUTES, "1 of 270 answers right only with the true context, 0 "),
    ([(4, 49, 47), (3, 48, 47), (3, 49, 47)], v.CANNOT_TELL, "10 of 270 answers right only with the true context, 5 "),
    # balanced changes refute too: the gain's bound is 4.9 points
    ([(4, 47, 47), (3, 46, 46), (3, 46, 46)], v.REFUTES, "10 of 270 answers right only with the true context, 10 "),
])
def test_the_pronoun_rule(seeds, want, why):
    recs = _context_test(seeds)
    got = v.judge(PRONOUNS, recs)
    assert got["verdict"] == want and got["why"].startswith(why)
    del recs[1]["usage"]["attribution"]
    assert v.judge(PRONOUNS, recs)["verdict"] == "waits (no context test attribution: transformer_ctxenc-seed2)"


def test_counts_that_do_not_fit_the_accuracies_are_refused():
    with pytest.raises(StudyError, match="transformer_ctxenc-seed2: 0 items decided by the context do not fit 48"):
        v.judge(PRONOUNS, _context_test([(1, 47, 46), (0, 48, 46), (0, 46, 46)]))


def test_the_docs_verdicts_are_the_results_files():
    from fairseq_ctx.study.report import read

    records = list(read(str(REPO / "benchmarks" / "study-bible-budget.json"))[1].values())
    doc = (REPO / "docs" / "study.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- verdicts: python3 -m fairseq_ctx.study --stage table -->\n(.*?)\n<!-- /verdicts -->",
                  doc, re.S)
    assert m, "docs/study.md: the verdicts markers are missing"
    assert m.group(1) == v.markdown(records), \
        "docs/study.md: the verdicts differ from the results; paste python3 -m fairseq_ctx.study --stage table"
