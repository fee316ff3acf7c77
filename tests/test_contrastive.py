"""Tests of the contrastive evaluation command (fairseq_ctx.evaluation.contrastive):
readers of the Voita et al. (2019), ContraPro and Bawden et al. (2018)
formats, tie handling, per-distance accuracy, and end-to-end scoring with a
tiny transformer_ctxenc trained for a few updates."""
import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import fairseq_ctx  # noqa: F401  (registers the task and the archs)
from fairseq_ctx.evaluation import contrastive as ce
from tests.utils import generate, make_parallel_data, preprocess, run_cli, train

torch.set_num_threads(1)

TASK = ["--task", "document_translation"]


def shared_dir() -> Path:
    """``shared/`` beside the repository clone, else $FAIRSEQ_CTX_SHARED."""
    here = Path(__file__).resolve().parents[2] / "shared"
    if here.is_dir():
        return here
    return Path(os.environ.get("FAIRSEQ_CTX_SHARED", here))


VOITA = shared_dir() / "data" / "voita2019-consistency"
VOITA_SETS = sorted(p.stem for p in VOITA.glob("*.json")) if VOITA.is_dir() else []
needs_voita = pytest.mark.skipif(
    not VOITA_SETS, reason=f"Voita et al. 2019 consistency sets not found in {VOITA} "
                           "(put shared/ beside the repository or set FAIRSEQ_CTX_SHARED)")


def write_voita(tmp, name, groups):
    """groups: list of (src_line, [dst lines], true_ind, ctx_dist)."""
    src = [s for s, dsts, _, _ in groups for _ in dsts]
    dst = [d for _, dsts, _, _ in groups for d in dsts]
    (tmp / f"{name}.src").write_text("\n".join(src) + "\n", encoding="utf-8")
    (tmp / f"{name}.dst").write_text("\n".join(dst) + "\n", encoding="utf-8")
    (tmp / f"{name}.json").write_text(json.dumps(
        [{"src": s, "dst": d, "true_ind": t, "ctx_dist": c} for s, d, t, c in groups]), encoding="utf-8")
    return tmp / f"{name}.src", tmp / f"{name}.dst", tmp / f"{name}.json"


# ---------------------------------------------------------------------------
# readers
# ---------------------------------------------------------------------------

@pytest.mark.unit
@needs_voita
@pytest.mark.parametrize("name", VOITA_SETS)
def test_parse_voita_files(name):
    entries = json.loads((VOITA / f"{name}.json").read_text(encoding="utf-8"))
    groups = ce.read_voita(VOITA / f"{name}.src", VOITA / f"{name}.dst", VOITA / f"{name}.json")
    assert len(groups) == len(entries)
    assert [len(g.candidates) for g in groups] == [len(e["dst"]) for e in entries]
    words = str.split  # the published ellipsis_vp holds a candidate with a double space
    for g, e in zip(groups, entries):
        assert g.true_index == e["true_ind"] and g.meta == {"ctx_dist": e["ctx_dist"]} and g.rule == "first"
        # the text files hold the JSON's candidates: context + current sentence, both sides
        assert [words(c.target) for c in g.candidates] == [words(d.split("_eos")[-1]) for d in e["dst"]]
        assert [[words(t) for t in c.target_context] for c in g.candidates] == \
            [[words(t) for t in d.split("_eos")[:-1]] for d in e["dst"]]
        assert all(words(c.source) == words(e["src"].split("_eos")[-1]) for c in g.candidates)
        assert all([words(t) for t in c.source_context] == [words(t) for t in e["src"].split("_eos")[:-1]]
                   for c in g.candidates)
    assert {g.meta["ctx_dist"] for g in groups} <= {1, 2, 3}


def oracle_scores(path_dst, path_json):
    """Loss 0 for every candidate line equal to the group's true one, else 1."""
    dst = Path(path_dst).read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    for e in json.loads(Path(path_json).read_text(encoding="utf-8")):
        lines = dst[i:i + len(e["dst"])]
        out += [0 if line == lines[e["true_ind"]] else 1 for line in lines]
        i += len(lines)
    return out


@pytest.mark.unit
@needs_voita
@pytest.mark.parametrize("name", VOITA_SETS)
def test_oracle_scores_on_published_sets(name, tmp_path, capsys):
    """--scores-in with oracle losses gives 1.000, as Voita's own
    evaluate_consistency.py does on every set."""
    scores = tmp_path / "oracle.txt"
    scores.write_text("".join(f"{x}\n" for x in oracle_scores(VOITA / f"{name}.dst", VOITA / f"{name}.json")))
    files = ["--src", str(VOITA / f"{name}.src"), "--dst", str(VOITA / f"{name}.dst"),
             "--json", str(VOITA / f"{name}.json")]
    res = ce.main(["--format", "voita", *files, "--scores-in", str(scores)])
    assert res["accuracy"] == 1.0 and set(res["by"]["ctx_dist"]) == {"1", "2", "3"}
    assert all(b["accuracy"] == 1.0 for b in res["by"]["ctx_dist"].values())
    # the worst scorer: the true candidate always loses
    scores.write_text("".join(f"{1 - x}\n" for x in oracle_scores(VOITA / f"{name}.dst", VOITA / f"{name}.json")))
    assert ce.main(["--format", "voita", *files, "--scores-in", str(scores)])["accuracy"] == 0.0
    capsys.readouterr()


@pytest.mark.unit
def test_read_lines_is_the_evaluations(tmp_path):
    """The test-set reader and the scorer of translations read a file the
    same way: lines end at a newline only (as the binarizer counts them), so a
    Unicode line separator inside a sentence does not shift later lines."""
    from fairseq_ctx.evaluation import bleu

    path = tmp_path / "x.txt"
    path.write_bytes("a\u2028b\r\nc\x0bd\x1ce\n".encode("utf-8"))
    assert ce.read_lines(path) == bleu.read_lines(path) == ["a\u2028b", "c\x0bd\x1ce"]
    with pytest.raises(ce.ContrastiveDataError, match="missing.txt: no such file"):
        ce.read_lines(tmp_path / "missing.txt")


@pytest.mark.unit
def test_split_segments():
    assert ce.split_segments("a b _eos c _eos d e") == ["a b", "c", "d e"]
    assert ce.split_segments("a _eos  b  c") == ["a", "b  c"]  # double spaces: stripped at the ends
    assert ce.split_segments("no context here") == ["no context here"]
    assert ce.split_segments("x_eos y _eos z") == ["x_eos y", "z"]


