"""Tests of the scoring module (fairseq_ctx.evaluation): known answers for
detokenized and compound-split BLEU, the compound-splitting rule against
Perl itself, paired bootstrap p-values, length buckets, generate-log
parsing, and the command end to end."""
import json
import random
import shutil
import subprocess

import pytest
import sacrebleu

from fairseq_ctx.evaluation import (DEFAULT_EDGES, EvaluationError, assign_buckets, bleu_by_length, bucket_labels,
                                    compound_split, compound_split_bleu, compound_split_lines, detok_bleu,
                                    paired_bootstrap, read_generate_log, read_hypotheses, tokenized_bleu)
from fairseq_ctx.evaluation import score as score_cli
from tests.utils import run_cli

PERL_RULE = r"s{(\S)-(\S)}{$1 ##AT##-##AT## $2}g"  # fairseq scripts/compound_split_bleu.sh, t2t get_ende_bleu.sh

HYPHEN_CASES = [
    ("ein rich-text Format", "ein rich ##AT##-##AT## text Format"),
    ("a-b-c", "a ##AT##-##AT## b-c"),  # matches do not overlap: the c-side hyphen survives, as in Perl
    ("a-b-c-d", "a ##AT##-##AT## b-c ##AT##-##AT## d"),
    ("Haus-Tür und E-Mail-Adresse", "Haus ##AT##-##AT## Tür und E ##AT##-##AT## Mail ##AT##-##AT## Adresse"),
    ("x - y", "x - y"),
    ("-x y- --", "-x y- --"),
    ("a--b", "a ##AT##-##AT## -b"),
    ("Rich @-@ Text", "Rich @ ##AT##-##AT## @ Text"),  # tokenizer.perl -a output, as fairseq's script sees it
    ("1990-2000", "1990 ##AT##-##AT## 2000"),
    ("Grüß-Gott é-è", "Grüß ##AT##-##AT## Gott é ##AT##-##AT## è"),
    ("ü-ö-ä", "ü ##AT##-##AT## ö ##AT##-##AT## ä"),  # Perl works on bytes: ö is two
    ("kein Bindestrich", "kein Bindestrich"),
]


def random_corpus(n=200, seed=0, length=12):
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(30)]
    return [" ".join(rng.choice(vocab) for _ in range(rng.randint(3, length))) for _ in range(n)]


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def generate_log(path, hyps, order, missing=(), srcs=None):
    """A fairseq-generate log with S/T/H/D/P lines in ``order`` of ids, and the
    usual INFO lines around them."""
    out = ["INFO:fairseq_cli.generate:loading model(s)"]
    for i in order:
        if i in missing:
            continue
        out += [f"S-{i}\t{srcs[i] if srcs else 'src ' + str(i)}", f"T-{i}\tref {i}",
                f"H-{i}\t-0.5\t{hyps[i]}", f"D-{i}\t-0.5\t{hyps[i]}", f"P-{i}\t-0.1 -0.2"]
    out.append("Generate test with beam=4: BLEU4 = 1.00, 1/1/1/1 (BP=1.000, ratio=1.0, syslen=1, reflen=1)")
    return write(path, out)


# ---------------------------------------------------------------------------
# BLEU
# ---------------------------------------------------------------------------

@pytest.mark.unit
def test_identical_hypotheses_score_100_with_signature():
    refs = ["The cat sat on the mat.", "Das ist ein Test, oder?", "A third sentence here."]
    score, sig = detok_bleu(refs, refs)
    assert score == pytest.approx(100.0)
    assert sig.startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert compound_split_bleu(refs, refs, lang="de")[0] == pytest.approx(100.0)
    # the same number as sacreBLEU's own function
    hyps = ["The cat sat on a mat.", "Das ist kein Test.", "A third one."]
    assert detok_bleu(hyps, refs)[0] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)


@pytest.mark.unit
@pytest.mark.parametrize("line,expected", HYPHEN_CASES)
def test_compound_split_known_cases(line, expected):
    assert compound_split(line) == expected


