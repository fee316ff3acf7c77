"""Tests of the corpus preparation scripts (scripts/prepare-*.sh over the
torch-free package fairseq_ctx_prep).

Nothing can be downloaded here, so every script runs end to end on tiny raw
files laid out like the real archives (tgz/zip members at the official
paths, WMT SGML and IWSLT XML test sets, WIT3 release tarballs, Voita et
al.'s ``_eos`` groups), fetched through each of the ways a user can give
them: ``--mirror`` (a local directory, downloaded by curl through file://
URLs, the same code path as a real download), ``--from`` with the archives,
``--from`` with their unpacked contents. Each run is repeated to check that
finished steps are skipped, and failures (nothing at the mirror, a missing
file, a wrong checksum, sides of different lengths, a split of the wrong
size) must stop with one line naming the file or URL and leave no step
marker and nothing half-written (every corpus layout has such a case).
"""
import io
import itertools
import json
import os
import random
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from fairseq_ctx_prep import archives, files, wmt14_en_de, wmt16_ro_en, wmt17_zh_en
from fairseq_ctx_prep import text as prep_text
from tests import cli_process

REPO = Path(__file__).resolve().parents[1]

WORDS = ["house", "tree", "river", "small", "green", "sees", "runs", "dog", "cat", "light",
         "stone", "bird", "well-known", "old", "water", "city"]
ZH = {w: z for w, z in zip(WORDS, ["房子", "树木", "河流", "小的", "绿色", "看见", "跑步", "小狗", "小猫",
                                   "光线", "石头", "鸟儿", "著名", "老的", "清水", "城市"])}