@pytest.mark.unit
def test_voita_true_ind_and_bad_files(tmp_path):
    src, dst, js = write_voita(tmp_path, "t", [
        ("c1 _eos s1", ["C1 _eos A", "C1 _eos B", "C1 _eos C"], 2, 1),
        ("c2 _eos c3 _eos s2", ["C2 _eos C3 _eos X", "C2 _eos C3 _eos Y"], 1, 2),
    ])
    groups = ce.read_voita(src, dst, js)
    assert [g.true_index for g in groups] == [2, 1]
    assert groups[1].candidates[1].target == "Y" and groups[1].candidates[1].source_context == ["c2", "c3"]
    assert groups[1].candidates[1].target_context == ["C2", "C3"] and groups[0].candidates[0].target_context == ["C1"]
    assert groups[1].candidates[0].where == f"{dst}:4"
    # line counts must match the JSON, and the message names the file
    dst.write_text("\n".join(dst.read_text().splitlines()[:-1]) + "\n")
    with pytest.raises(ce.ContrastiveDataError,
                       match=rf"{re.escape(str(dst))}: 4 lines, but .*5 candidates in 2 groups"):
        ce.read_voita(src, dst, js)
    src2, dst2, js2 = write_voita(tmp_path, "u", [("s", ["A", "B"], 2, 1)])
    with pytest.raises(ce.ContrastiveDataError, match=r"entry 0: true_ind 2 is not an index"):
        ce.read_voita(src2, dst2, js2)
    src3, dst3, js3 = write_voita(tmp_path, "v", [("c _eos s", ["C _eos A", "C _eos "], 0, 1)])
    with pytest.raises(ce.ContrastiveDataError, match=rf"{re.escape(str(dst3))}:2: empty current sentence"):
        ce.read_voita(src3, dst3, js3)
    (tmp_path / "w.json").write_text("[{\"dst\": [\"a\", \"b\"], ")
    with pytest.raises(ce.ContrastiveDataError, match="w.json: invalid JSON at line 1"):
        ce.read_voita(src3, dst3, tmp_path / "w.json")


@pytest.mark.unit
def test_contrapro_reader(tmp_path):
    entries = [
        {"src segment": "I saw it .", "ref segment": "Ich sah ihn .", "src pronoun": "it",
         "ref pronoun": "Er", "ante distance": 1, "intrasegmental": False,
         "errors": [{"contrastive": "Ich sah sie ."}, {"contrastive": "Ich sah es ."}]},
        {"src segment": "It is red .", "ref segment": "Sie ist rot .", "src pronoun": "it",
         "ref pronoun": "sie", "ante distance": 5, "intrasegmental": True, "errors": [{"contrastive": "Er ist rot ."}]},
    ]
    (tmp_path / "c.json").write_text(json.dumps(entries))
    src = ["I saw it ."] * 3 + ["It is red ."] * 2
    dst = ["Ich sah ihn .", "Ich sah sie .", "Ich sah es .", "Sie ist rot .", "Er ist rot ."]
    ctx = ["", "The dog ."] * 3 + ["The car .", "The door ."] * 2  # 2 context lines per text line
    tctx = ["", "Der Hund ."] * 3 + ["Das Auto .", "Die Tür ."] * 2
    for name, lines in (("text.en", src), ("text.de", dst), ("context.en", ctx), ("context.de", tctx)):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    groups = ce.read_contrapro(tmp_path / "c.json", tmp_path / "text.en", tmp_path / "text.de",
                               tmp_path / "context.en", tgt_ctx_path=tmp_path / "context.de")
    assert [len(g.candidates) for g in groups] == [3, 2] and all(g.true_index == 0 for g in groups)
    assert all(g.rule == "strict" for g in groups)
    assert groups[0].candidates[1].target == "Ich sah sie ."
    assert groups[0].candidates[0].source_context == ["The dog ."]  # empty line: document start
    assert groups[0].candidates[0].target_context == ["Der Hund ."]
    assert groups[1].candidates[1].source_context == ["The car .", "The door ."]
    assert groups[1].candidates[1].target_context == ["Das Auto .", "Die Tür ."]
    assert groups[0].meta == {"ante_distance": "1", "category": "it:er", "intrasegmental": "False"}
    assert groups[1].meta["ante_distance"] == ">3"
    (tmp_path / "context.en").write_text("\n".join(ctx[:-1]) + "\n")
    with pytest.raises(ce.ContrastiveDataError, match=r"context.en: 9 lines is not a multiple of the 5"):
        ce.read_contrapro(tmp_path / "c.json", tmp_path / "text.en", tmp_path / "text.de",
                          tmp_path / "context.en")
    (tmp_path / "text.de").write_text("\n".join(dst[:4]) + "\n")
    with pytest.raises(ce.ContrastiveDataError, match=r"text.de: 4 lines, expected 5"):
        ce.read_contrapro(tmp_path / "c.json", tmp_path / "text.en", tmp_path / "text.de")


BAWDEN_ANAPHORA = {
    "2": {"src": ["The buildings are old .", "They are big ."],
          "trg": [{"correct": ["Les bâtiments sont vieux .", "Ils sont grands ."],
                   "incorrect": ["Les bâtiments sont vieux .", "Elles sont grandes ."], "type": "m.pl"},
                  {"semi-correct": ["Les maisons sont vieilles .", "Elles sont grandes ."],
                   "incorrect": ["Les maisons sont vieilles .", "Ils sont grands ."], "type": "f.pl"}]},
    "1": {"src": ["", "It is here ."],
          "trg": [{"correct": ["", "Il est ici ."], "incorrect": ["", "Elle est ici ."]}]},
}
BAWDEN_LEXICAL = {"1": {"type": "disambig", "examples": [
    {"src": ["Is it serious , doctor ?", "Remove that mole ."],
     "trg": {"correct": ["C'est grave ?", "Enlevez ce grain de beauté ."],
             "incorrect": ["C'est grave ?", "Enlevez cette taupe ."]}}]}}


