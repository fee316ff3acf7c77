"""The context contrastive set's builder (fairseq_ctx.study.context_set) on a
made-up chapter: which verse pairs qualify, the current-verse check,
held-out training chapters, balance, determinism, the error line."""
import json
import subprocess
import sys

import pytest

from fairseq_ctx.study.context_set import Lexicon, build, drop_chapters, mine, spanish_cue_spans, spanish_cues
from tests.utils import REPO

# (Spanish, English) verse pairs of one chapter; the comment says what the
# pair (previous verse, this verse) is
CHAPTER = [
    ("Y Ana lloraba mucho.", "Hannah wept much."),
    ("Y dijo á su siervo: Ve.", "She said to her servant, go."),  # feminine: qualifies
    ("Y fué sanada aquel día.", "She was healed that day."),  # "sanada" marks her: rejected
    ("Y Elcana subió al monte.", "Elkanah went up to the mountain."),
    ("Y tomó su cuchillo.", "He took his knife."),  # masculine: qualifies
    ("Y ella lo vió.", "She saw him."),  # previous verse masculine, this one both genders: no
    ("Y habló con su siervo.", "He spoke with his servant."),  # previous has she and him: no
    ("Y tomó su manto.", "He took his cloak."),  # masculine after masculine: qualifies
]
SPANISH_CORPUS = ["Y él se sentó. Y ella se levantó. Y se vió. Y se tomó.", "Y tomó la casa.", "Y fué sanado.", "Sanada fué."]


def lexicon():
    return Lexicon([es for es, _ in CHAPTER] + SPANISH_CORPUS)


@pytest.mark.unit
def test_spanish_check():
    lex = lexicon()
    # a word marked feminine blocks a feminine item only; masculine, a masculine one
    assert spanish_cues("Y fué sanada aquel día.", lex) == {"masculine": [], "feminine": ["agreement"]}
    assert spanish_cues("Y ella lo vió.", lex) == {"masculine": ["clitic"], "feminine": ["pronoun"]}
    assert spanish_cues("Y Obed subió.", lex) == {"masculine": ["name"], "feminine": ["name"]}  # unknown gender
    assert spanish_cues("Y Elcana subió.", lex) == {"masculine": ["name"], "feminine": []}  # a man's name
    assert spanish_cues("Y dijo Jehová á la mujer.", lex) == {"masculine": ["name", "noun"], "feminine": ["noun"]}
    assert spanish_cues("Y tomó la casa.", lex) == {"masculine": [], "feminine": []}  # "la" here is an article
    assert spanish_cues("Y tomóla.", lex)["feminine"] == ["clitic"]
    assert spanish_cues("Y había sanado.", lex)["masculine"] == []  # the invariant perfect participle
    assert spanish_cues("Y dijo á su siervo: Ve.", lex) == {"masculine": ["noun"], "feminine": []}


@pytest.mark.unit
def test_where_the_check_finds_its_cues():
    """spanish_cue_spans: the words behind spanish_cues' reasons, by character
    span (what attribution's cue share marks in a context sentence)."""
    lex = lexicon()
    line = "Y dijo Jehová á la mujer."
    spans = spanish_cue_spans(line, lex)
    assert [(line[a:b], why) for (a, b), why in spans["masculine"]] == [("Jehová", "noun"), ("Jehová", "name")]
    assert [(line[a:b], why) for (a, b), why in spans["feminine"]] == [("mujer", "noun")]
    line = "Y ella lo vió. Y tomóla."
    spans = spanish_cue_spans(line, lex)
    assert [line[a:b] for (a, b), _ in spans["feminine"]] == ["ella", "tomóla"]
    assert [line[a:b] for (a, b), _ in spans["masculine"]] == ["lo"]


@pytest.mark.unit
def test_which_items_qualify_and_the_check_rejects():
    es, en = [p[0] for p in CHAPTER], [p[1] for p in CHAPTER]
    docids = ["Ruth 1"] * len(CHAPTER)
    items, stats = mine(es, en, docids, "test", lexicon())
    assert [(i["where"], i["class"], i["line"]) for i in items] == [
        ("test:2", "feminine", 2), ("test:5", "masculine", 5), ("test:8", "masculine", 8)]
    assert items[0]["contrast"] == "He said to his servant, go."
    assert items[0]["previous_es_cues"] == ["name"]  # "Ana": a woman's name in the previous Spanish verse
    assert dict(stats["feminine"]) == {"candidates": 2, "passed": 1, "rejected": 1, "rejected:agreement": 1}
    assert dict(stats["masculine"]) == {"candidates": 2, "passed": 2}
    # a new chapter starts at line 5: its first verse has no previous verse
    items, _ = mine(es, en, docids[:4] + ["Ruth 2"] * 4, "test", lexicon())
    assert [i["where"] for i in items] == ["test:2", "test:8"]


