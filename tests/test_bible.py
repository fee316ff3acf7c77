"""Tests of the Bible corpus preparation (fairseq_ctx_prep.bible).

The text functions are tested on tiny strings shaped like real ``mod2imp``
output; one end-to-end test runs scripts/prepare-bible.sh on the first 2000
verse pairs and is skipped where the SWORD modules are not installed.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fairseq_ctx_prep import bible
from fairseq_ctx_prep.bible import Pair, align, assign_splits, clean_osis

REPO = Path(__file__).resolve().parents[1]

IMP = """$$$[ Module Heading ]

$$$Genesis 0:0
<div type="book"/> <title level="1" type="main">Génesis</title>
$$$Genesis 1:0
<chapter n="1" osisID="Gen.1" sID="Gen.1"/>
$$$Genesis 1:1
<w lemma="strong:H7225">EN el principio</w> <w lemma="strong:H1254">crió</w> Dios.
$$$Genesis 1:2
<w lemma="strong:H0776">Y la tierra</w> <w lemma="strong:H1961">estaba</w>.
$$$Genesis 1:2
duplicate, ignored
$$$Genesis 2:1
<chapter eID="Gen.1"/> Y FUERON acabados.
"""


# --- parsing ---------------------------------------------------------------

@pytest.mark.unit
def test_parse_imp_skips_headings_intros_and_duplicates():
    entries = bible.parse_imp(IMP)
    assert [ref for ref, _ in entries] == [
        ("Genesis", 1, 1), ("Genesis", 1, 2), ("Genesis", 2, 1)]
    assert entries[1][1].startswith("<w ")


@pytest.mark.unit
def test_parse_ref_and_doc_id():
    assert bible.parse_ref("Song of Solomon 2:10") == ("Song of Solomon", 2, 10)
    assert bible.parse_ref("[ Testament 1 Heading ]") is None
    assert bible.doc_id(("I Samuel", 3, 10)) == "I Samuel 3"


# --- markup stripping ------------------------------------------------------

@pytest.mark.unit
@pytest.mark.parametrize("markup, text", [
    # note between two words: one space, not glued, not doubled
    ('<w lemma="strong:H0430">God</w><note placement="foot"><reference '
     'type="annotateRef">1:1 </reference>The Hebrew word “אֱלֹהִ֑ים”.</note>'
     '<w lemma="strong:H1254">created</w> the earth.',
     "God created the earth."),
    # note after punctuation followed by a space
    ("“<w>Behold</w>,<note placement=\"foot\">or, look</note> <w>I</w> have",
     "“Behold, I have"),
    # punctuation right after a removed note stays attached
    ("<w>Bdellium</w><note>or, resin</note>. Onyx", "Bdellium. Onyx"),
    ("coins</q> <note>a coin</note> <q>? Not one", "coins? Not one"),
    ("said,<note type=\"crossReference\"><reference>Ex 30:12</reference>"
     "</note>“Come", "said, “Come"),
    ('“<note placement="foot">x</note>Come', "“Come"),
    # notes with nested elements, and at the very start/end
    ('<note placement="foot">Gr. <rdg type="alternate">x</rdg> <seg>y</seg>'
     '</note>In the end<note>z</note>', "In the end"),
    # line/paragraph milestones are word boundaries, Strong's wrappers are not
    ('mourning,<l eID="a" level="1"/> <l level="2" sID="b"/>and all',
     "mourning, and all"),
    ('end<lb type="x-p"/>start', "end start"),
    ('<w lemma="strong:H1">he</w><w lemma="strong:H2">llo</w>', "hello"),
    # section headings and speakers go, canonical psalm titles stay
    ('<title type="x-introduction">Heading</title>Text here.', "Text here."),
    ('<title canonical="true" type="psalm">A Psalm by David.</title> '
     '<lg sID="1"/><l sID="2"/>Yahweh, how', "A Psalm by David. Yahweh, how"),
    ("<speaker>Beloved</speaker> <lg/>Let him kiss me", "Let him kiss me"),
    # entities, non-breaking spaces, whitespace runs
    ("A &amp; B\xa0 C\n", "A & B C"),
    # text after the end of the book (appended glossary) is cut
    ('Amen. <chapter eID="Rev.22"/><div canonical="true" eID="x" '
     'osisID="Rev" type="book"/> <div type="glossary"/>Glossary text',
     "Amen."),
    ("<note>only a note</note>", ""),
])
def test_clean_osis(markup, text):
    assert clean_osis(markup) == text


@pytest.mark.unit
@pytest.mark.parametrize("markup, text", [
    # spaRV1909eb drops the spaces around added (italic) words ...
    ('<w>porque</w> <w>Jehová</w><transChange type="added">será</transChange>'
     '<w>con</w> nosotros', "porque Jehová será con nosotros"),
    ('<w>perdonadas</w>, <transChange type="added">y</transChange><w>borrados'
     '</w> sus', "perdonadas, y borrados sus"),
    # ... except that enclitic pronouns attach to their verb
    ('<w>en la ciudad</w>, <w>sáca</w><transChange type="added">lo</transChange>'
     ' <w>de</w>', "en la ciudad, sácalo de"),
    ('de haber<transChange type="added">lo</transChange> <w>ya</w>',
     "de haberlo ya"),
    ('<w>y pondré</w><transChange type="added">las</transChange> <w>delante</w>',
     "y pondrélas delante"),
    # but not to a capitalised name mid-sentence or a function word
    ('<w>el ángel</w> <w>de Jehová</w><transChange type="added">los'
     '</transChange><w>acose</w>', "el ángel de Jehová los acose"),
    ('<w>y</w><transChange type="added">la</transChange><w>declaró</w>',
     "y la declaró"),
])
def test_clean_osis_added_words(markup, text):
    assert clean_osis(markup) == text


@pytest.mark.unit
def test_clean_osis_never_glues_or_doubles_spaces():
    markup = ('<w>a</w><note>n</note><w>b</w> <note>n</note> <w>c</w>'
              '<l eID="1"/><l sID="2"/><w>d</w><div sID="3" type="x-p"/>e')
    text = clean_osis(markup)
    assert text == "a b c d e"
    assert "  " not in text


@pytest.mark.unit
def test_normalize_chapter_caps():
    verses = [
        (("Gen", 1, 1), "EN el principio crió Dios."),
        (("Gen", 2, 1), "Y JEHOVÁ habló; Y ACONTECIÓ."),
        (("Gen", 2, 2), "Y dijo Jehová: YO SOY, y aconteció."),
        (("Ps", 3, 1), "Salmo de David. ¡OH Jehová, cuánto"),
        (("Ps", 4, 1), "ALEPH. Bienaventurados"),
    ]
    fixed = dict(bible.normalize_chapter_caps(verses))
    assert fixed[("Gen", 1, 1)] == "En el principio crió Dios."
    assert fixed[("Gen", 2, 1)] == "Y Jehová habló; Y ACONTECIÓ."
    assert fixed[("Gen", 2, 2)] == "Y dijo Jehová: YO SOY, y aconteció."  # not verse 1
    assert fixed[("Ps", 3, 1)] == "Salmo de David. ¡Oh Jehová, cuánto"
    assert fixed[("Ps", 4, 1)] == "Aleph. Bienaventurados"


# --- alignment and split ----------------------------------------------------

@pytest.mark.unit
def test_align_by_reference_and_drop_reasons():
    src = [(("Gen", 1, 1), "uno"), (("Gen", 1, 2), ""), (("Gen", 1, 3), "tres"),
           (("Gen", 1, 4), "cuatro"), (("Gen", 2, 1), "otro")]
    tgt = [(("Gen", 1, 4), "four"), (("Gen", 1, 1), "one"), (("Gen", 1, 2), "two"),
           (("Gen", 1, 3), ""), (("Tob", 1, 1), "Tobit")]
    pairs, stats = align(src, tgt)
    assert [(p.ref, p.src, p.tgt) for p in pairs] == [
        (("Gen", 1, 1), "uno", "one"), (("Gen", 1, 4), "cuatro", "four")]
    assert (stats.aligned, stats.src_empty, stats.tgt_empty,
            stats.src_only, stats.tgt_only) == (2, 1, 1, 1, 1)
    assert stats.tgt_only_books == {"Tob": 1} and stats.dropped == 4
    assert pairs[0].doc == "Gen 1"


@pytest.mark.unit
def test_drop_misaligned_chapters():
    good = [Pair(("A", 1, v), "x" * 10, "y" * 11) for v in range(1, 5)]
    shifted = [Pair(("B", 1, v), "x" * n, "y" * m)
               for v, (n, m) in enumerate([(10, 30), (30, 12), (12, 40)], 1)]
    kept, bad = bible.drop_misaligned_chapters(good + shifted, 0.23)
    assert kept == good and list(bad) == ["B 1"]


@pytest.mark.unit
def test_assign_splits_deterministic_whole_chapters():
    docs = [f"Book{b} {c}" for b in range(30) for c in range(1, 40)]
    splits = assign_splits(docs, 0.02, 0.02, seed=1)
    assert splits == assign_splits(list(reversed(docs)), 0.02, 0.02, seed=1)
    assert set(splits) == set(docs)
    counts = {s: list(splits.values()).count(s) for s in bible.SPLITS}
    assert 5 <= counts["test"] <= 45 and 5 <= counts["valid"] <= 45
    # a chapter's split does not depend on the other chapters
    subset = assign_splits(docs[:100], 0.02, 0.02, seed=1)
    assert all(subset[d] == splits[d] or splits[d] == "train" for d in subset)
    assert assign_splits(docs, 0.02, 0.02, seed=2) != splits


@pytest.mark.unit
def test_assign_splits_small_corpus_gets_valid_and_test():
    splits = assign_splits(["G 1", "G 2", "G 3"], 0.0, 0.0)
    assert sorted(splits.values()) == ["test", "train", "valid"]


@pytest.mark.unit
def test_split_pairs_keeps_order_and_docids_line_up(tmp_path):
    pairs = [Pair(("G", c, v), f"es{c}.{v}", f"en{c}.{v}")
             for c in range(1, 8) for v in range(1, 4)]
    splits = assign_splits([p.doc for p in pairs], 0.2, 0.2)
    by_split = bible.split_pairs(pairs, splits)
    assert sum(map(len, by_split.values())) == len(pairs)
    for split, items in by_split.items():
        assert [p.ref for p in items] == sorted(p.ref for p in items)
        bible.write_lines(tmp_path / f"{split}.es", (p.src for p in items))
        bible.write_lines(tmp_path / f"{split}.docids", (p.doc for p in items))
        assert (bible.count_lines(tmp_path / f"{split}.es")
                == bible.count_lines(tmp_path / f"{split}.docids") == len(items))
        docs = bible.read_lines(tmp_path / f"{split}.docids")
        assert all(splits[d] == split for d in docs)


@pytest.mark.unit
def test_markers_require_same_settings(tmp_path):
    markers = bible.Markers(tmp_path)
    assert not markers.done("text", {"a": 1})
    markers.mark("text", {"a": 1})
    assert markers.done("text", {"a": 1}) and not markers.done("text", {"a": 2})
    markers.unmark("text")
    assert not markers.done("text", {"a": 1})


@pytest.mark.unit
def test_missing_mod2imp_is_a_clean_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bible.shutil, "which", lambda name: None)
    assert bible.main(["--dest", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("fairseq_ctx: error: mod2imp not found")
    assert "\n" not in err and "apt-get install" in err


# --- end to end ---------------------------------------------------------------

def _modules_installed():
    if shutil.which("mod2imp") is None:
        return False
    for module in bible.MODULES.values():
        out = subprocess.run(["mod2imp", module], capture_output=True)
        if out.returncode != 0 or b"$$$" not in out.stdout[:10000]:
            return False
    return True


@pytest.mark.skipif(not _modules_installed(),
                    reason="mod2imp / SWORD modules not installed")
def test_prepare_bible_script(tmp_path, capsys):
    dest = tmp_path / "bible"
    cmd = ["bash", str(REPO / "scripts" / "prepare-bible.sh"), "--dest", str(dest),
           "--max-verses", "2000", "--vocab-size", "1000"]
    env = {**os.environ, "PYTHON": sys.executable}
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 0, run.stderr[-2000:]

    stats = json.loads((dest / "stats.json").read_text())
    assert sum(stats["pairs"].values()) == 2000
    assert all(stats["pairs"][s] > 0 and stats["chapters"][s] > 0
               for s in bible.SPLITS)
    assert stats["alignment"]["aligned"] > 30000
    for split in bible.SPLITS:
        docids = bible.read_lines(dest / "raw" / f"{split}.docids")
        assert bible.read_lines(dest / "bin" / f"{split}.es-en.docids") == docids
        for lang in ("es", "en"):
            lines = bible.read_lines(dest / "raw" / f"{split}.{lang}")
            assert len(lines) == len(docids) and all(lines)
            assert not any("<" in line or "  " in line for line in lines)
        assert bible.binarized_sizes(dest / "bin", split) == {
            "es": len(docids), "en": len(docids)}
    assert bible.read_lines(dest / "raw" / "train.es")[0].startswith(
        "En el principio crió Dios")
    assert bible.read_lines(dest / "raw" / "train.docids")[0] == "Genesis 1"

    # fairseq's own reader agrees with the .idx header check
    from fairseq.data import data_utils
    test_es = data_utils.load_indexed_dataset(str(dest / "bin" / "test.es-en.es"), None)
    assert len(test_es) == stats["pairs"]["test"]

    # re-running skips every finished step (in-process: faster)
    args = ["--dest", str(dest), "--max-verses", "2000", "--vocab-size", "1000"]
    assert bible.main(args) == 0
    assert capsys.readouterr().out.count("already done, skipping") == 4