@pytest.mark.unit
def test_bawden_reader(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(BAWDEN_ANAPHORA))
    groups = ce.read_bawden(tmp_path / "a.json")
    assert len(groups) == 3  # numeric key order: block 1 first
    assert [c.target for c in groups[0].candidates] == ["Il est ici .", "Elle est ici ."]
    assert groups[0].candidates[0].source_context == []
    assert groups[2].candidates[1].target == "Ils sont grands ."
    assert groups[2].candidates[0].source_context == ["The buildings are old ."]
    assert groups[2].meta == {"kind": "semi-correct", "type": "f.pl"}
    assert [g.block for g in groups] == ["1", "2", "2"] and all(g.rule == "strict" for g in groups)
    assert groups[2].candidates[0].target_context == ["Les maisons sont vieilles ."]
    assert groups[0].candidates[0].target_context == []  # empty previous sentence: no context
    (tmp_path / "l.json").write_text(json.dumps(BAWDEN_LEXICAL))
    (g,) = ce.read_bawden(tmp_path / "l.json")
    assert g.meta == {"type": "disambig"} and g.candidates[1].target == "Enlevez cette taupe ."
    # the json2rawtext.py files, grouped in line pairs, correct first
    for name, lines in (("cur.en", ["Remove that mole ."] * 2), ("prev.en", ["Is it serious , doctor ?"] * 2),
                        ("cur.fr", ["Enlevez ce grain de beauté .", "Enlevez cette taupe ."]),
                        ("prev.fr", ["C'est grave ?"] * 2)):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    (t,) = ce.read_bawden(tmp_path / "l.json", tmp_path / "cur.en", tmp_path / "cur.fr", tmp_path / "prev.en",
                          tgt_ctx_path=tmp_path / "prev.fr")
    assert t.meta == g.meta and [c.target for c in t.candidates] == [c.target for c in g.candidates]
    assert t.candidates[0].source_context == ["Is it serious , doctor ?"] and t.block == g.block == "1"
    assert [c.target_context for c in t.candidates] == [c.target_context for c in g.candidates] == [["C'est grave ?"]] * 2
    (t2,) = ce.read_bawden(None, tmp_path / "cur.en", tmp_path / "cur.fr")
    assert t2.meta == {} and t2.candidates[0].source_context == []
    (tmp_path / "bad.json").write_text(json.dumps({"1": {"src": ["a", "b"], "trg": [{"correct": ["x", "y"]}]}}))
    with pytest.raises(ce.ContrastiveDataError, match=r"bad.json: example 1, trg\[0\]: needs"):
        ce.read_bawden(tmp_path / "bad.json")


# ---------------------------------------------------------------------------
# accuracy and ties (fake scores)
# ---------------------------------------------------------------------------

def fake_group(n, true, dist):
    return ce.Group([ce.Candidate("s", f"t{i}") for i in range(n)], true, {"ctx_dist": dist})


@pytest.mark.unit
@pytest.mark.parametrize("ties, expected", [("wrong", 0.0), ("right", 1.0), ("half", 0.5)])
def test_tie_handling(ties, expected):
    assert ce.group_credit([-1.0, -1.0], 0, ties) == (expected, True)
    assert ce.group_credit([-1.0, -2.0], 0, ties) == (1.0, False)
    assert ce.group_credit([-2.0, -1.0, -1.0], 1, ties)[0] == {"wrong": 0.0, "right": 1.0, "half": 0.5}[ties]
    # three-way tie for the best: half credit is 1/3
    assert ce.group_credit([-1.0, -1.0, -1.0], 2, ties)[0] == pytest.approx(
        {"wrong": 0.0, "right": 1.0, "half": 1 / 3}[ties])
    # another candidate strictly better: wrong whatever the tie mode
    assert ce.group_credit([-1.0, -1.0, -0.5], 0, ties) == (0.0, False)
    # within the tolerance counts as a tie
    assert ce.group_credit([-1.0, -1.0 + 1e-6], 0, ties, tolerance=1e-4) == (expected, True)


@pytest.mark.unit
def test_official_tie_rules():
    """--ties official: Voita's np.argmin over losses (the first of the
    candidates tied for the best wins), ContraPro's and Bawden's strict
    comparison (a tie is wrong)."""
    first = dict(ties="official", rule="first")
    # the true translation listed twice (published ellipsis_vp and ellipsis_infl)
    assert ce.group_credit([-1.0, -1.0, -3.0], 0, **first) == (1.0, True)
    assert ce.group_credit([-1.0, -1.0, -3.0], 1, **first) == (0.0, True)  # an earlier copy wins argmin
    # true_ind not first (lexical cohesion has 0-4)
    assert ce.group_credit([-3.0, -1.0, -2.0, -1.0], 1, **first) == (1.0, True)
    assert ce.group_credit([-3.0, -1.0, -2.0, -1.0], 3, **first) == (0.0, True)
    assert ce.group_credit([-3.0, -2.0, -0.5, -1.0, -4.0], 2, **first) == (1.0, False)
    assert ce.group_credit([-3.0, -2.0, -0.5], 1, **first) == (0.0, False)
    assert ce.group_credit([-1.0 + 1e-6, -1.0], 1, tolerance=1e-4, **first) == (0.0, True)
    strict = dict(ties="official", rule="strict")
    assert ce.group_credit([-1.0, -1.0], 0, **strict) == ce.group_credit([-1.0, -1.0], 1, **strict) == (0.0, True)
    assert ce.group_credit([-1.0, -2.0, -2.0], 0, **strict) == (1.0, False)
    assert ce.group_credit([-2.0, -1.0, -1.0], 0, **strict) == (0.0, False)
    # wrong/right/half are the same for every rule
    assert ce.group_credit([-1.0, -1.0], 0, "wrong", rule="first") == (0.0, True)
    assert ce.group_credit([-1.0, -1.0], 1, "right", rule="first") == (1.0, True)
    with pytest.raises(ValueError, match="tie rule"):
        ce.group_credit([0.0, 1.0], 0, rule="last")
    # the official scripts' own lines, on many random groups with ties
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(2, 6))
        losses, true = rng.integers(0, 3, size=n).astype(float), int(rng.integers(0, n))
        voita = 1 if np.argmin(losses) == true else 0  # evaluate_consistency.py
        others = np.delete(losses, true)
        contrapro = all(losses[true] < e for e in others)  # evaluate.py: better = lt
        assert ce.group_credit(-losses, true, **first)[0] == voita
        assert ce.group_credit(-losses, true, **strict)[0] == float(contrapro)


def write_lines(path, lines):
    Path(path).write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
    return str(path)