def _corpus(root, train_chapters):
    """test = the chapter; valid = SPANISH_CORPUS (nothing qualifies); train =
    the chapter under several chapter ids."""
    root.mkdir()
    splits = {"test": [("Ruth 1", p) for p in CHAPTER], "valid": [("Ruth 9", (es, "It was quiet."))
                                                                    for es in SPANISH_CORPUS],
              "train": [(doc, p) for doc in train_chapters for p in CHAPTER]}
    for split, rows in splits.items():
        (root / f"{split}.es").write_text("".join(es + "\n" for _, (es, _) in rows), encoding="utf-8")
        (root / f"{split}.en").write_text("".join(en + "\n" for _, (_, en) in rows), encoding="utf-8")
        (root / f"{split}.docids").write_text("".join(d + "\n" for d, _ in rows), encoding="utf-8")
    return root


@pytest.mark.unit
def test_heldout_chapters_balance_and_determinism(tmp_path):
    raw = _corpus(tmp_path / "raw", ["Gen 1", "Gen 2", "Gen 3", "Gen 4"])
    counts = build(str(raw), str(tmp_path / "a"), min_per_class=3)
    build(str(raw), str(tmp_path / "b"), min_per_class=3)
    for name in ("pronouns.src", "pronouns.dst", "pronouns.json", "heldout_chapters.txt", "counts.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    # test gives 1 feminine item: two more training chapters are held out
    # (each gives 1 feminine, 2 masculine), the first two in SHA-1 order of their ids
    assert counts["heldout_train_chapters"] == ["Gen 1", "Gen 4"]
    assert (tmp_path / "a" / "heldout_chapters.txt").read_text() == "Gen 1\nGen 4\n"
    assert counts["available"] == {"masculine": 6, "feminine": 3}
    assert counts["by_class"] == {"masculine": 3, "feminine": 3} and counts["groups"] == 6
    test_row = counts["sources"]["test"]["by_class"]
    assert test_row["masculine"]["kept"] == 2 and test_row["feminine"]["kept"] == 1  # the test items first
    assert counts["sources"]["train"]["by_class"]["feminine"]["passed"] == 4  # all four chapters
    assert counts["sources"]["train"]["by_class"]["feminine"]["passed_in_heldout_chapters"] == 2
    groups = json.loads((tmp_path / "a" / "pronouns.json").read_text())
    # masculine down-sampled to 3: both test items, then Gen 4:32 (first in SHA-1 order of
    # Gen 1:5, Gen 1:8, Gen 4:29, Gen 4:32); the true candidate alternates within each class
    assert [(g["class"], g["where"], g["true_ind"]) for g in groups] == [
        ("feminine", "test:2", 0), ("masculine", "test:5", 0), ("masculine", "test:8", 1),
        ("feminine", "train:2", 1), ("feminine", "train:26", 0), ("masculine", "train:32", 0)]
    assert [g["docid"] for g in groups[3:]] == ["Gen 1", "Gen 4", "Gen 4"]
    assert all(g["check"] == "pass" for g in groups)
    src = (tmp_path / "a" / "pronouns.src").read_text().splitlines()
    dst = (tmp_path / "a" / "pronouns.dst").read_text().splitlines()
    assert src[0] == src[1] == "Y Ana lloraba mucho. _eos Y dijo á su siervo: Ve."
    assert dst[0] == "Hannah wept much. _eos She said to her servant, go."
    assert dst[1] == "Hannah wept much. _eos He said to his servant, go."
    assert dst[4] == "He spoke with his servant. _eos She took her cloak."  # true_ind 1: the reference second
    assert dst[5] == "He spoke with his servant. _eos He took his cloak."


@pytest.mark.unit
def test_drop_chapters(tmp_path):
    raw = _corpus(tmp_path / "raw", ["Gen 1", "Gen 2"])
    assert drop_chapters(str(raw), "train", ["Gen 2"], str(tmp_path / "out")) == {"kept": 8, "dropped": 8}
    assert (tmp_path / "out" / "train.docids").read_text() == "Gen 1\n" * 8
    assert (tmp_path / "out" / "train.en").read_text().splitlines() == [en for _, en in CHAPTER]


def test_too_few_items_is_one_error_line_and_counts(tmp_path):
    raw = _corpus(tmp_path / "raw", ["Gen 1"])
    proc = subprocess.run([sys.executable, "-m", "fairseq_ctx.study.context_set", "--raw", str(raw),
                           "--out", str(tmp_path / "out"), "--min-per-class", "5"],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        "fairseq_ctx: error: --min-per-class 5: the whole corpus in " + str(raw) + " gives {'masculine': 4, "
        "'feminine': 2} items (short by {'masculine': 1, 'feminine': 3}); no set written, counts in "
        + str(tmp_path / "out" / "counts.json")]
    assert not (tmp_path / "out" / "pronouns.json").exists()
    assert json.loads((tmp_path / "out" / "counts.json").read_text())["heldout_train_chapters"] == ["Gen 1"]
    with pytest.raises(SystemExit):
        from fairseq_ctx.study.context_set import main
        main(["--raw", str(tmp_path / "missing"), "--out", str(tmp_path / "x")])