def pairs(n, seed, tgt="de"):
    """n parallel sentences: the target is a word-by-word twin of the
    source, so the length-ratio filter keeps them; Moses-relevant
    punctuation (commas, „quotes“, hyphens) included."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 9))]
        if rng.random() < 0.3:
            words[1] += ","
        src = " ".join(words).capitalize() + rng.choice([".", "!", "?"])
        if tgt == "zh":
            twin = "".join(ZH[w.rstrip(",")] + ("，" if w.endswith(",") else "") for w in words) + "。"
        else:
            twin = " ".join(w.rstrip(",") + tgt + ("," if w.endswith(",") else "") for w in words)
            twin = "„" + twin.capitalize() + "“."
        out.append((src, twin))
    return out


def lines(items):
    return "".join(x + "\n" for x in items)


def write(path, text):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def make_tar(path, members):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as t:
        for name, data in members.items():
            data = data if isinstance(data, bytes) else data.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return path


def make_zip(path, members):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def sgm(kind, lang, docs):
    """WMT-style SGML: docs = [(docid, [sentences])]."""
    out = [f'<{kind}set setid="newstest" srclang="any" trglang="{lang}">']
    for docid, sents in docs:
        out.append(f'<doc sysid="ref" docid="{docid}" genre="news" origlang="en">')
        out += [f'<seg id="{i}">{s}</seg>' for i, s in enumerate(sents, 1)]
        out.append("</doc>")
    return lines(out + [f"</{kind}set>"])


def iwslt_xml(docs):
    """WIT3 dev/test XML: docs = [(talkid, [sentences])], with the metadata
    elements that must not become sentences."""
    out = ['<?xml version="1.0" encoding="UTF-8"?>', "<mteval>", '<srcset setid="x" srclang="x">']
    for docid, sents in docs:
        out += [f'<doc docid="{docid}" genre="lectures">', "<url>http://www.ted.com/talks/x</url>",
                "<description>TED Talk Subtitles and Transcript: x</description>",
                "<keywords>talks</keywords>", f"<talkid>{docid}</talkid>", "<title>A talk</title>"]
        out += [f'<seg id="{i}"> {s} </seg>' for i, s in enumerate(sents, 1)]
        out.append("</doc>")
    return lines(out + ["</srcset>", "</mteval>"])


def docs_of(items, size=4, first=1):
    return [(str(first + i // size), [x for x in items[i:i + size]]) for i in range(0, len(items), size)]


def train_tags(sents, lang):
    """WIT3 train.tags.*: talks separated by metadata lines."""
    out = []
    for i in range(0, len(sents), 10):
        out += ["<url>http://www.ted.com/talks/x</url>", "<keywords>talks, science</keywords>",
                "<speaker>Someone</speaker>", f"<talkid>{i}</talkid>",
                f"<title>Talk {i} {lang}</title>",
                f"<description>What the talk {i} is about ({lang})</description>",
                '<reviewer href="x">R</reviewer>', '<translator href="y">T</translator>']
        out += sents[i:i + 10]
    return lines(out)


def run_script(name, *args, check=True):
    # python3 forked, and its fairseq-preprocess (tests/cli_zygote.py)
    env = cli_process.env_with_python(dict(os.environ, OMP_NUM_THREADS="1"))
    proc = subprocess.run(["bash", str(REPO / "scripts" / f"prepare-{name}.sh"), *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"prepare-{name} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
                             f"{proc.stderr[-3000:]}")
    return proc


def idx_count(path):
    return files.idx_length(Path(str(path) + ".idx"))


def check_outputs(dest, src, tgt, expect_valid, expect_test, docids=False):
    """Binarized data for all splits with matching counts; returns stats."""
    dest = Path(dest)
    stats = json.loads((dest / "stats.json").read_text())
    for split in files.SPLITS:
        counts = {lang: idx_count(dest / "bin" / f"{split}.{src}-{tgt}.{lang}") for lang in (src, tgt)}
        counts.update({f"final {lang}": files.count_lines(dest / "final" / f"{split}.{lang}")
                       for lang in (src, tgt)})
        if docids:
            counts["docids"] = files.count_lines(dest / "bin" / f"{split}.{src}-{tgt}.docids")
        assert len(set(counts.values())) == 1, (split, counts)
        assert counts[src] == stats["final"][split] > 0
    assert stats["final"]["valid"] == expect_valid
    assert stats["final"]["test"] == expect_test
    assert (dest / "bin" / f"dict.{src}.txt").is_file() and (dest / "bin" / f"dict.{tgt}.txt").is_file()
    return stats


def check_rerun(name, dest, *args):
    """A second run skips every step and leaves the outputs untouched."""
    before = {p: p.stat().st_mtime_ns for p in (Path(dest) / "bin").iterdir()}
    out = run_script(name, *args).stdout
    for step in ("text", "tok", "subword", "clean", "binarize"):
        assert f"{step}: already done, skipping" in out, out
    assert "running" not in out and "downloading" not in out
    assert {p: p.stat().st_mtime_ns for p in (Path(dest) / "bin").iterdir()} == before


def assert_one_line_error(proc, *needles):
    assert proc.returncode == 1, proc.stdout + proc.stderr
    errors = [l for l in proc.stderr.splitlines() if "error:" in l]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    return errors[0]


def nothing_partial(dest):
    """After a failed run: no step marker, no step output and nothing
    half-written (``X.tmp``, ``NAME.part``) under ``dest`` (complete
    downloads and unpacked archives may stay)."""
    dest = Path(dest)
    done = dest / ".done"
    left = [p for p in dest.rglob("*") if p.name.endswith((".tmp", ".part"))]
    outputs = [name for name in ("text", "tok", "subword", "final", "bin") if (dest / name).exists()]
    assert not left and not outputs, (left, outputs)
    return not done.exists() or not any(done.iterdir())


# --- pure functions -----------------------------------------------------------

@pytest.mark.unit
def test_parse_and_align_sgml(tmp_path):
    text = sgm("src", "de", [("d1", ["Eins .", "Zwei"]), ("d2", ["Drei & <b>"])])
    segs = prep_text.parse_sgml(text)
    assert segs == [(("d1", "1"), "Eins ."), (("d1", "2"), "Zwei"), (("d2", "1"), "Drei & <b>")]
    src = write(tmp_path / "s.sgm", text)
    # the reference in another document order still aligns by (docid, segid)
    ref = write(tmp_path / "r.sgm", sgm("ref", "en", [("d2", ["Three"]), ("d1", ["One .", "Two"])]))
    assert prep_text.sgml_pairs(src, ref) == [("Eins .", "One .", "d1"), ("Zwei", "Two", "d1"),
                                            ("Drei & <b>", "Three", "d2")]
    bad = write(tmp_path / "b.sgm", sgm("ref", "en", [("d1", ["One ."])]))
    with pytest.raises(files.PrepError, match="do not hold the same segments"):
        prep_text.sgml_pairs(src, bad)


@pytest.mark.unit
def test_text_helpers():
    assert prep_text.clean_line("\ufeff a\r b\u2028c\x0b  d ") == "a b c d"
    assert prep_text.iwslt_train_pair("<url>x</url>", "<url>y</url>") is None
    assert prep_text.iwslt_train_pair("<speaker>A</speaker>", "<speaker>B</speaker>") is None
    assert prep_text.iwslt_train_pair("<title>T1</title>", "<title> T2 </title>") == ("T1", "T2")
    assert prep_text.iwslt_train_pair("<title>T1</title>", "Text") is None
    assert prep_text.iwslt_train_pair(" a  b ", "c") == ("a b", "c")
    assert prep_text.split_group("a b _eos c _eos  _eos d") == ["a b", "c", "", "d"]
    assert prep_text.moses_unescape("it &apos;s &quot;x&quot; &amp;lt;") == "it 's \"x\" &lt;"
    # clean-corpus-n.perl: empty, length limits, ratio (0 = off), word length
    assert prep_text.keep_pair("a b c", "x y z", 1, 250, 1.5)
    assert not prep_text.keep_pair("a", "x y", 1, 250, 1.5)
    assert prep_text.keep_pair("a", "x y", 1, 250, 0)
    assert not prep_text.keep_pair("", "x", 1, 250, 0)
    assert not prep_text.keep_pair("a " * 251, "x " * 251, 1, 250, 1.5)
    assert not prep_text.keep_pair("a" * 1001, "x", 1, 250, 0)


@pytest.mark.unit
def test_official_names_match_sacrebleu():
    """URLs, md5 sums and SGML member paths of the WMT dev/test sets agree
    with sacreBLEU's dataset table."""
    from sacrebleu.dataset import DATASETS
    for ours, theirs in (("wmt14-test", "wmt14/full"), ("wmt17-dev", "wmt17/dev"),
                         ("wmt17-test", "wmt17"), ("wmt16-dev", "wmt16/dev"), ("wmt16-test", "wmt16")):
        archive = archives.ARCHIVES[ours]
        assert [archive.url] == DATASETS[theirs].data and [archive.md5] == DATASETS[theirs].md5
    for corpus_module, argv, split, theirs, pair in (
            (wmt14_en_de, [], "test", "wmt14/full", "en-de"),
            (wmt14_en_de, ["--direction", "de-en"], "test", "wmt14/full", "de-en"),
            (wmt16_ro_en, [], "valid", "wmt16/dev", "ro-en"), (wmt16_ro_en, [], "test", "wmt16", "ro-en"),
            (wmt16_ro_en, ["--direction", "en-ro"], "test", "wmt16", "en-ro"),
            (wmt17_zh_en, [], "valid", "wmt17/dev", "zh-en"), (wmt17_zh_en, [], "test", "wmt17", "zh-en")):
        args = corpus_module.COMMAND.parse_args(argv)
        (corpus,) = corpus_module.make_spec(args).splits[split]
        assert [corpus.src[1], corpus.tgt[1]] == DATASETS[theirs].langpairs[pair], (corpus_module, argv)