@pytest.mark.unit
def test_scores_in_official_ties_each_format(tmp_path, capsys):
    """The same losses read with --scores-in: a Voita group holding the true
    translation twice is right (argmin), a tie in ContraPro or Bawden is
    wrong; --maximize reads log-probabilities."""
    src, dst, js = write_voita(tmp_path, "v", [
        ("s1", ["A", "A", "B"], 0, 1),          # the true candidate listed twice
        ("s2", ["C", "D", "E", "F"], 2, 2),     # true_ind 2
        ("s3", ["G", "H"], 1, 3),               # true second, tied: argmin takes the first
    ])
    voita = ["--format", "voita", "--src", str(src), "--dst", str(dst), "--json", str(js)]
    losses = write_lines(tmp_path / "v.txt", [1.5, 1.5, 2, 3, 3, 0.25, 4, 7, 7])
    res = ce.main([*voita, "--scores-in", losses])
    assert (res["correct"], res["tied"], res["ties"]) == (2, 2, "official")
    assert [b["correct"] for b in res["by"]["ctx_dist"].values()] == [1, 1, 0]
    assert ce.main([*voita, "--scores-in", losses, "--ties", "wrong"])["correct"] == 1
    assert ce.main([*voita, "--scores-in", losses, "--ties", "half"])["correct"] == 2.0
    # the same scores as log-probabilities: higher is better
    logp = write_lines(tmp_path / "vm.txt", [-1.5, -1.5, -2, -3, -3, -0.25, -4, -7, -7])
    assert ce.main([*voita, "--scores-in", logp, "--maximize"])["correct"] == 2

    entries = [{"src pronoun": "it", "ref pronoun": "es", "ante distance": 0, "intrasegmental": True,
                "errors": [{"contrastive": "x"}, {"contrastive": "y"}]},
               {"src pronoun": "It", "ref pronoun": "Er", "ante distance": 4, "intrasegmental": False,
                "errors": [{"contrastive": "z"}]},
               {"src pronoun": "it", "ref pronoun": "sie", "ante distance": 2, "intrasegmental": False,
                "errors": [{"contrastive": "w"}]}]
    (tmp_path / "cp.json").write_text(json.dumps(entries))
    cp = ["--format", "contrapro", "--json", str(tmp_path / "cp.json"),
          "--src", write_lines(tmp_path / "cp.en", ["s"] * 7), "--dst", write_lines(tmp_path / "cp.de", "rxyrzrw")]
    # ref beats both errors; ref ties with its error; ref loses
    res = ce.main([*cp, "--scores-in", write_lines(tmp_path / "cp.txt", [1, 2, 3, 5, 5, 9, 8])])
    assert (res["correct"], res["tied"]) == (1, 1)
    assert {k: b["correct"] for k, b in res["by"]["ante_distance"].items()} == {"0": 1, "2": 0, ">3": 0}
    assert {k: b["correct"] for k, b in res["by"]["category"].items()} == {"it:er": 0, "it:es": 1, "it:sie": 0}
    assert {k: (b["correct"], b["groups"]) for k, b in res["by"]["intrasegmental"].items()} == \
        {"False": (0, 2), "True": (1, 1)}
    assert ce.main([*cp, "--scores-in", str(tmp_path / "cp.txt"), "--ties", "right"])["correct"] == 2
    assert ce.main([*cp, "--scores-in", str(tmp_path / "cp.txt"), "--maximize"])["correct"] == 1  # 9 > 8

    (tmp_path / "a.json").write_text(json.dumps(BAWDEN_ANAPHORA))
    bawden = ["--format", "bawden", "--json", str(tmp_path / "a.json")]
    # block 1: right; block 2: one pair tied (wrong), one right
    res = ce.main([*bawden, "--scores-in", write_lines(tmp_path / "b.txt", [1, 2, 3, 3, 0.5, 0.75])])
    assert (res["correct"], res["tied"]) == (2, 1) and res["blocks"] == {"total": 2, "all_correct": 1}
    assert {k: b["correct"] for k, b in res["by"]["kind"].items()} == {"correct": 1, "semi-correct": 1}
    out = capsys.readouterr().out
    assert "blocks entirely right: 1/2" in out and "by intrasegmental:" in out


@pytest.mark.unit
def test_scores_in_bad_files_and_flags(tmp_path):
    src, dst, js = write_voita(tmp_path, "v", [("s", ["A", "B"], 0, 1)])
    voita = ["--format", "voita", "--src", str(src), "--dst", str(dst), "--json", str(js)]
    bad = write_lines(tmp_path / "s.txt", [1])
    with pytest.raises(ce.ContrastiveDataError, match=r"s.txt: 1 lines, but the test set has 2 candidates"):
        ce.main([*voita, "--scores-in", bad])
    bad = write_lines(tmp_path / "s.txt", [1, "-0.5x"])
    with pytest.raises(ce.ContrastiveDataError, match=r"s.txt:2: not a number: '-0.5x'"):
        ce.main([*voita, "--scores-in", bad])
    write_lines(tmp_path / "s.txt", ["nan", 1])
    with pytest.raises(ce.ContrastiveDataError, match=r"s.txt:1: nan is not a score"):
        ce.main([*voita, "--scores-in", bad])
    for extra in (["--path", "x.pt"], ["bin"], ["--max-groups", "1"]):
        with pytest.raises(SystemExit):
            ce.parse_args([*voita, "--scores-in", bad, *extra])
    with pytest.raises(SystemExit):
        ce.parse_args(voita)  # neither a model nor scores


@pytest.mark.unit
def test_accuracy_by_distance_and_true_index():
    groups = [fake_group(2, 0, 1), fake_group(3, 2, 1), fake_group(2, 1, 2), fake_group(2, 1, 3),
              fake_group(2, 0, 3)]
    scores = [[-1, -2], [-3, -2, -1], [-1, -1], [-1, -5], [-4, -4.5]]
    res = ce.evaluate(groups, scores, ties="wrong")
    assert res["groups"] == 5 and res["correct"] == 3 and res["tied"] == 1
    by = res["by"]["ctx_dist"]
    assert list(by) == ["1", "2", "3"]
    assert (by["1"]["accuracy"], by["2"]["accuracy"], by["3"]["accuracy"]) == (1.0, 0.0, 0.5)
    assert by["2"]["tied"] == 1
    assert ce.evaluate(groups, scores, ties="half")["correct"] == 3.5
    text = ce.format_results(res)
    assert "accuracy: 0.6000 (3/5 groups, 1 with the true candidate tied for best)" in text
    assert re.search(r"ctx_dist 3\s+0\.5000 \(1/2 groups", text)
    with pytest.raises(ValueError, match="2 scores for 3 candidates"):
        ce.evaluate([fake_group(3, 0, 1)], [[-1, -2]])


# ---------------------------------------------------------------------------
# scoring with a trained model
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("contrastive")
    raw = make_parallel_data(root / "raw", num_train=120, num_valid=12, num_test=14)
    bin_dir = preprocess(raw, root / "bin")
    train(bin_dir, root / "ckpt", arch="transformer_ctxenc_tiny", model_flags=(), task_flags=TASK,
          max_update=3, extra=["--share-all-embeddings"])
    return raw, bin_dir, root / "ckpt" / "checkpoint_last.pt"


def hand_made_set(raw, tmp_path, n=8):
    """A Voita-format set from the toy data: context = previous test line, true
    candidate = the reference, the others with its first or last word replaced; true_ind
    cycles through 0..2."""
    src = (raw / "test.src").read_text().splitlines()
    tgt = (raw / "test.tgt").read_text().splitlines()
    groups = []
    for i in range(1, n + 1):
        ref = tgt[i].split()
        # words outside the vocabulary (<unk>), so no candidate equals the reference
        wrong1 = " ".join(["X1"] + ref[1:])
        wrong2 = " ".join(ref[:-1] + ["X2"])
        cands = [wrong1, wrong2]
        t = i % 3
        cands.insert(t, " ".join(ref))
        groups.append((f"{src[i - 1]} _eos {src[i]}", [f"{tgt[i - 1]} _eos {c}" for c in cands], t, 1 + i % 2))
    return write_voita(tmp_path, "hand", groups)


