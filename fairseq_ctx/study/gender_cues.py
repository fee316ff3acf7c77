"""Whether a context model's attribution falls on the previous verse's gender
cues: for the balanced he/she context test (:mod:`fairseq_ctx.study.context_set`)
analysed by ``fairseq-ctx-context-usage --attribution`` (PECoRe's contrastive
gradient x input, :mod:`fairseq_ctx.evaluation.attribution`; the true
candidates analysed), over all its items, over those the model scores
right with the true context and wrong with none, and over those it
translates right (generated accuracy) only with its context, the share of
each context-sensitive target token's positive context attribution that lands
on the subword pieces of the previous Spanish verse's words marked for the
item's gender, against the share a uniform attribution would give (the cue
pieces' share of the context's pieces).

The cues are those the set's current-verse check finds
(:func:`~fairseq_ctx.study.context_set.spanish_cue_spans`: gendered pronouns,
object clitics, nouns with natural gender, names of known gender, agreeing
participles and adjectives, words whose meaning carries the gender), taken in
the item's class, with the lexicon the set was built with.  A name of
unknown gender counts for both classes, as in the check.  Items whose
previous verse has no cue of their class are left out of the share (the
set's counts.json says how many have one: ``kept_with_previous_es_cue``);
the count of each is reported.
"""
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from fairseq_ctx.evaluation.attribution_report import cue_share
from fairseq_ctx.study.context_set import CLASSES, Lexicon, spanish_cue_spans

SPM_SPACE = "\u2581"   # sentencepiece's word-boundary mark


def piece_spans(pieces: Sequence[str]) -> Tuple[str, List[Tuple[int, int]]]:
    """The text of sentencepiece ``pieces`` and each piece's character span
    in it (a piece's word-boundary mark is the space before its word)."""
    text, spans = "", []
    for p in pieces:
        s = p.replace(SPM_SPACE, " ")
        spans.append((len(text), len(text) + len(s)))
        text += s
    return text, spans


def cue_pieces(pieces: Sequence[str], gender: str, lex: Lexicon) -> List[bool]:
    """Per piece of a Spanish sentence: whether it belongs to a word that the
    check takes as a cue of ``gender``."""
    text, spans = piece_spans(pieces)
    cues = [span for span, _ in spanish_cue_spans(text, lex)[gender]]
    return [any(a < cb and ca < b for ca, cb in cues) for a, b in spans]


def item_cues(lex: Lexicon) -> Callable[[Dict], List[bool]]:
    """For :func:`~fairseq_ctx.evaluation.attribution_report.cue_share`: an
    item's cue mask over its context pieces (every context sentence, in
    order), in the gender of the item's class."""
    def cues(item: Dict) -> List[bool]:
        gender = item["meta"]["class"]
        return [c for sentence in item["context"] for c in cue_pieces(sentence["tokens"], gender, lex)]
    return cues


def _share(items: List[Dict], cues) -> Dict:
    out = {"items": len(items), "items_with_cues": sum(1 for it in items if any(cues(it))),
           **cue_share({"items": items}, cues), "by_class": {}}
    for c in CLASSES:
        part = [it for it in items if it["meta"]["class"] == c]
        out["by_class"][c] = {"items": len(part), **cue_share({"items": part}, cues)}
    return out


def gender_cue_share(report: Dict, lex: Lexicon, generated: Optional[List[Dict]] = None) -> Dict:
    """The cue share (see the module docstring) of an attribution report of
    the context test, over all its items (``all``), over those the model
    scores right with the true context and wrong with none
    (``context_decided``, from each item's ``scored_right``) and, given the
    usage report's generated accuracy per item (``generated``: its
    ``per_item``), over those it translates right with its context and not
    without (``translated_right_only_with_context``), each also per class."""
    # each item's mask once: the Spanish check behind it is the costly part, and every subset reuses it
    mask_of = item_cues(lex)
    masks = {id(it): mask_of(it) for it in report["items"]}

    def cues(item: Dict) -> List[bool]:
        return masks[id(item)]

    decided = [it for it in report["items"] if it["scored_right"]["true"] and not it["scored_right"]["none"]]
    out = {"all": _share(report["items"], cues), "context_decided": _share(decided, cues)}
    if generated is not None:
        groups = {p["group"] for p in generated if p["own"]["label"] == "right" and p["none"]["label"] != "right"}
        out["translated_right_only_with_context"] = _share([it for it in report["items"] if it["group"] in groups],
                                                           cues)
    return out