@pytest.mark.skipif(shutil.which("perl") is None, reason="perl not installed")
def test_compound_split_equals_the_perl_one_liner():
    lines = [c for c, _ in HYPHEN_CASES] + ["tab\there-and\tthere", "  lead-ing  spaces-  ", "ü-ö-ä-ß"]
    perl = subprocess.run(["perl", "-ple", PERL_RULE], input="\n".join(lines) + "\n",
                          capture_output=True, text=True, check=True, encoding="utf-8")
    assert perl.stdout.split("\n")[:-1] == [compound_split(line) for line in lines]


@pytest.mark.unit
def test_tokenized_bleu_is_sacrebleu_on_the_split_text():
    refs = ["Das ist ein Rich-Text-Format, oder?", "Die E-Mail-Adresse ist neu.", "Er kam gestern an."]
    hyps = ["Das ist ein Rich-Text Format oder?", "Die E-Mail ist neu.", "Er kam gestern."]
    # Moses-tokenized (tokenizer.perl -l de, no -a), then split by hand:
    refs_tok = ["Das ist ein Rich-Text-Format , oder ?", "Die E-Mail-Adresse ist neu .", "Er kam gestern an ."]
    hyps_tok = ["Das ist ein Rich-Text Format oder ?", "Die E-Mail ist neu .", "Er kam gestern ."]
    refs_split = ["Das ist ein Rich ##AT##-##AT## Text ##AT##-##AT## Format , oder ?",
                  "Die E ##AT##-##AT## Mail ##AT##-##AT## Adresse ist neu .", "Er kam gestern an ."]
    hyps_split = ["Das ist ein Rich ##AT##-##AT## Text Format oder ?", "Die E ##AT##-##AT## Mail ist neu .",
                  "Er kam gestern ."]
    assert compound_split_lines(refs, "de") == refs_split
    assert compound_split_lines(hyps, "de") == hyps_split
    expected = sacrebleu.corpus_bleu(hyps_split, [refs_split], tokenize="none", smooth_method="none", force=True)
    score, sig = compound_split_bleu(hyps, refs, lang="de")
    assert score == pytest.approx(expected.score)
    assert "tok:none|smooth:none" in sig and "moses-de+compound-split" in sig
    # splitting matters here: tokenized BLEU without it differs
    unsplit = sacrebleu.corpus_bleu(hyps_tok, [refs_tok], tokenize="none", smooth_method="none", force=True).score
    assert abs(unsplit - score) > 1.0
    # text already tokenized (lang=None) is only split
    assert compound_split_bleu(hyps_tok, refs_tok, lang=None)[0] == pytest.approx(expected.score)
    assert tokenized_bleu(hyps_split, refs_split)[0] == pytest.approx(expected.score)


def fairseq_score(hyps, refs):
    """BLEU as ``fairseq-score --sys --ref`` computes it (fairseq_cli/score.py):
    fairseq's C BLEU scorer on dictionary-encoded whitespace tokens."""
    from fairseq.data import dictionary
    from fairseq.scoring import bleu

    d = dictionary.Dictionary()
    scorer = bleu.Scorer(bleu.BleuConfig(pad=d.pad(), eos=d.eos(), unk=d.unk()))
    for h, r in zip(hyps, refs):
        scorer.add(d.encode_line(r), d.encode_line(h))
    return scorer.score()


@pytest.mark.unit
def test_tokenized_bleu_equals_fairseq_score():
    """compound_split_bleu.sh ends with fairseq-score on the split text."""
    rng = random.Random(8)
    words = "Das Haus ist groß , und die E-Mail-Adresse ist neu . Rich-Text-Format oder ?".split()
    refs = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 15))) for _ in range(100)]
    hyps = [" ".join(w for w in r.split() if rng.random() > 0.2) or "x" for r in refs]
    split_h, split_r = compound_split_lines(hyps, None), compound_split_lines(refs, None)
    assert tokenized_bleu(split_h, split_r)[0] == pytest.approx(fairseq_score(split_h, split_r), abs=1e-9)
    assert compound_split_bleu(hyps, refs, lang=None)[0] == pytest.approx(fairseq_score(split_h, split_r), abs=1e-9)
    # no 4-gram matches: both 0 (no smoothing)
    assert tokenized_bleu(["a b c x", "d e"], ["a b c d", "d e"])[0] == fairseq_score(["a b c x", "d e"],
                                                                                       ["a b c d", "d e"]) == 0.0