def load_scorer(bin_dir, ckpt, argv=(), batch_size=4):
    args = ce.parse_args([str(bin_dir), "--path", str(ckpt), "--format", "voita", *argv])
    models, task = ce.load(args)
    return ce.ModelScorer(models, task, context_size=getattr(task.cfg, "context_size", 0),
                          batch_size=batch_size, length_normalize=args.length_normalize), models, task


def test_command_line_end_to_end(trained, tmp_path):
    raw, bin_dir, ckpt = trained
    src, dst, js = hand_made_set(raw, tmp_path)
    out, scores_file = tmp_path / "res.json", tmp_path / "scores.txt"
    proc = run_cli("fairseq_ctx.evaluation.contrastive", [
        bin_dir, "--path", ckpt, "--format", "voita", "--src", src, "--dst", dst, "--json", js,
        *TASK, "--context-size", 1, "--batch-size", 5, "--cpu", "--results", out, "--scores-out", scores_file])
    print(proc.stdout)
    res = json.loads(out.read_text())
    assert res["groups"] == 8 and res["candidates"] == 24 and res["context"] == "separate input"
    assert set(res["by"]["ctx_dist"]) == {"1", "2"}
    assert sum(b["groups"] for b in res["by"]["ctx_dist"].values()) == 8
    assert re.search(r"^accuracy: [0-9.]+ \(\S+/8 groups", proc.stdout, re.M)
    assert re.search(r"^  ctx_dist 1 +[0-9.]+ \(", proc.stdout, re.M)
    losses = [float(x) for x in scores_file.read_text().split()]
    assert len(losses) == 24 and all(math.isfinite(s) and s > 0 for s in losses)  # losses by default
    # the reported accuracy is what the written scores give, through --scores-in (round trip)
    out2 = tmp_path / "res2.json"
    ce.main(["--format", "voita", "--src", str(src), "--dst", str(dst), "--json", str(js),
             "--scores-in", str(scores_file), "--results", str(out2)])
    again = json.loads(out2.read_text())
    for key in ("accuracy", "correct", "groups", "tied", "by", "ties"):
        assert again[key] == res[key], key
    groups = ce.read_voita(src, dst, js)
    assert ce.evaluate(groups, [-np.array(losses[3 * i:3 * i + 3]) for i in range(8)])["correct"] == res["correct"]
    # a malformed set: one line, naming the file
    dst.write_text("\n".join(dst.read_text().splitlines()[:-2]) + "\n")
    proc = run_cli("fairseq_ctx.evaluation.contrastive", [bin_dir, "--path", ckpt, "--format", "voita", "--src", src,
                                               "--dst", dst, "--json", js], check=False)
    assert proc.returncode != 0
    assert f"fairseq_ctx: error: {dst}: 22 lines, but {js} lists 24 candidates in 8 groups" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_scores_match_fairseq_sequence_scorer(trained, tmp_path):
    """Teacher-forced sums equal fairseq's own reference scorer, whatever the
    batching; the context reaches the model."""
    from fairseq.sequence_scorer import SequenceScorer

    raw, bin_dir, ckpt = trained
    groups = ce.read_voita(*hand_made_set(raw, tmp_path))
    cands = [c for g in groups for c in g.candidates]
    scorer, models, task = load_scorer(bin_dir, ckpt, batch_size=7)
    rows = []
    hook = models[0].encoder.register_forward_pre_hook(lambda mod, inp, kw: rows.append(len(kw["src_tokens"]))
                                                       if "src_tokens" in kw else rows.append(len(inp[0])),
                                                       with_kwargs=True)
    ours = scorer.score(cands)  # batches of 7: a group may straddle two batches
    assert len(groups) < sum(rows) <= len(groups) + math.ceil(len(cands) / 7) - 1
    rows.clear()
    scorer.batch_size = 6
    # the 3 candidates of a group share one encoder pass
    assert np.allclose(scorer.score(cands), ours, atol=1e-4)
    assert sum(rows) == len(groups) and len(cands) == 3 * len(groups)
    rows.clear()
    scorer.share_encoder = False
    assert np.allclose(scorer.score(cands), ours, atol=1e-4) and sum(rows) == len(cands)
    scorer.share_encoder = True
    hook.remove()
    scorer.batch_size = 1
    assert np.allclose(scorer.score(cands), ours, atol=1e-4)
    reference = SequenceScorer(task.target_dictionary)
    for c, s in zip(cands[:6], ours[:6]):
        items, _ = scorer.encode([c])
        ds = scorer._dataset(items)
        sample = task.model_input(models, ds.collater([ds[0]]))
        assert "ctx_tokens" in sample["net_input"]
        hypo = reference.generate(models, sample)[0][0]
        assert hypo["positional_scores"].sum().item() == pytest.approx(s, abs=1e-4)
    # length normalisation divides by the number of target tokens (EOS included)
    scorer.length_normalize = True
    n_tok = [len(scorer.encode([c])[0][0][2]) for c in cands]
    assert np.allclose(scorer.score(cands), ours / np.array(n_tok), atol=1e-5)
    scorer.length_normalize = False
    # another context, another score; no context when --context-size 0
    moved = [ce.Candidate(c.source, c.target, ["w1 w2 w3 w4"]) for c in cands[:3]]
    assert not np.allclose(scorer.score(moved), ours[:3], atol=1e-4)
    scorer.context_size = 0
    empty = [ce.Candidate(c.source, c.target, []) for c in cands[:3]]
    assert np.allclose(scorer.score(cands[:3]), scorer.score(empty), atol=1e-6)


@pytest.mark.parametrize("k", [1, 2])
def test_context_slice_keeps_the_newest(trained, k):
    """--context-size k gives the model the k newest context sentences (all
    of them when a candidate has fewer): 0, 1, 2 and 3 sentences."""
    raw, bin_dir, ckpt = trained
    src = (raw / "test.src").read_text().splitlines()
    tgt = (raw / "test.tgt").read_text().splitlines()
    scorer, _, task = load_scorer(bin_dir, ckpt, ["--context-size", str(k)])
    everything = ce.ModelScorer(scorer.models, task, context_size=10)
    assert scorer.context_size == k
    pool = src[:3]  # oldest first
    for n in range(4):
        context = pool[3 - n:]
        cand = ce.Candidate(src[5], tgt[5], context)
        (item,), _ = scorer.encode([cand])
        assert [task.source_dictionary.string(t) for t in item[1]] == context[-k:] if n else item[1] == []
        # the score is the one given exactly the newest k sentences ...
        newest = ce.Candidate(src[5], tgt[5], context[max(n - k, 0):])
        assert scorer.score([cand])[0] == pytest.approx(everything.score([newest])[0], abs=1e-6)
        if n > k:  # ... and not the one given the oldest k
            oldest = ce.Candidate(src[5], tgt[5], context[:k])
            assert abs(scorer.score([cand])[0] - everything.score([oldest])[0]) > 1e-5


