"""The study's verdict per paper claim (fairseq_ctx/study/verdict.py): its
statistics against scipy's, each rule on made-up records, and the copy in
docs/study.md against the committed results."""
import re
import pytest

from fairseq_ctx.study import verdict as v
from tests.utils import REPO

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("b,c", [(0, 0), (1, 0), (0, 3), (8, 2), (20, 2), (10, 5), (7, 7)])
def test_sign_test_is_scipys_one_sided_binomial_test(b, c):
    stats = pytest.importorskip("scipy.stats")
    want = 1.0 if b + c == 0 else stats.binomtest(b, b + c, 0.5, alternative="greater").pvalue
    assert v.sign_test(b, c) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("k,n", [(0, 10), (0, 270), (1, 180), (10, 270), (44, 90), (89, 90)])
def test_upper_bound_is_clopper_pearson(k, n):
    stats = pytest.importorskip("scipy.stats")
    assert v.upper_bound(k, n) == pytest.approx(stats.beta.ppf(0.95, k + 1, n - k), abs=1e-9)
    assert v.upper_bound(n, n) == 1.0
    assert v.upper_bound(0, 10) == pytest.approx(1 - 0.05 ** (1 / 10), abs=1e-12)  # the closed form at k = 0


def _rec(fam, seed, pairs=None, shuffled=None, decided=None, true_right=None, none_right=None):
    name = fam if seed == 1 else f"{fam}-seed{seed}"
    rec = {"name": name, "seed": seed, "bleu": 20.0,
           "vs": {base: {"delta_bleu": d, "p_value": p} for base, (d, p) in (pairs or {}).items()}}
    if shuffled:
        rec["shuffled_delta_bleu"], rec["shuffled_p_value"] = shuffled
    if decided is not None:
        rec["usage"] = {"context_test": {"true": {"accuracy": true_right / 90, "groups": 90},
                                         "none": {"accuracy": none_right / 90, "groups": 90}},
                        "attribution": {"context_decided": {"items": decided}}}
    return rec


DC = v.CLAIMS[2]
assert (DC.family, DC.against) == ("transformer_dc", "transformer")


@pytest.mark.parametrize("deltas,want", [
    ([(0.5, 0.01), (0.3, 0.04), (0.2, 0.30)], v.SUPPORTS),     # ahead in 3/3, significant in 2
    ([(0.5, 0.01), (0.3, 0.06), (0.2, 0.30)], v.CANNOT_TELL),  # ahead in 3/3, significant in 1
    ([(0.5, 0.01), (0.3, 0.01), (0.0, 0.50)], v.CANNOT_TELL),  # a tie is not ahead
    ([(0.2, 0.30), (-0.1, 0.5), (-0.1, 0.6)], v.REFUTES),      # mean 0: no gain
    ([(0.6, 0.01), (-0.4, 0.1), (-0.3, 0.2)], v.CANNOT_TELL),  # mean < 0, but one seed significantly ahead
    ([(-0.4, 0.01), (-0.3, 0.02), (-0.5, 0.01)], v.REFUTES),
])
def test_the_bleu_rule(deltas, want):
    recs = [_rec("transformer_dc", s + 1, {"transformer": d}) for s, d in enumerate(deltas)]
    got = v.judge(DC, recs + [_rec("transformer", 1)])
    assert got["verdict"] == want and got["seeds"] == 3
    ahead = sum(d > 0 for d, _ in deltas)
    assert f"ahead in {ahead}/3 seeds" in got["why"]


def test_a_claim_waits_for_its_seeds_and_its_pairings():
    recs = [_rec("transformer_dc", s, {"transformer": (0.5, 0.01)}) for s in (1, 2)]
    assert v.judge(DC, recs)["verdict"] == "waits (2 of 3 seeds)"
    recs.append({**_rec("transformer_dc", 3), "bleu": None})  # trained, not evaluated
    assert v.judge(DC, recs)["verdict"] == "waits (2 of 3 seeds)"
    recs[-1] = _rec("transformer_dc", 3, {"transformer-wide": (0.5, 0.01)})
    assert v.judge(DC, recs)["verdict"] == "waits (no pairing with transformer: transformer_dc-seed3)"


def test_gret_is_judged_on_its_one_seed_against_its_control_and_says_so():
    gret = next(c for c in v.CLAIMS if c.family == "transformer_gret")
    assert (gret.against, gret.seeds) == ("transformer-continued", 1)
    assert v.judge(gret, [])["verdict"] == "waits (0 of 1 seed)"
    got = v.judge(gret, [_rec("transformer_gret", 1, {"transformer-continued": (0.8, 0.003)})])
    assert got["verdict"] == v.SUPPORTS and got["why"].endswith("(one seed: seed noise not measured)")


def test_the_shuffled_rule_counts_the_true_context_ahead():
    claim = next(c for c in v.CLAIMS if c.kind == "shuffled")
    recs = [_rec("transformer_ctxenc", s + 1, shuffled=sh) for s, sh in
            enumerate([(-0.53, 0.046), (-0.43, 0.072), (-0.6, 0.01)])]
    got = v.judge(claim, recs)
    assert got["verdict"] == v.SUPPORTS and got["why"].startswith("+0.52 BLEU with the true context against")
    recs[2]["shuffled_delta_bleu"] = 0.1
    assert v.judge(claim, recs)["verdict"] == v.CANNOT_TELL


@pytest.mark.parametrize("seeds,want,why", [
    # (decided, right with true, right without) per seed
    ([(8, 55, 48), (7, 54, 48), (8, 56, 49)], v.SUPPORTS, "23 of 270 items right only with the true context, 3 only"),
    ([(0, 46, 46), (1, 47, 46), (0, 46, 46)], v.REFUTES, "1 of 270 items right only with the true context, 0 only"),
    ([(4, 49, 47), (3, 48, 47), (3, 49, 47)], v.CANNOT_TELL, "10 of 270 items right only with the true context, 5"),
])
def test_the_pronoun_rule(seeds, want, why):
    claim = next(c for c in v.CLAIMS if c.kind == "pronouns")
    recs = [_rec("transformer_ctxenc", s + 1, decided=d, true_right=t, none_right=n)
            for s, (d, t, n) in enumerate(seeds)]
    got = v.judge(claim, recs)
    assert got["verdict"] == want and got["why"].startswith(why)
    del recs[1]["usage"]["attribution"]
    assert v.judge(claim, recs)["verdict"] == "waits (no context test attribution: transformer_ctxenc-seed2)"


def test_the_docs_verdicts_are_the_results_files():
    from fairseq_ctx.study.report import read

    records = list(read(str(REPO / "benchmarks" / "study-bible-budget.json"))[1].values())
    doc = (REPO / "docs" / "study.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- verdicts: python3 -m fairseq_ctx.study --stage table -->\n(.*?)\n<!-- /verdicts -->",
                  doc, re.S)
    assert m, "docs/study.md: the verdicts markers are missing"
    assert m.group(1) == v.markdown(records), \
        "docs/study.md: the verdicts differ from the results; paste python3 -m fairseq_ctx.study --stage table"
