"""The study's gender-cue share of attribution (fairseq_ctx.study.gender_cues):
sentencepiece pieces mapped to the words the context set's check marks, and
the share computed by hand on a made-up report."""
import pytest

from fairseq_ctx.study.context_set import Lexicon
from fairseq_ctx.study.gender_cues import cue_pieces, gender_cue_share, piece_spans

LEX = Lexicon(["Y él se sentó. Y ella se levantó. Y se vió. Y se tomó.", "Y tomó la casa.", "Y Ana lloraba."])


@pytest.mark.unit
def test_pieces_are_mapped_to_the_words_the_check_marks():
    pieces = ["\u2581Y", "\u2581el", "la", "\u2581lo", "\u2581vi", "ó", "."]
    text, spans = piece_spans(pieces)
    assert text == " Y ella lo vió." and [text[a:b] for a, b in spans] == [" Y", " el", "la", " lo", " vi", "ó", "."]
    # "ella" (two pieces) marks a woman, the clitic "lo" before a verb a man
    assert cue_pieces(pieces, "feminine", LEX) == [False, True, True, False, False, False, False]
    assert cue_pieces(pieces, "masculine", LEX) == [False, False, False, True, False, False, False]
    # "la" as an article is no cue
    assert not any(cue_pieces(["\u2581Y", "\u2581tomó", "\u2581la", "\u2581casa", "."], "feminine", LEX))


@pytest.mark.unit
def test_the_share_on_the_items_class_cues_by_hand():
    def item(cls, pieces, rows, decided=True):
        return {"id": 0, "meta": {"class": cls}, "context": [{"tokens": pieces}],
                "attributions": [{"context": [r]} for r in rows],
                "scored_right": {"true": True, "none": not decided}}

    she = ["\u2581Y", "\u2581el", "la", "\u2581lo", "\u2581vi", "ó", "."]   # ella: feminine; lo: masculine
    report = {"items": [
        item("feminine", she, [[1, 2, 2, 5, 0, 0, 0]]),   # 4 of 10 on "ella"
        item("masculine", she, [[1, 0, 0, 3, 0, 0, 0], [-4, 0, 0, 1, 0, 0, 1]], decided=False),   # 3/4; 1/2 (no negatives)
        item("feminine", ["\u2581Y", "\u2581tomó", "\u2581la", "\u2581casa", "."], [[1, 1, 1, 1, 1]]),   # no cue
    ]}
    for k, it in enumerate(report["items"]):
        it["group"] = k
    # generated accuracy: item 1 translated right with its context only, item 0 right both ways
    generated = [{"group": 0, "own": {"label": "right"}, "none": {"label": "right"}},
                 {"group": 1, "own": {"label": "right"}, "none": {"label": "wrong"}},
                 {"group": 2, "own": {"label": "neither"}, "none": {"label": "wrong"}}]
    shares = gender_cue_share(report, LEX, generated)
    only = shares["translated_right_only_with_context"]
    assert only["items"] == 1 and only["by_class"]["masculine"]["items"] == 1
    assert only["cue_share"] == pytest.approx((3 / 4 + 1 / 2) / 2)
    assert "translated_right_only_with_context" not in gender_cue_share(report, LEX)
    got = shares["all"]
    assert got["items"] == 3 and got["items_with_cues"] == 2 and got["sensitive_tokens"] == 3
    assert got["cue_share"] == pytest.approx((4 / 10 + 3 / 4 + 1 / 2) / 3)
    assert got["uniform_share"] == pytest.approx((2 / 7 + 1 / 7 + 1 / 7) / 3)
    assert got["by_class"]["feminine"]["cue_share"] == pytest.approx(4 / 10)
    assert got["by_class"]["masculine"]["cue_share"] == pytest.approx((3 / 4 + 1 / 2) / 2)
    assert got["by_class"]["feminine"]["items"] == 2 and got["by_class"]["masculine"]["sensitive_tokens"] == 2
    # the items the context decides: the first and the last (right with the true context only)
    decided = shares["context_decided"]
    assert decided["items"] == 2 and decided["items_with_cues"] == 1 and decided["cue_share"] == pytest.approx(4 / 10)
    assert decided["by_class"]["masculine"] == {"items": 0, "sensitive_tokens": 0, "cue_share": None,
                                                "uniform_share": None, "excess": None, "excess_ci95": None,
                                                "above_uniform": 0}