def test_two_model_ensemble_matches_fairseq_sequence_scorer(trained, tmp_path):
    """An ensemble of two different models scores as fairseq's own
    SequenceScorer does: the log of the mean of the models' probabilities."""
    from fairseq.sequence_scorer import SequenceScorer

    raw, bin_dir, ckpt = trained
    models, task = ce.load(ce.parse_args([str(bin_dir), "--path", f"{ckpt}:{ckpt}", "--format", "voita"]))
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():  # the second member differs from the first
        for p in models[1].parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen))
    cands = [c for g in ce.read_voita(*hand_made_set(raw, tmp_path, n=4)) for c in g.candidates]
    scorer = ce.ModelScorer(models, task, context_size=1, batch_size=5)
    ours = scorer.score(cands)
    items, index = scorer.encode(cands)
    ds = scorer._dataset(items)
    sample = task.model_input(models, ds.collater([ds[i] for i in range(len(items))]))
    assert "ctx_tokens" in sample["net_input"]
    hypos = SequenceScorer(task.target_dictionary).generate(models, sample)
    reference = np.zeros(len(items))
    reference[sample["id"].numpy()] = [h[0]["positional_scores"].sum().item() for h in hypos]
    assert np.allclose(ours, reference[index], atol=1e-4)
    # the members disagree, so a mean of log-probabilities would be told apart
    single = [ce.ModelScorer([m], task, context_size=1).score(cands) for m in models]
    assert np.abs(single[0] - single[1]).max() > 0.1
    assert np.abs((single[0] + single[1]) / 2 - ours).max() > 1e-3


def test_max_tokens_counts_context(trained, tmp_path, monkeypatch):
    """--max-tokens caps a batch's padded size with the context counted; the
    scores do not depend on it."""
    raw, bin_dir, ckpt = trained
    scorer, _, _ = load_scorer(bin_dir, ckpt, ["--context-size", "2"], batch_size=100)
    src = (raw / "test.src").read_text().splitlines()
    cands = [ce.Candidate(c.source, c.target, [src[0], src[1]], c.where)
             for g in ce.read_voita(*hand_made_set(raw, tmp_path)) for c in g.candidates]
    ref = scorer.score(cands)
    items, _ = scorer.encode(cands)
    sizes = np.array([ce.ModelScorer.item_size(it) for it in items])
    no_context = np.array([max(len(s), len(t)) for s, _, t, _ in items])
    assert (sizes > no_context).all()  # two context sentences outweigh every target here
    seen = []
    real = scorer._score_batch
    monkeypatch.setattr(scorer, "_score_batch", lambda batch, *a: seen.append(batch["id"].numpy()) or real(batch, *a))
    scorer.max_tokens = int(2 * sizes.max())
    assert np.allclose(scorer.score(cands), ref, atol=1e-4)
    assert all(len(ids) * sizes[ids].max() <= scorer.max_tokens for ids in seen) and len(seen) > 1
    assert sorted(np.concatenate(seen).tolist()) == list(range(len(items)))
    scorer.max_tokens = int(sizes.max()) - 1
    with pytest.raises(ce.ContrastiveDataError, match=r"hand.dst:\d+: \d+ tokens with its context, more than "
                                                      r"--max-tokens"):
        scorer.score(cands)


def test_unk_warning(trained, tmp_path, caplog):
    """Text the dictionary does not know (a model trained on subword units
    scored without --bpe) is mostly <unk>: one warning naming the flags."""
    raw, bin_dir, ckpt = trained
    scorer, _, _ = load_scorer(bin_dir, ckpt)
    cands = [g.candidates[g.true_index] for g in ce.read_voita(*hand_made_set(raw, tmp_path))]
    def warnings():  # other loggers may print INFO lines while the scorer loads (e.g. fairseq's dictionary sizes)
        return [r.getMessage() for r in caplog.records if r.levelno >= 30 and r.name == "fairseq_ctx.evaluation.contrastive"]

    with caplog.at_level("WARNING", logger="fairseq_ctx.evaluation.contrastive"):
        scorer.score(cands)
    assert scorer.unk_rates == {"source": 0.0, "target": 0.0} and not warnings()
    words = [ce.Candidate(c.source, " ".join("q" + w for w in c.target.split()), c.source_context)
             for c in cands]
    with caplog.at_level("WARNING", logger="fairseq_ctx.evaluation.contrastive"):
        scorer.score(words)
    assert scorer.unk_rates == {"source": 0.0, "target": 1.0}
    (msg,) = warnings()
    assert re.match(r"100\.0% of the \d+ target tokens scored are <unk>: .*--bpe.*--source-bpe-model", msg)


def test_concat_override_and_sentence_level_task(trained, tmp_path):
    """--concat-context on a checkpoint trained without it stops in one line
    (another input format: the flags it was trained with are checked, as in
    fairseq-generate); a --task translation model scores without context."""
    from fairseq import options, tasks

    raw, bin_dir, ckpt = trained
    groups = ce.read_voita(*hand_made_set(raw, tmp_path, n=4))
    cands = [c for g in groups for c in g.candidates]
    with pytest.raises(fairseq_ctx.errors.ConfigError, match="--concat-context: the checkpoint was trained with "
                       "no --concat-context, this command gives --concat-context"):
        load_scorer(bin_dir, ckpt, ["--concat-context"])
    _, _, task = load_scorer(bin_dir, ckpt, ["--no-concat-context"])  # the flag it was trained with
    assert not task.cfg.concat_context

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [
        str(bin_dir), "--task", "translation", "--arch", "transformer", "--encoder-layers", "1",
        "--decoder-layers", "1", "--encoder-embed-dim", "16", "--decoder-embed-dim", "16",
        "--encoder-ffn-embed-dim", "32", "--decoder-ffn-embed-dim", "32"])
    task = tasks.setup_task(args)
    torch.manual_seed(0)
    model = task.build_model(args)
    plain = ce.ModelScorer([model], task, batch_size=3)
    s = plain.score(cands)
    no_ctx = plain.score([ce.Candidate(c.source, c.target, []) for c in cands])
    assert np.isfinite(s).all() and np.allclose(s, no_ctx, atol=1e-6)
    # identical inputs are scored once and tie exactly
    twice = plain.score([cands[0], cands[0]])
    assert twice[0] == twice[1]