@pytest.mark.unit
def test_length_mismatch_is_an_error():
    with pytest.raises(EvaluationError, match="2 hypotheses, but 3 references"):
        detok_bleu(["a", "b"], ["a", "b", "c"])


# ---------------------------------------------------------------------------
# paired bootstrap
# ---------------------------------------------------------------------------

@pytest.mark.unit
def test_paired_bootstrap_p_values():
    refs = random_corpus(200, seed=1)

    def half(r):
        return " ".join(r.split()[: max(1, len(r.split()) // 2)])

    # baseline: every other sentence truncated to half; "better": all perfect
    baseline = [r if i % 2 else half(r) for i, r in enumerate(refs)]
    better = list(refs)
    # "noise": the baseline with 20 random sentences swapped between perfect and truncated, both ways
    noise = list(baseline)
    for i in random.Random(3).sample(range(len(refs)), 20):
        noise[i] = refs[i] if i % 2 == 0 else half(refs[i])
    res, sig = paired_bootstrap(baseline, {"better": better, "same": list(baseline), "noise": noise}, refs,
                                n_samples=1000, seed=12345)
    assert "bs:1000|seed:12345" in sig
    assert res["better"].delta > 10 and res["better"].p_value < 0.01
    assert res["better"].p_value == pytest.approx(1 / 1001)
    assert res["same"].delta == 0 and res["same"].p_value == 1.0  # sacreBLEU itself would say 1/1001
    assert res["noise"].delta != 0 and res["noise"].p_value > 0.2  # sacreBLEU's own p-value
    assert res["better"].score == pytest.approx(detok_bleu(better, refs)[0])
    assert res["better"].baseline_score == pytest.approx(detok_bleu(baseline, refs)[0])
    # fixed seed: the same numbers again
    again, _ = paired_bootstrap(baseline, {"noise": noise}, refs, n_samples=1000, seed=12345)
    assert again["noise"].p_value == res["noise"].p_value and again["noise"].ci == res["noise"].ci
    with pytest.raises(EvaluationError, match="seed"):
        paired_bootstrap(baseline, {"x": better}, refs, seed=0)


# ---------------------------------------------------------------------------
# length buckets
# ---------------------------------------------------------------------------

@pytest.mark.unit
def test_bucket_assignment_is_closed_on_the_left():
    """DC's groups: "fewer than ten subword tokens" is <10, "greater than or
    equal to 20" opens at 20; so every edge length goes to the upper bucket
    (bisect_left would put 10, 20, ... in the lower one: this test fails)."""
    assert bucket_labels(DEFAULT_EDGES) == ["<10", "10-19", "20-29", "30-39", "40-49", ">=50"]
    lengths = [0, 9, 10, 19, 20, 29, 30, 39, 40, 49, 50, 200]
    assert assign_buckets(lengths) == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert bucket_labels([5, 6]) == ["<5", "5", ">=6"]
    assert assign_buckets([4, 5, 6], [5, 6]) == [0, 1, 2]
    with pytest.raises(EvaluationError):
        bucket_labels([20, 10])


@pytest.mark.unit
def test_bucket_bounds_and_given_lengths():
    refs = random_corpus(6, seed=2)
    res = bleu_by_length(None, {"ref": refs}, refs, edges=(10, 20), lengths=[9, 10, 19, 20, 0, 35], unit="subwords")
    assert [(b["label"], b["min"], b["max"], b["n"]) for b in res["buckets"]] == \
        [("<10", 0, 9, 2), ("10-19", 10, 19, 2), (">=20", 20, None, 2)]
    assert res["unit"] == "subwords" and res["groups"] == 3 and res["closed"] == "left"
    with pytest.raises(EvaluationError, match="5 source lengths"):
        bleu_by_length(None, {"ref": refs}, refs, lengths=[1] * 5)


def write_binarized(prefix, lines, append_eos=True):
    """A split binarized as fairseq-preprocess does (Dictionary.encode_line
    with append_eos, into an mmap indexed dataset), with its dict beside it."""
    from fairseq.data import Dictionary, indexed_dataset

    d = Dictionary()
    ids = [d.encode_line(line, add_if_not_exist=True, append_eos=append_eos) for line in lines]
    builder = indexed_dataset.make_builder(f"{prefix}.bin", "mmap", vocab_size=len(d))
    for t in ids:
        builder.add_item(t)
    builder.finalize(f"{prefix}.idx")
    d.save(str(prefix.parent / f"dict.{str(prefix).rsplit('.', 1)[-1]}.txt"))


@pytest.mark.unit
def test_binarized_lengths_count_subwords_without_eos(tmp_path):
    from fairseq_ctx.evaluation import binarized_lengths

    lines = ["ein@@ fach gut .", "", "a b c d e f g h i j", "x@@ y@@ z"]
    write_binarized(tmp_path / "test.en-de.en", lines)
    # the literal count of BPE tokens (len(tokens) instead of len(tokens) - 1 fails here)
    assert binarized_lengths(tmp_path / "test.en-de.en") == [len(line.split()) for line in lines] == [4, 0, 10, 3]
    write_binarized(tmp_path / "noeos.en-de.en", ["a b"], append_eos=False)
    with pytest.raises(EvaluationError, match="does not end with </s>"):
        binarized_lengths(tmp_path / "noeos.en-de.en")


@pytest.mark.unit
def test_bleu_by_length_scores_each_bucket_separately():
    refs = random_corpus(60, seed=3, length=30)
    srcs = [" ".join(["x"] * n) for n in [5] * 20 + [15] * 25 + [60] * 15]
    sys_a = [r if i % 3 else "w0" for i, r in enumerate(refs)]
    res = bleu_by_length(srcs, {"a": sys_a, "ref": refs}, refs, edges=(10, 20, 30, 40, 50))
    assert [b["n"] for b in res["buckets"]] == [20, 25, 0, 0, 0, 15]
    first = res["buckets"][0]
    assert first["bleu"]["a"] == pytest.approx(detok_bleu(sys_a[:20], refs[:20])[0])
    assert first["bleu"]["ref"] == pytest.approx(100.0)
    assert res["buckets"][2]["bleu"]["a"] is None  # empty bucket
    assert res["buckets"][5]["bleu"]["a"] == pytest.approx(detok_bleu(sys_a[45:], refs[45:])[0])
    json.dumps(res)


@pytest.mark.unit
def test_score_command_lengths_from_the_binarized_source(tmp_path, capsys):
    """--src-bin: lengths are the binarized split's subword tokens, not the
    whitespace words of the detokenized text."""
    refs = random_corpus(4, seed=7)
    write(tmp_path / "ref.txt", refs)
    write(tmp_path / "hyp.txt", refs)
    # 9, 2, 20, 25 subwords (counting </s> would move the first to 10-19)
    bpe = ["a@@ b@@ c@@ d@@ e@@ f@@ g@@ h@@ i", "a b", "x@@ y " * 10, "w " * 25]
    write_binarized(tmp_path / "test.en-de.en", bpe)
    score_cli.main([str(a) for a in ["--ref", tmp_path / "ref.txt", "--hyp", f"h={tmp_path / 'hyp.txt'}",
                                     "--src-bin", tmp_path / "test.en-de.en", "--length-buckets",
                                     "--bucket-edges", "10,20", "--json", tmp_path / "s.json"]])
    res = json.loads((tmp_path / "s.json").read_text())["length_buckets"]
    assert [b["n"] for b in res["buckets"]] == [2, 0, 2]
    assert res["unit"].startswith("subword tokens") and "3 groups, closed on the left" in capsys.readouterr().out
    with pytest.raises(EvaluationError, match="one of --src"):
        score_cli.main([str(a) for a in ["--ref", tmp_path / "ref.txt", "--hyp", tmp_path / "hyp.txt",
                                         "--length-buckets"]])


@pytest.mark.unit
def test_score_command_takes_hyp_once_per_system_or_all_at_once(tmp_path):
    """``--hyp a=F --hyp b=G`` scores both systems, as ``--hyp a=F b=G`` does
    (a second --hyp used to replace the first, silently)."""
    refs = random_corpus(6, seed=3)
    write(tmp_path / "ref.txt", refs)
    write(tmp_path / "a.txt", refs)
    write(tmp_path / "b.txt", refs[::-1])
    a, b = f"a={tmp_path / 'a.txt'}", f"b={tmp_path / 'b.txt'}"
    rows = []
    for hyp in (["--hyp", a, "--hyp", b], ["--hyp", a, b]):
        score_cli.main([str(x) for x in ["--ref", tmp_path / "ref.txt", *hyp, "--json", tmp_path / "s.json"]])
        rows.append([(s["name"], s["bleu"]) for s in json.loads((tmp_path / "s.json").read_text())["systems"]])
    assert rows[0] == rows[1] and [name for name, _ in rows[0]] == ["a", "b"]
    assert rows[0][0][1] == pytest.approx(100.0) and rows[0][1][1] < 100


# ---------------------------------------------------------------------------
# reading hypotheses
# ---------------------------------------------------------------------------

@pytest.mark.unit
def test_generate_log_sorted_by_id(tmp_path):
    hyps = [f"hyp {i}" for i in range(20)]
    hyps[7] = ""  # an empty hypothesis is a line too
    order = list(range(20))
    random.Random(4).shuffle(order)
    log = generate_log(tmp_path / "gen.log", hyps, order)
    assert read_hypotheses(log, 20) == hyps
    assert read_generate_log(log, 20, "S") == [f"src {i}" for i in range(20)]
    # a log with D- lines is recognised as such; fmt='text' would read it as lines
    with pytest.raises(EvaluationError, match="lines, but the reference has 20"):
        read_hypotheses(log, 20, fmt="text")


@pytest.mark.unit
def test_generate_log_missing_or_extra_id_is_an_error(tmp_path):
    hyps = [f"hyp {i}" for i in range(20)]
    log = generate_log(tmp_path / "gen.log", hyps, list(range(20))[::-1], missing={13})
    with pytest.raises(EvaluationError, match=r"no D- line for sentence id\(s\) 13 \(19 of 20 found\)"):
        read_hypotheses(log, 20)
    full = generate_log(tmp_path / "full.log", hyps, range(20))
    with pytest.raises(EvaluationError, match=r"sentence id\(s\) 19 beyond the 19 reference lines"):
        read_hypotheses(full, 19)
    doubled = write(tmp_path / "two.log", full.read_text().splitlines() * 2)
    with pytest.raises(EvaluationError, match="appears a second time"):
        read_hypotheses(doubled, 20)


@pytest.mark.unit
def test_plain_text_hypotheses(tmp_path):
    path = write(tmp_path / "hyp.txt", ["a", "b\u2028still b", "c"])  # U+2028 does not split a line
    assert read_hypotheses(path, 3) == ["a", "b\u2028still b", "c"]
    with pytest.raises(EvaluationError, match="3 lines, but the reference has 4"):
        read_hypotheses(path, 4)
    with pytest.raises(EvaluationError, match="no such file"):
        read_hypotheses(tmp_path / "nope.txt", 3)


# ---------------------------------------------------------------------------
# the command
# ---------------------------------------------------------------------------

@pytest.mark.unit
def test_score_command_end_to_end(tmp_path, capsys):
    """The command's main() in-process (a fresh interpreter costs ~6 s of
    fairseq import; test_score_command_errors runs the real ``python -m``)."""
    refs = random_corpus(120, seed=5, length=30)
    srcs = [" ".join(["x"] * (5 + 7 * (i % 9))) for i in range(120)]  # lengths 5..61
    base = [" ".join(r.split()[: max(1, len(r.split()) * 2 // 3)]) for r in refs]
    good = [r if i % 4 else b for i, (r, b) in enumerate(zip(refs, base))]
    write(tmp_path / "ref.txt", refs)
    write(tmp_path / "src.txt", srcs)
    order = list(range(120))
    random.Random(6).shuffle(order)
    generate_log(tmp_path / "base.log", base, order)
    write(tmp_path / "good.txt", good)
    out_json, out_png = tmp_path / "scores.json", tmp_path / "buckets.png"
    score_cli.main([str(a) for a in [
        "--ref", tmp_path / "ref.txt", "--hyp", f"base={tmp_path / 'base.log'}", f"good={tmp_path / 'good.txt'}",
        "--baseline", "base", "--tokenized-compound-split", "--lang", "de", "--src", tmp_path / "src.txt",
        "--length-buckets", "--plot", out_png, "--json", out_json, "--bootstrap-samples", "200"]])
    stdout = capsys.readouterr().out
    res = json.loads(out_json.read_text())
    rows = {r["name"]: r for r in res["systems"]}
    assert rows["base"]["bleu"] == pytest.approx(detok_bleu(base, refs)[0])
    assert rows["good"]["bleu"] == pytest.approx(detok_bleu(good, refs)[0])
    assert rows["good"]["tok_bleu"] == pytest.approx(compound_split_bleu(good, refs, "de")[0])
    assert rows["good"]["p_value"] < 0.05 and rows["good"]["delta"] > 0 and "p_value" not in rows["base"]
    assert res["bleu_signature"] in stdout and "tok:none|smooth:none" in res["tok_bleu_signature"]
    assert "bs:200|seed:12345" in res["bootstrap"]["signature"]
    assert [b["label"] for b in res["length_buckets"]["buckets"]] == bucket_labels(DEFAULT_EDGES)
    assert sum(b["n"] for b in res["length_buckets"]["buckets"]) == 120
    # lengths 5 + 7k, k = i % 9 (k = 0, 1, 2 14 times, the others 13): <10 k=0 (5); 10-19 k=1, 2 (12, 19);
    # 20-29 k=3; 30-39 k=4; 40-49 k=5, 6 (40 opens it), >=50 k=7, 8
    assert [b["n"] for b in res["length_buckets"]["buckets"]] == [14, 28, 13, 13, 26, 26]
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "40-49" in stdout and "p-value" in stdout


def test_score_command_errors(tmp_path):
    refs = random_corpus(10, seed=7)
    write(tmp_path / "ref.txt", refs)
    generate_log(tmp_path / "cut.log", refs, range(10), missing={4, 9})
    proc = run_cli("fairseq_ctx.evaluation.score", ["--ref", tmp_path / "ref.txt",
                                                    "--hyp", f"cut={tmp_path / 'cut.log'}"], check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith(
        f"fairseq_ctx: error: {tmp_path / 'cut.log'}: no D- line for sentence id(s) 4, 9 (8 of 10 found)")
    assert "Traceback" not in proc.stderr
    # other bad input, in-process
    write(tmp_path / "short.txt", refs[:9])
    for argv, message in [
        (["--hyp", f"s={tmp_path / 'short.txt'}"], "9 lines, but the reference has 10"),
        (["--hyp", f"s={tmp_path / 'missing.txt'}"], "no such file"),
        (["--hyp", f"a={tmp_path / 'ref.txt'}", "--baseline", "b"], "--baseline 'b' is not one of"),
        (["--hyp", f"a={tmp_path / 'ref.txt'}", f"a={tmp_path / 'ref.txt'}"], "given twice"),
        (["--hyp", f"a={tmp_path / 'ref.txt'}", "--tokenized-compound-split"], "needs --lang"),
        (["--hyp", f"a={tmp_path / 'ref.txt'}", "--length-buckets"], "needs one of --src"),
        (["--hyp", f"a={tmp_path / 'ref.txt'}", "--src", tmp_path / "short.txt", "--length-buckets"],
         "9 lines, but the reference has 10"),
    ]:
        with pytest.raises(EvaluationError, match=message):
            score_cli.main(["--ref", str(tmp_path / "ref.txt"), *map(str, argv)])


@pytest.mark.unit
def test_bootstrap_p_is_one_for_equal_scores_with_different_outputs():
    """Two different outputs with the same BLEU (both 0 here, as in a smoke
    run) differ by exactly zero: p = 1, not sacreBLEU's minimum 1/(n+1)."""
    from fairseq_ctx.evaluation import paired_bootstrap

    refs = ["the cat sat on the mat", "a dog ran in the park"]
    res, _ = paired_bootstrap(["x y", "z w"], {"other": ["q r", "s t"]}, refs, n_samples=100)
    assert res["other"].score == res["other"].baseline_score == 0.0
    assert res["other"].p_value == 1.0


# ---------------------------------------------------------------------------
# chrF, TER, document-level BLEU, BLEU by position
# ---------------------------------------------------------------------------

@pytest.mark.unit
def test_document_bleu_hand_computed():
    """Two documents: the joined first document matches n-grams across its
    sentence boundary ("sat on", "cat sat on", "the cat sat on"), which
    sentence-level BLEU cannot see. By hand, on the joined documents
    "the cat sat on a mat" / "the cat sat on the mat" and "a dog ran" (twice):
    1-grams 5/6 + 3/3, 2-grams 3/5 + 2/2, 3-grams 2/4 + 1/1, 4-grams 1/3 + 0/0,
    9 hypothesis and 9 reference words (BP = 1)."""
    from fairseq_ctx.evaluation import document_bleu, join_documents

    hyps = ["the cat sat", "on a mat", "a dog ran"]
    refs = ["the cat sat", "on the mat", "a dog ran"]
    docids = ["d1", "d1", "d2"]
    assert join_documents(hyps, docids) == ["the cat sat on a mat", "a dog ran"]
    expected = 100 * (8 / 9 * 5 / 7 * 3 / 5 * 1 / 3) ** 0.25
    score, signature = document_bleu(hyps, refs, docids)
    assert score == pytest.approx(expected, abs=1e-9)
    assert signature.startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|")
    assert score != pytest.approx(detok_bleu(hyps, refs)[0], abs=1.0)
    # a document id that comes back after another document starts a new one
    assert join_documents(["a", "b", "c", ""], ["x", "y", "x", "x"]) == ["a", "b", "c"]


@pytest.mark.unit
def test_bleu_by_position_scores_first_and_later_sentences_apart():
    from fairseq_ctx.evaluation import bleu_by_position, document_positions

    refs = random_corpus(30, seed=11)
    hyps = {"h": [r if i % 3 else " ".join(r.split()[:2]) for i, r in enumerate(refs)]}
    docids = [f"d{i // 4}" if i < 20 else "last" for i in range(30)]
    positions = document_positions(docids)
    assert positions[:9] == [0, 1, 2, 3, 0, 1, 2, 3, 0] and positions[20:] == list(range(10))
    res = bleu_by_position(hyps, refs, docids)
    first = [i for i, p in enumerate(positions) if p == 0]
    later = [i for i, p in enumerate(positions) if p > 0]
    assert res["documents"] == 6 and [g["n"] for g in res["groups"]] == [6, 24]
    assert res["groups"][0]["scores"]["h"] == pytest.approx(
        detok_bleu([hyps["h"][i] for i in first], [refs[i] for i in first])[0])
    assert res["groups"][1]["scores"]["h"] == pytest.approx(
        detok_bleu([hyps["h"][i] for i in later], [refs[i] for i in later])[0])


@pytest.mark.unit
def test_chrf_and_ter_are_sacrebleus():
    from fairseq_ctx.evaluation import chrf, ter

    refs = random_corpus(50, seed=12)
    hyps = [" ".join(r.split()[::-1]) if i % 2 else r for i, r in enumerate(refs)]
    score, sig = chrf(hyps, refs)
    assert score == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score) and "nc:6|nw:0" in sig
    score, sig = ter(hyps, refs)
    assert score == pytest.approx(sacrebleu.corpus_ter(hyps, [refs]).score) and "tok:tercom" in sig


@pytest.mark.unit
def test_paired_bootstrap_of_several_metrics():
    from fairseq_ctx.evaluation import paired_bootstrap_metrics

    refs = random_corpus(120, seed=13)
    baseline = [" ".join(r.split()[: max(1, len(r.split()) // 2)]) for r in refs]
    better = [r if i % 2 else b for i, (r, b) in enumerate(zip(refs, baseline))]
    res, sigs = paired_bootstrap_metrics(baseline, {"better": better, "same": list(baseline)}, refs,
                                         n_samples=300, seed=7)
    assert set(res) == set(sigs) == {"bleu", "chrf", "ter"}
    assert all("bs:300|seed:7" in s for s in sigs.values()) and "nc:6" in sigs["chrf"]
    bleu_alone, _ = paired_bootstrap(baseline, {"better": better, "same": list(baseline)}, refs, n_samples=300,
                                     seed=7)
    assert res["bleu"]["better"] == bleu_alone["better"]  # the same resamples
    assert res["chrf"]["better"].delta > 0 and res["ter"]["better"].delta < 0  # TER: lower is better
    for m in ("bleu", "chrf", "ter"):
        assert res[m]["better"].p_value < 0.05
        assert res[m]["same"].delta == 0 and res[m]["same"].p_value == 1.0


@pytest.mark.unit
def test_tiny_differences_are_never_printed_as_zero():
    from fairseq_ctx.evaluation import format_delta

    assert [format_delta(d) for d in (0.0, 0.0031, -0.004, 0.005, 1.234, -12.345)] == \
        ["+0.00", "+0.0031", "-0.0040", "+0.01", "+1.23", "-12.35"]
    rows = [{"name": "base", "bleu": 20.0}, {"name": "x", "bleu": 20.0031, "delta": 0.0031, "p_value": 0.01}]
    table = score_cli.format_table(rows, "base", tok=False)
    assert "+0.0031" in table and "+0.00 " not in table


@pytest.mark.unit
def test_score_command_document_metrics(tmp_path, capsys):
    refs = random_corpus(60, seed=14)
    base = [" ".join(r.split()[: max(1, len(r.split()) * 2 // 3)]) for r in refs]
    good = [r if i % 3 else b for i, (r, b) in enumerate(zip(refs, base))]
    docids = [f"doc{i // 5}" for i in range(60)]
    write(tmp_path / "ref.txt", refs)
    write(tmp_path / "ref.docids", docids)
    write(tmp_path / "base.txt", base)
    write(tmp_path / "good.txt", good)
    res = score_cli.main([str(a) for a in [
        "--ref", tmp_path / "ref.txt", "--hyp", f"base={tmp_path / 'base.txt'}", f"good={tmp_path / 'good.txt'}",
        "--baseline", "base", "--docids", tmp_path / "ref.docids", "--bootstrap-samples", "200",
        "--json", tmp_path / "s.json"]])
    stdout = capsys.readouterr().out
    rows = {r["name"]: r for r in res["systems"]}
    from fairseq_ctx.evaluation import bleu_by_position, chrf, document_bleu, ter

    assert rows["good"]["dbleu"] == pytest.approx(document_bleu(good, refs, docids)[0])
    assert rows["good"]["chrf"] == pytest.approx(chrf(good, refs)[0])
    assert rows["good"]["ter"] == pytest.approx(ter(good, refs)[0])
    for key in ("p_value", "chrf_p_value", "ter_p_value", "dbleu_p_value"):
        assert rows["good"][key] < 0.05
    assert res["position"]["groups"] == bleu_by_position({"base": base, "good": good}, refs, docids)["groups"]
    assert "bs:200" in res["bootstrap"]["signatures"]["dbleu"]
    for sig in res["signatures"].values():
        assert sig in stdout
    assert "12 documents" in stdout and "first (12)" in stdout and "later (48)" in stdout
    assert json.loads((tmp_path / "s.json").read_text())["signatures"] == res["signatures"]
    write(tmp_path / "short.docids", docids[:-1])
    with pytest.raises(EvaluationError, match="short.docids: 59 document ids, but the reference has 60"):
        score_cli.main(["--ref", str(tmp_path / "ref.txt"), "--hyp", str(tmp_path / "good.txt"),
                        "--docids", str(tmp_path / "short.docids")])
    with pytest.raises(SystemExit):
        score_cli.main(["--ref", str(tmp_path / "ref.txt"), "--hyp", str(tmp_path / "good.txt"), "--metrics", "meteor"])