PREP_MODULES = ("files", "download", "archives", "text", "pipeline", "bible", "wmt14_en_de",
                "wmt16_ro_en", "wmt17_zh_en", "iwslt", "opensubtitles_en_ru", "user_corpus")


def test_prep_package_needs_no_torch(tmp_path):
    """Every module of fairseq_ctx_prep imports, and every corpus command
    answers --help, in a virtual environment without system site-packages
    (torch, fairseq and the tokenizers really absent), with only the
    repository on PYTHONPATH."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    code = ("import importlib, importlib.util, sys\n"
            "assert importlib.util.find_spec('torch') is None, 'torch is importable'\n"
            "assert importlib.util.find_spec('fairseq') is None, 'fairseq is importable'\n"
            f"for name in {PREP_MODULES!r}:\n"
            "    importlib.import_module('fairseq_ctx_prep.' + name)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'fairseq', 'numpy')))\n")
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
    for name in ("bible", "wmt14_en_de", "wmt16_ro_en", "wmt17_zh_en", "iwslt", "opensubtitles_en_ru"):
        proc = subprocess.run([python, "-m", f"fairseq_ctx_prep.{name}", "--help"], capture_output=True,
                              text=True, env=env, cwd=tmp_path)
        assert proc.returncode == 0 and proc.stdout.startswith("usage: fairseq-ctx-prepare-"), (name, proc.stderr)


# --- every script end to end --------------------------------------------------

def test_wmt14_en_de(tmp_path):
    """--mirror (curl over file:// URLs), de-en direction, a worker pool."""
    mirror = tmp_path / "mirror"
    corpora = {"training-parallel-europarl-v7.tgz": ("training/europarl-v7.de-en", 30),
               "training-parallel-commoncrawl.tgz": ("commoncrawl.de-en", 20),
               "training-parallel-nc-v9.tgz": ("training/news-commentary-v9.de-en", 20)}
    for seed, (archive, (prefix, n)) in enumerate(corpora.items()):
        data = pairs(n, seed)
        if seed == 0:   # a line break inside a sentence and a pair the ratio filter drops
            data[3] = ("A house\rin the\u2028city .", "Haus in der Stadt .")
            data[4] = ("Dog .", "Hund hund hund hund hund hund .")
        make_tar(mirror / archive, {f"{prefix}.en": lines(e for e, _ in data),
                                    f"{prefix}.de": lines(d for _, d in data)})
    dev, test = pairs(8, 10), pairs(7, 11)
    make_tar(mirror / "dev.tgz", {"dev/newstest2013.en": lines(e for e, _ in dev),
                                  "dev/newstest2013.de": lines(d for _, d in dev)})
    make_tar(mirror / "test-full.tgz", {
        f"test-full/newstest2014-deen-{kind}.{lang}.sgm": sgm(kind, lang, docs_of([p[i] for p in test], 3))
        for kind in ("src", "ref") for lang, i in (("en", 0), ("de", 1))})
    dest = tmp_path / "out"
    # the published md5 of dev.tgz does not match the fake one
    proc = run_script("wmt14-en-de", "--mirror", mirror, "--dest", dest, check=False)
    assert_one_line_error(proc, "dev.tgz", "md5", "--skip-checksums")
    assert nothing_partial(dest) and not (dest / "orig" / "dev.tgz").exists()
    assert not list((dest / "orig").glob("*.part"))

    args = ["--mirror", mirror, "--dest", dest, "--direction", "de-en", "--merges", "60",
            "--workers", "2", "--skip-checksums", "--skip-size-check"]
    run_script("wmt14-en-de", *args)
    stats = check_outputs(dest, "de", "en", 8, 7)
    assert stats["text"]["train"] == 70 and 60 <= stats["clean"]["train"] < 70
    kept = (dest / "final" / "train.de").read_text().replace("@@ ", "")
    assert "Hund hund" not in kept
    tok = (dest / "tok" / "train.de").read_text()
    assert '"' in tok and "„" not in tok and "@-@" in tok     # normalize-punctuation, tokenizer -a
    assert "@@ " in (dest / "final" / "train.de").read_text()  # BPE
    assert (dest / "tok" / "train.en").read_text().splitlines()[3] == "A house in the city ."
    check_rerun("wmt14-en-de", dest, *args)


def test_wmt17_zh_en(tmp_path):
    """--from with unpacked files, --corpora, --extra-train, sentencepiece on Chinese."""
    raw = tmp_path / "raw"
    train, extra, dev, test = pairs(40, 1, "zh"), pairs(15, 2, "zh"), pairs(6, 3, "zh"), pairs(5, 4, "zh")
    write(raw / "training/news-commentary-v12.zh-en.zh", lines(z for _, z in train))
    write(raw / "training/news-commentary-v12.zh-en.en", lines(e for e, _ in train))
    write(raw / "cwmt/part.zh", lines(z for _, z in extra))
    write(raw / "cwmt/part.en", lines(e for e, _ in extra))
    for folder, name, data in (("dev", "newsdev2017", dev), ("test", "newstest2017", test)):
        write(raw / folder / f"{name}-zhen-src.zh.sgm", sgm("src", "zh", docs_of([z for _, z in data])))
        write(raw / folder / f"{name}-zhen-ref.en.sgm", sgm("ref", "en", docs_of([e for e, _ in data])))
    dest = tmp_path / "out"
    args = ["--from", raw, "--dest", dest, "--corpora", "nc-v12", "--extra-train", raw / "cwmt/part",
            "--merges", "40", "--zh-vocab-size", "60", "--workers", "1", "--skip-size-check"]
    out = run_script("wmt17-zh-en", *args).stdout
    # the published sizes are announced, the training count printed beside the papers'
    assert "expected valid 2002 (newsdev2017), test 2001 (newstest2017)" in out, out
    assert "clean: kept" in out and "about 20.62M pairs (ctxsan" in out and "corpora changed by --corpora" in out
    stats = check_outputs(dest, "zh", "en", 6, 5)
    assert stats["text"]["train"] == 55
    assert (dest / "subword" / "zh.model").is_file() and (dest / "subword" / "en.codes").is_file()
    assert "▁" in (dest / "final" / "train.zh").read_text()
    dict_zh = (dest / "bin" / "dict.zh.txt").read_text()
    assert "@@" not in dict_zh and dict_zh != (dest / "bin" / "dict.en.txt").read_text()
    check_rerun("wmt17-zh-en", dest, *args)
    # sides of different lengths: one line naming both files, no marker
    write(raw / "cwmt/bad.zh", lines(z for _, z in extra[:-1]))
    write(raw / "cwmt/bad.en", lines(e for e, _ in extra))
    proc = run_script("wmt17-zh-en", "--from", raw, "--dest", tmp_path / "bad", "--corpora", "nc-v12",
                      "--extra-train", raw / "cwmt/bad", check=False)
    assert_one_line_error(proc, "bad.zh", "bad.en", "different line counts")
    assert nothing_partial(tmp_path / "bad")


def test_wmt17_zh_en_cwmt_preset(tmp_path):
    """--corpus gret: NC v12 + CWMT from --from (its folders as unpacked,
    datum2017's segmented Chinese joined back), the count beside GRET's with a
    warning when it is more than 10% away; without CWMT, one line saying where
    to get it."""
    raw = tmp_path / "raw"
    nc, dev, test = pairs(12, 70, "zh"), pairs(6, 3, "zh"), pairs(5, 4, "zh")
    write(raw / "training/news-commentary-v12.zh-en.zh", lines(z for _, z in nc))
    write(raw / "training/news-commentary-v12.zh-en.en", lines(e for e, _ in nc))
    for folder, name, data in (("dev", "newsdev2017", dev), ("test", "newstest2017", test)):
        write(raw / folder / f"{name}-zhen-src.zh.sgm", sgm("src", "zh", docs_of([z for _, z in data])))
        write(raw / folder / f"{name}-zhen-ref.en.sgm", sgm("ref", "en", docs_of([e for e, _ in data])))
    dest = tmp_path / "out"
    args = ["--from", raw, "--dest", dest, "--corpus", "gret", "--merges", "40", "--zh-vocab-size", "60",
            "--workers", "1", "--skip-size-check", "--skip-checksums"]
    proc = run_script("wmt17-zh-en", *args, check=False)
    assert_one_line_error(proc, "cwmt.tgz", "http://nlp.nju.edu.cn/cwmt-wmt/", "--from DIR")
    assert nothing_partial(dest)
    n = 0
    for i, (folder, zh, en) in enumerate(archives.CWMT_CORPORA):
        data = pairs(2, 100 + i, "zh")
        if folder == "datum2017":   # word-segmented Chinese in the release
            data = [(e, " ".join(z)) for e, z in data]
        write(raw / folder / zh.split("|")[0], lines(z for _, z in data))
        write(raw / folder / en, lines(e for e, _ in data))
        n += len(data)
    out = run_script("wmt17-zh-en", *args).stdout
    stats = check_outputs(dest, "zh", "en", 6, 5)
    assert stats["text"]["train"] == 12 + n
    assert "about 7.5M pairs (GRET" in out and "warning:" in out and "more than 10% away" in out
    assert " " not in "".join((dest / "text" / "train.zh").read_text().splitlines()[-2 * 20:])
    assert "UNPC" not in out   # no UN in GRET's preset


def test_wmt16_ro_en(tmp_path):
    """--from with the archives (tgz and OPUS zip)."""
    raw = tmp_path / "raw"
    ep, st, dev, test = pairs(30, 5, "ro"), pairs(20, 6, "ro"), pairs(6, 7, "ro"), pairs(6, 8, "ro")
    ep[0] = ("The bird sees the city .", "Pasărea vede oraşul şi ţara .")   # cedilla forms
    make_tar(raw / "ro-en.tgz", {"europarl-v7.ro-en.en": lines(e for e, _ in ep),
                                 "europarl-v7.ro-en.ro": lines(r for _, r in ep)})
    make_zip(raw / "OPUS-SETIMES/v2/moses/en-ro.txt.zip",
             {"SETIMES.en-ro.en": lines(e for e, _ in st), "SETIMES.en-ro.ro": lines(r for _, r in st),
              "README": "x", "LICENSE": "y"})
    make_tar(raw / "dev.tgz", {"dev/newsdev2016-roen-src.ro.sgm": sgm("src", "ro", docs_of([r for _, r in dev])),
                               "dev/newsdev2016-roen-ref.en.sgm": sgm("ref", "en", docs_of([e for e, _ in dev]))})
    make_tar(raw / "test.tgz", {"test/newstest2016-roen-src.ro.sgm": sgm("src", "ro", docs_of([r for _, r in test])),
                                "test/newstest2016-roen-ref.en.sgm": sgm("ref", "en", docs_of([e for e, _ in test]))})
    dest = tmp_path / "out"
    args = ["--from", raw, "--dest", dest, "--merges", "50", "--workers", "1", "--skip-checksums"]
    # newsdev2016 has 1999 sentences, not 6: one line, no marker
    proc = run_script("wmt16-ro-en", *args, check=False)
    assert_one_line_error(proc, "valid has 6 sentence pairs", "newsdev2016 has 1999",
                          "--skip-size-check")
    assert nothing_partial(dest)
    args.append("--skip-size-check")
    run_script("wmt16-ro-en", *args)
    check_outputs(dest, "ro", "en", 6, 6)
    first = (dest / "tok" / "train.ro").read_text().splitlines()[0]
    assert first == "Pasărea vede orașul și țara ."
    check_rerun("wmt16-ro-en", dest, *args)
    # a mirror without the files: one line naming the URL that failed, nothing kept
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run_script("wmt16-ro-en", "--mirror", empty, "--dest", tmp_path / "dl", check=False)
    assert_one_line_error(proc, "download failed", (empty.resolve() / "ro-en.tgz").as_uri())
    assert nothing_partial(tmp_path / "dl") and not (tmp_path / "dl").exists()   # the run made it: removed


def _iwslt_train_archive(pair, year, train, sets):
    a, b = pair
    d = f"{a}-{b}"
    members = {f"{d}/train.tags.{d}.{a}": train_tags([x for x, _ in train], a),
               f"{d}/train.tags.{d}.{b}": train_tags([y for _, y in train], b)}
    for name, data in sets.items():
        members[f"{d}/IWSLT{year}.TED.{name}.{d}.{a}.xml"] = iwslt_xml(docs_of([x for x, _ in data], 3))
        members[f"{d}/IWSLT{year}.TED.{name}.{d}.{b}.xml"] = iwslt_xml(docs_of([y for _, y in data], 3))
    return members


def _tgz_bytes(members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, data in members.items():
            data = data.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.mark.parametrize("pair", ["es-en", "fr-en", "en-vi"])
def test_iwslt(tmp_path, pair):
    """es-en: --from WIT3 release tarballs (IWSLT14); fr-en: --from the
    unpacked release tree, tst2015 from two one-sided test archives
    (IWSLT15); en-vi: --mirror of the Stanford files."""
    raw, dest = tmp_path / "raw", tmp_path / "out"
    src, tgt = pair.split("-")
    sizes = {"dev2010": 4, "tst2010": 3, "tst2011": 3, "tst2012": 5, "tst2013": 6, "tst2014": 7,
             "tst2015": 5}
    sets = {name: pairs(n, 20 + i, src) for i, (name, n) in enumerate(sizes.items())}
    train = pairs(45, 30, src)
    if pair == "es-en":
        # en-X archives: the English is the first language of the pair
        en_x = [(e, x) for x, e in train]
        swapped = {k: [(e, x) for x, e in v] for k, v in sets.items()}
        make_tar(raw / "2014-01.tgz", {"2014-01/texts/en/es/en-es.tgz": _tgz_bytes(_iwslt_train_archive(
            ("en", "es"), "14", en_x, {k: swapped[k] for k in ("dev2010", "tst2010", "tst2011", "tst2012")}))})
        make_tar(raw / "2014-01-test.tgz", {"2014-01-test/texts/en/es/en-es.tgz": _tgz_bytes(
            _iwslt_train_archive(("en", "es"), "14", en_x[:1], {"tst2014": swapped["tst2014"]}))})
        args = ["--from", raw]
        valid, test = 4 + 3 + 3 + 5, 7
        # without --from: the WIT3 archives cannot be downloaded; say where to get them
        proc = run_script("iwslt", "--pair", pair, "--dest", tmp_path / "nofrom", check=False)
        assert_one_line_error(proc, "2014-01/texts/en/es/en-es.tgz", "https://wit3.fbk.eu/2014-01")
        assert nothing_partial(tmp_path / "nofrom")
    elif pair == "fr-en":
        make_tar(raw / "2015-01/texts/fr/en/fr-en.tgz", _iwslt_train_archive(
            ("fr", "en"), "15", train, {k: sets[k] for k in ("tst2013", "tst2014")}))
        tst = sets["tst2015"]
        make_tar(raw / "2015-01-test/texts/fr/en/fr-en.tgz", {
            "fr-en/IWSLT15.TED.tst2015.fr-en.fr.xml": iwslt_xml(docs_of([x for x, _ in tst], 3))})
        # the English side lists the talks in another order: matched by talk and segment id
        make_tar(raw / "2015-01-test/texts/en/fr/en-fr.tgz", {
            "en-fr/IWSLT15.TED.tst2015.en-fr.en.xml": iwslt_xml(docs_of([y for _, y in tst], 3)[::-1])})
        args = ["--from", raw]
        valid, test = 6, 7 + 5
    else:
        # Stanford files are Moses-tokenized and Moses-escaped, on every split
        def escape(data):
            return [(e.replace(",", " ,") + " it &apos;s &quot;x&quot; &amp; y &amp;apos;",
                     v.replace("„", "&quot; ") + " &apos;") for e, v in data]
        for name, data in (("train", train), ("tst2012", sets["tst2012"]), ("tst2013", sets["tst2013"])):
            write(raw / "iwslt15.en-vi" / f"{name}.en", lines(e for e, _ in escape(data)))
            write(raw / "iwslt15.en-vi" / f"{name}.vi", lines(v for _, v in escape(data)))
        args = ["--mirror", raw]
        valid, test = 5, 6
        # tst2012/tst2013 are 1553/1268 sentences in the release: one line, no marker
        proc = run_script("iwslt", *args, "--pair", pair, "--dest", tmp_path / "sizes", "--vocab-size",
                          "70", "--workers", "1", check=False)
        assert_one_line_error(proc, "valid has 5 sentence pairs", "tst2012", "has 1553")
        assert nothing_partial(tmp_path / "sizes")
        args.append("--skip-size-check")
    args += ["--pair", pair, "--dest", dest, "--vocab-size", "70", "--workers", "1"]
    run_script("iwslt", *args)
    if pair == "en-vi":
        # escapes undone exactly once, in text/ (the BLEU references), on every
        # split: "&amp;apos;" (an escaped literal "&apos;") stays "&apos;" in tok/ too
        for split in files.SPLITS:
            for step in ("text", "tok"):
                en = (dest / step / f"{split}.en").read_text().splitlines()
                vi = (dest / step / f"{split}.vi").read_text().splitlines()
                assert all(l.endswith(' it \'s "x" & y &apos;') for l in en), (step, split, en[0])
                assert all(l.endswith(" '") and "&" not in l for l in vi), (step, split, vi[0])
    stats = check_outputs(dest, src, tgt, valid, test)
    final = (dest / "final" / f"train.{src}").read_text()
    assert "▁" in final and "&apos;" not in final and "&quot;" not in final
    text = (dest / "text" / f"train.{tgt}").read_text()
    if pair != "en-vi":
        assert stats["text"]["train"] == 45 + 2 * 5    # sentences + title and description per talk
        assert "talks" not in text and "Someone" not in text and "Talk 0" in text
    assert (dest / "bin" / f"dict.{src}.txt").read_text() == (dest / "bin" / f"dict.{tgt}.txt").read_text()
    # one binarization serves both directions
    from fairseq.data import Dictionary
    from fairseq.tasks.translation import load_langpair_dataset
    vocab = Dictionary.load(str(dest / "bin" / f"dict.{src}.txt"))
    reverse = load_langpair_dataset(str(dest / "bin"), "valid", tgt, vocab, src, vocab, combine=False,
                                    dataset_impl=None, upsample_primary=1, left_pad_source=True,
                                    left_pad_target=False, max_source_positions=1024,
                                    max_target_positions=1024)
    assert len(reverse) == valid
    check_rerun("iwslt", dest, *args)


def test_opensubtitles_en_ru_2018_release(tmp_path):
    """The default release (Voita et al. 2018): gzip files {train,dev,test}.
    {en,ru,en.context}.gz at data.statmt.org/acl18_contextnmt_data, through
    --mirror; every instance keeps its previous sentence as explicit context,
    which the document task reads (no docids); separate BPE per language."""
    import gzip

    mirror, dest = tmp_path / "mirror", tmp_path / "out"
    sizes = {"train": 40, "dev": 6, "test": 7}
    data = {}
    for n, (split, size) in enumerate(sizes.items()):
        rows = pairs(size + 1, 60 + n, "ru")
        en, ru = [e for e, _ in rows[1:]], [r for _, r in rows[1:]]
        ctx = [e for e, _ in rows[:-1]]
        ctx[2] = ""   # an instance without context (the first line of a film)
        data[split] = (en, ru, ctx)
        for ext, text in (("en", en), ("ru", ru), ("en.context", ctx)):
            path = mirror / "acl18_contextnmt_data" / f"{split}.{ext}.gz"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(gzip.compress(lines(text).encode("utf-8")))
    args = ["--mirror", mirror, "--dest", dest, "--merges", "50", "--workers", "1"]
    # dev and test are 10000 instances each in the release: one line, no marker
    proc = run_script("opensubtitles-en-ru", *args, check=False)
    assert_one_line_error(proc, "valid has 6 sentence pairs", "dev of Voita et al. 2018 has 10000")
    assert nothing_partial(dest)
    args.append("--skip-size-check")
    out = run_script("opensubtitles-en-ru", *args).stdout
    assert "about 2M instances" in out
    stats = check_outputs(dest, "en", "ru", 6, 7)
    assert stats["text"]["train"] == 40
    assert not list((dest / "bin").glob("*.docids"))
    assert (dest / "subword" / "en.codes").is_file() and (dest / "subword" / "ru.codes").is_file()
    for split, n in (("train", 40), ("valid", 6), ("test", 7)):
        assert idx_count(dest / "bin" / f"{split}.en-ru.context.en") == n
    assert (dest / "text" / "test.context.en").read_text().splitlines() == data["test"][2]
    # the document task: line i's context is line i of .en.context, none where it is empty
    import fairseq_ctx  # noqa: F401  (registers the task)
    from fairseq import options, tasks
    task = tasks.setup_task(options.parse_args_and_arch(options.get_training_parser(), [
        str(dest / "bin"), "--task", "document_translation", "--source-lang", "en", "--target-lang", "ru",
        "--arch", "transformer_ctxenc_tiny", "--user-dir", str(REPO / "fairseq_ctx")]))
    task.load_dataset("test")
    ds, vocab = task.dataset("test"), task.source_dictionary
    bpe_ctx = (dest / "final" / "test.context.en").read_text().splitlines()
    for i in range(7):
        item = ds[i]
        ctx = item.get("context")
        got = vocab.string(ctx) if ctx is not None and len(ctx) else ""
        # the source dictionary's view of the line (a subword unseen in train.en is <unk>, as in a source)
        want = vocab.string(vocab.encode_line(bpe_ctx[i], add_if_not_exist=False)) if bpe_ctx[i] else ""
        assert got == want, (i, got, want)
    assert bpe_ctx[2] == ""
    # next context needs documents: one line naming the file and the 2019 release
    task = tasks.setup_task(options.parse_args_and_arch(options.get_training_parser(), [
        str(dest / "bin"), "--task", "document_translation", "--context-mode", "next",
        "--source-lang", "en", "--target-lang", "ru", "--arch", "transformer_ctxenc_tiny"]))
    with pytest.raises(Exception, match="--context-mode next needs documents.*--release 2019"):
        task.load_dataset("test")
    check_rerun("opensubtitles-en-ru", dest, *args)


def test_opensubtitles_en_ru(tmp_path):
    """--release 2019, --from with the zip; groups of 4 become documents with docids."""
    raw, dest = tmp_path / "raw", tmp_path / "out"
    members = {}
    groups = {"train": 12, "dev": 3, "test": 4}
    for split, n in groups.items():
        data = pairs(4 * n, 40 + n, "ru")
        en = [" _eos ".join(e for e, _ in data[i:i + 4]) for i in range(0, len(data), 4)]
        ru = [" _eos ".join(r for _, r in data[i:i + 4]) for i in range(0, len(data), 4)]
        if split == "train":   # a group with an over-long sentence is dropped whole
            en[5] = en[5].replace(" _eos ", " " + "word " * 260 + "_eos ", 1)
        members[f"data_to_publish/context_aware/en_{split}"] = lines(en)
        members[f"data_to_publish/context_aware/ru_{split}"] = lines(ru)
    make_zip(raw / "acl19_good_translation_wrong_in_context.zip", members)
    args = ["--from", raw, "--dest", dest, "--merges", "60", "--workers", "1", "--release", "2019"]
    run_script("opensubtitles-en-ru", *args)
    stats = check_outputs(dest, "en", "ru", 4 * 3, 4 * 4, docids=True)
    assert stats["text"]["train"] == 48 and stats["clean"]["train"] == 44
    docids = (dest / "bin" / "train.en-ru.docids").read_text().splitlines()
    runs = [len(list(g)) for _, g in itertools.groupby(docids)]
    assert runs == [4] * 11 and len(set(docids)) == 11
    # as the document task reads them: the previous sentence of the group, none for its first
    from fairseq_ctx.data.context_selection import compute_context_index
    from fairseq_ctx.tasks.document_translation import DocumentTranslationTask
    for split, n in (("train", 44), ("valid", 12), ("test", 16)):
        ids = DocumentTranslationTask.read_docids(str(dest / "bin" / f"{split}.en-ru.docids"), n)
        context = compute_context_index(ids, 1)[:, 0]
        assert context.tolist() == [-1 if i % 4 == 0 else i - 1 for i in range(n)]
    assert (dest / "bin" / "dict.en.txt").read_text() != (dest / "bin" / "dict.ru.txt").read_text()
    assert (dest / "subword" / "joint.codes").is_file()
    check_rerun("opensubtitles-en-ru", dest, *args)
    # --from a directory without the data: one line naming what was looked for
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run_script("opensubtitles-en-ru", "--from", empty, "--dest", tmp_path / "none", "--release", "2019",
                      check=False)
    assert_one_line_error(proc, "missing raw file",
                          str(empty.resolve() / "acl19_good_translation_wrong_in_context.zip"))
    assert nothing_partial(tmp_path / "none")