def test_task_flags_wrong_task_and_bad_flags(trained, tmp_path):
    raw, bin_dir, ckpt = trained
    _, _, task = load_scorer(bin_dir, ckpt)
    assert task.cfg.context_size == 1 and not task.cfg.concat_context  # from the checkpoint
    scorer, _, task = load_scorer(bin_dir, ckpt, ["--task", "document_translation", "--context-size", "2"])
    assert task.cfg.context_size == 2 and scorer.context_size == 2
    args = ce.parse_args([str(bin_dir), "--path", str(ckpt), "--format", "voita", "--task", "translation"])
    with pytest.raises(fairseq_ctx.errors.FairseqCtxError, match="trained with --task document_translation"):
        ce.load(args)
    with pytest.raises(SystemExit):
        ce.parse_args([str(bin_dir), "--path", str(ckpt), "--format", "voita", "--context-size", "-1"])
    with pytest.raises(SystemExit):
        ce.parse_args([str(bin_dir), "--path", str(ckpt), "--format", "voita", "--ties", "maybe"])


@needs_voita
def test_voita_files_through_tiny_model(trained, capsys):
    """The real Voita sets (Russian/English the toy dictionary lacks: words
    become <unk>) parse and score; the first 50 groups of each file."""
    _, bin_dir, ckpt = trained
    for name in VOITA_SETS:
        res = ce.main([str(bin_dir), "--path", str(ckpt), "--format", "voita", "--src", str(VOITA / f"{name}.src"),
                       "--dst", str(VOITA / f"{name}.dst"), "--json", str(VOITA / f"{name}.json"),
                       "--max-groups", "50", "--batch-size", "64", "--ties", "half", "--cpu"])
        out = capsys.readouterr().out
        print(name, out, sep="\n")
        assert res["groups"] == 50 and 0.0 <= res["accuracy"] <= 1.0
        assert sum(b["groups"] for b in res["by"]["ctx_dist"].values()) == 50
        assert re.search(r"^  ctx_dist 1 +[0-9.]+ \(", out, re.M)


def test_contrapro_and_bawden_commands_and_ensemble(trained, tmp_path, capsys):
    """The other two formats through main(), on sets in the toy vocabulary;
    an ensemble of a model with itself scores as the model alone."""
    raw, bin_dir, ckpt = trained
    src = (raw / "test.src").read_text().splitlines()
    tgt = (raw / "test.tgt").read_text().splitlines()
    entries, s_lines, d_lines, c_lines = [], [], [], []
    for i in range(1, 5):
        wrong = [" ".join(["W1"] + tgt[i].split()[1:]), " ".join(["W2"] + tgt[i].split()[1:])][:1 + i % 2]
        entries.append({"src pronoun": "it", "ref pronoun": ["er", "sie"][i % 2], "ante distance": i,
                        "errors": [{"contrastive": w} for w in wrong]})
        for line in [tgt[i]] + wrong:
            s_lines.append(src[i])
            d_lines.append(line)
            c_lines.append(src[i - 1])
    for name, lines in (("text.src", s_lines), ("text.tgt", d_lines), ("context.src", c_lines)):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    (tmp_path / "contrapro.json").write_text(json.dumps(entries))
    res = ce.main([str(bin_dir), "--path", str(ckpt), "--format", "contrapro",
                   "--json", str(tmp_path / "contrapro.json"),
                   "--src", str(tmp_path / "text.src"), "--dst", str(tmp_path / "text.tgt"),
                   "--src-context", str(tmp_path / "context.src"), "--scores-out", str(tmp_path / "s1")])
    out = capsys.readouterr().out
    assert res["groups"] == 4 and res["candidates"] == len(d_lines)
    assert set(res["by"]["ante_distance"]) == {"1", "2", "3", ">3"}
    assert set(res["by"]["category"]) == {"it:er", "it:sie"}
    assert "by ante_distance:" in out and "by category:" in out

    bawden = {str(i): {"src": [src[i - 1], src[i]],
                       "trg": [{"correct": [tgt[i - 1], tgt[i]], "incorrect": [tgt[i - 1], "W1 " + tgt[i]],
                                "type": "m.sg"}]} for i in range(1, 4)}
    (tmp_path / "anaphora.json").write_text(json.dumps(bawden))
    res = ce.main([str(bin_dir), "--path", f"{ckpt}:{ckpt}", "--format", "bawden",
                   "--json", str(tmp_path / "anaphora.json"), "--ties", "right"])
    assert res["groups"] == 3 and res["by"]["kind"] == {"correct": res["by"]["type"]["m.sg"]}
    assert res["ties"] == "right"
    capsys.readouterr()
    # ensemble of the model with itself: the same scores
    ce.main([str(bin_dir), "--path", f"{ckpt}:{ckpt}", "--format", "contrapro", "--json",
             str(tmp_path / "contrapro.json"), "--src", str(tmp_path / "text.src"), "--dst",
             str(tmp_path / "text.tgt"), "--src-context", str(tmp_path / "context.src"),
             "--scores-out", str(tmp_path / "s2")])
    s1 = np.array((tmp_path / "s1").read_text().split(), dtype=float)
    s2 = np.array((tmp_path / "s2").read_text().split(), dtype=float)
    assert np.allclose(s1, s2, atol=1e-4)


@pytest.mark.unit
def test_sentencepiece_option(tmp_path):
    """--bpe sentencepiece adds --sentencepiece-model and splits the text
    before the dictionary sees it."""
    spm = pytest.importorskip("sentencepiece")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"the cat sat on the mat number {i} again" for i in range(200)) + "\n")
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(tmp_path / "spm"), vocab_size=30,
                                   model_type="unigram", minloglevel=2)
    args = ce.parse_args(["bin", "--path", "x.pt", "--format", "voita", "--bpe", "sentencepiece",
                          "--sentencepiece-model", str(tmp_path / "spm.model")])
    encode = ce.build_encoders(args)
    pieces = encode("the cat sat")
    assert pieces.split()[0].startswith("\u2581")
    assert "".join(pieces.split()).replace("\u2581", " ").strip() == "the cat sat"
    assert ce.build_encoders(ce.parse_args(["bin", "--path", "x.pt", "--format", "voita"]))("a b") == "a b"


@pytest.mark.unit
def test_separate_source_and_target_subword_models(tmp_path):
    """--source-bpe-model/--target-bpe-model: one sentencepiece model per
    language, each side split by its own (as fairseq-preprocess saw it)."""
    spm = pytest.importorskip("sentencepiece")
    models = {}
    for side, text in (("src", "the cat sat on the mat number {} again"),
                       ("tgt", "die katze sass auf der matte nummer {} wieder")):
        corpus = tmp_path / f"{side}.txt"
        corpus.write_text("\n".join(text.format(i) for i in range(200)) + "\n")
        spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(tmp_path / side), vocab_size=30,
                                       model_type="unigram", minloglevel=2)
        models[side] = spm.SentencePieceProcessor(model_file=str(tmp_path / f"{side}.model"))
    args = ce.parse_args(["bin", "--path", "x.pt", "--format", "voita", "--bpe", "sentencepiece",
                          "--source-bpe-model", str(tmp_path / "src.model"),
                          "--target-bpe-model", str(tmp_path / "tgt.model")])
    enc_src, enc_tgt = ce.build_side_encoders(args)
    for text in ("the cat sat", "die katze sass"):
        assert enc_src(text).split() == models["src"].encode(text, out_type=str)
        assert enc_tgt(text).split() == models["tgt"].encode(text, out_type=str)
    assert enc_src("die katze sass") != enc_tgt("die katze sass")
    # one side given: the other keeps --sentencepiece-model
    args = ce.parse_args(["bin", "--path", "x.pt", "--format", "voita", "--bpe", "sentencepiece",
                          "--sentencepiece-model", str(tmp_path / "src.model"),
                          "--target-bpe-model", str(tmp_path / "tgt.model")])
    enc_src, enc_tgt = ce.build_side_encoders(args)
    assert enc_src("die katze").split() == models["src"].encode("die katze", out_type=str)
    assert enc_tgt("die katze").split() == models["tgt"].encode("die katze", out_type=str)
    for bad in (["--source-bpe-model", "m"], ["--bpe", "gpt2", "--target-bpe-model", "m"]):
        with pytest.raises(SystemExit):
            ce.parse_args(["bin", "--path", "x.pt", "--format", "voita", *bad])


# ---------------------------------------------------------------------------
# target context: the 2-to-2 concatenation baseline (Tiedemann and Scherrer 2017)
# ---------------------------------------------------------------------------

TWO_TO_TWO = [*TASK, "--concat-context", "--target-context"]


def test_two_to_two_dataset_layout(trained):
    """--concat-context --target-context glues the previous target sentence of
    the document to the target (and counts it in the batch sizes);
    --target-context alone is refused."""
    from fairseq_ctx.errors import ConfigError
    from fairseq_ctx.tasks.document_translation import DocumentTranslationConfig, DocumentTranslationTask

    _, bin_dir, _ = trained

    def config(**flags):
        return DocumentTranslationConfig(data=str(bin_dir), source_lang="src", target_lang="tgt",
                                         train_subset="train", dataset_impl="mmap", required_seq_len_multiple=1,
                                         **flags)

    task = DocumentTranslationTask.setup_task(config(concat_context=True, target_context=True))
    task.load_dataset("valid")
    ds = task.datasets["valid"]
    pair, sep, eos = ds.pair, task.tgt_sep, task.target_dictionary.eos()
    for i in range(len(ds)):
        prev = ds.context_index[i, -1]
        expected = pair.tgt[i] if prev < 0 else torch.cat([pair.tgt[prev][:-1], torch.tensor([sep]), pair.tgt[i]])
        assert ds[i]["target"].tolist() == expected.tolist()
        assert ds.tgt_sizes[i] == len(expected)
    assert (ds.context_index[:, -1] >= 0).any() and (ds.context_index[:, -1] < 0).any()
    assert ds[1]["target"][-1] == eos
    with pytest.raises(ConfigError, match="--target-context needs --concat-context"):
        DocumentTranslationTask.setup_task(config(target_context=True))


@pytest.fixture(scope="module")
def two_to_two(trained, tmp_path_factory):
    raw, bin_dir, _ = trained
    root = tmp_path_factory.mktemp("two_to_two")
    train(bin_dir, root / "ckpt", arch="transformer", task_flags=TWO_TO_TWO, max_update=2,
          extra=["--share-all-embeddings"])
    return raw, bin_dir, root / "ckpt" / "checkpoint_last.pt"


def test_two_to_two_generate_and_score(two_to_two, tmp_path):
    """fairseq-generate gives one output per input sentence, the last
    sentence only, scored against the reference sentence alone; the scorer
    forces the suite's target context as the decoder's prefix and scores
    only the current sentence's tokens."""
    raw, bin_dir, ckpt = two_to_two
    src = (raw / "test.src").read_text().splitlines()
    tgt = (raw / "test.tgt").read_text().splitlines()
    hyps, srcs, proc = generate(bin_dir, ckpt, task_flags=TWO_TO_TWO, beam=1)
    assert sorted(hyps) == list(range(len(src))) and not any("<sep>" in h for h, _ in hyps.values())
    refs = dict(re.findall(r"^T-(\d+)\t(.*)$", proc.stdout, re.M))
    assert {int(i): t for i, t in refs.items()} == dict(enumerate(tgt))  # the reference sentence alone
    assert all(s == src[i] or "<sep>" in s for i, s in srcs.items())  # the source keeps its context

    groups = ce.read_voita(*hand_made_set(raw, tmp_path))
    cands = [c for g in groups for c in g.candidates]
    assert all(c.target_context for c in cands)
    models, task = ce.load(ce.parse_args([str(bin_dir), "--path", str(ckpt), "--format", "voita"]))
    assert task.cfg.target_context and task.cfg.concat_context
    scorer = ce.ModelScorer(models, task, context_size=1, target_context_size=1, batch_size=5)
    ours = scorer.score(cands)
    # the reference: the model's own forward on the glued pair, summed over the current sentence
    model, sd, td = models[0], task.source_dictionary, task.target_dictionary
    for c, score in list(zip(cands, ours))[:4]:
        cur = td.encode_line(c.target, add_if_not_exist=False).long()
        full_tgt = torch.cat([td.encode_line(c.target_context[-1], add_if_not_exist=False).long()[:-1],
                              torch.tensor([task.tgt_sep]), cur])
        full_src = torch.cat([sd.encode_line(c.source_context[-1], add_if_not_exist=False).long()[:-1],
                              torch.tensor([task.sep]), sd.encode_line(c.source, add_if_not_exist=False).long()])
        prev = torch.cat([torch.tensor([td.eos()]), full_tgt[:-1]])
        with torch.no_grad():
            out = model(full_src[None], torch.tensor([len(full_src)]), prev[None])
            lprobs = model.get_normalized_probs(out, log_probs=True)[0]  # T x V
        token = lprobs.gather(-1, full_tgt[:, None])[:, 0]
        assert score == pytest.approx(token[-len(cur):].sum().item(), abs=1e-4)
        assert abs(score - token.sum().item()) > 1e-3  # the prefix is not scored
    # the prefix reaches the model: another target context, another score
    moved = [ce.Candidate(c.source, c.target, c.source_context, c.where, ["W1 W2 W3"]) for c in cands[:3]]
    assert np.abs(scorer.score(moved) - ours[:3]).max() > 1e-4
    # through the command line: the checkpoint's --target-context turns it on
    res = ce.main([str(bin_dir), "--path", str(ckpt), "--format", "voita",
                   *[str(x) for x in (["--src", tmp_path / "hand.src", "--dst", tmp_path / "hand.dst",
                                       "--json", tmp_path / "hand.json"])],
                   "--scores-out", str(tmp_path / "s.txt"), "--cpu"])
    assert res["target_context_size"] == 1 and "forced decoder prefix" in res["context"]
    assert np.allclose(-np.loadtxt(tmp_path / "s.txt"), ours, atol=1e-4)
