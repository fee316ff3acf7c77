"""Generated accuracy on a contrastive set ("translate, then check"): does
the model *write* the context-dependent form, not only score it best?

Following the generated-output checks of MuDA (Fernandes et al., ACL 2023)
and ctxPro (Wicks and Post, WMT 2023), on the items of a forced-decoding set
(Voita et al. 2019, ContraPro, Bawden et al. 2018, ours): an item *qualifies*
when its true candidate differs from every wrong candidate in one word or
one contiguous phrase (one non-equal block of a word-level diff, non-empty on
both sides), so that the correct form and the wrong forms can be looked for
in a translation.  Candidates that differ in several places (Voita's deixis
items, which change the T/V form throughout, or a pronoun swapped at two
places) do not qualify, nor those where one candidate only inserts words
(nothing to look for on one side) or a wrong candidate equals the true one.

Words are compared lower-cased, split at whitespace, with punctuation at
their edges removed (``"He,"`` is ``he``), in the text space of the
candidates after ``--tokenizer`` (before ``--bpe``); a translation is
brought to that space by undoing ``--bpe``.  A form *occurs* in a sentence
as a contiguous run of whole words.

A translation of an item is

* **right** when, for every wrong candidate, it holds the correct form at
  least as often as the true candidate does and the wrong form no more often
  than the true candidate does (counting relative to the true candidate, so
  the reference itself is always right, even when a wrong form also occurs
  elsewhere in it, as "he" does in "she said he would come");
* **wrong** when it holds a wrong form more often and the correct form not
  enough; **both** when it does both; **neither** when it holds neither (a
  paraphrase: the check cannot tell).

Generated accuracy = right / qualified items.  The matrix crosses it with the
forced-decoding credit of the same items ("scores right, translates wrong":
a model that ranks the right candidate first but does not produce it).
Nothing here imports torch: the decoding is
:mod:`fairseq_ctx.evaluation.context_usage`'s.
"""
import difflib
import unicodedata
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from fairseq_ctx.evaluation.contrastive.groups import Group

LABELS = ("right", "wrong", "both", "neither")


def words(text: str) -> List[str]:
    """The comparison form of a sentence: lower-cased whitespace tokens with
    punctuation stripped from their edges (tokens of punctuation only are
    dropped)."""
    out = []
    for w in text.lower().split():
        start, end = 0, len(w)
        while start < end and unicodedata.category(w[start]).startswith("P"):
            start += 1
        while end > start and unicodedata.category(w[end - 1]).startswith("P"):
            end -= 1
        if start < end:
            out.append(w[start:end])
    return out


def occurrences(sentence: Sequence[str], form: Sequence[str]) -> int:
    """How often ``form`` (words) occurs in ``sentence`` (words) as a
    contiguous run; overlapping runs count separately."""
    n = len(form)
    if n == 0 or n > len(sentence):
        return 0
    form = list(form)
    return sum(1 for i in range(len(sentence) - n + 1) if list(sentence[i:i + n]) == form)


@dataclass(frozen=True)
class Forms:
    """What to look for in a translation of one item: the true candidate's
    words, and per wrong candidate the (correct form, wrong form) pair where
    the two differ."""
    true_words: Tuple[str, ...]
    pairs: Tuple[Tuple[Tuple[str, ...], Tuple[str, ...]], ...]


def item_forms(group: Group) -> Tuple[Optional[Forms], str]:
    """``(forms, "")`` when the group qualifies, else ``(None, why)``."""
    true = words(group.candidates[group.true_index].target)
    pairs = []
    for i, cand in enumerate(group.candidates):
        if i == group.true_index:
            continue
        wrong = words(cand.target)
        if wrong == true:
            if cand.target == group.candidates[group.true_index].target:
                continue  # the true translation listed twice (Voita's ellipsis sets)
            return None, "a wrong candidate equals the true one"
        blocks = [op for op in difflib.SequenceMatcher(None, true, wrong, autojunk=False).get_opcodes()
                  if op[0] != "equal"]
        if len(blocks) > 1:
            return None, "differs in several places"
        _, i1, i2, j1, j2 = blocks[0]
        if i1 == i2 or j1 == j2:
            return None, "one candidate only inserts words"
        pairs.append((tuple(true[i1:i2]), tuple(wrong[j1:j2])))
    if not pairs:
        return None, "no wrong candidate"
    return Forms(tuple(true), tuple(pairs)), ""


def check(forms: Forms, translation: str) -> str:
    """The label of one translation (see the module docstring)."""
    hyp = words(translation)
    has_correct = all(occurrences(hyp, c) >= occurrences(forms.true_words, c) for c, _ in forms.pairs)
    has_wrong = any(occurrences(hyp, w) > occurrences(forms.true_words, w) for _, w in forms.pairs)
    if has_correct:
        return "both" if has_wrong else "right"
    return "wrong" if has_wrong else "neither"


def qualifying(groups: Sequence[Group]) -> Tuple[List[int], List[Forms], Dict[str, int]]:
    """Indices and forms of the groups that qualify, and the count of each
    reason the others do not."""
    keep, forms, why = [], [], defaultdict(int)
    for i, g in enumerate(groups):
        f, reason = item_forms(g)
        if f is None:
            why[reason] += 1
        else:
            keep.append(i)
            forms.append(f)
    return keep, forms, dict(why)


def summarize(groups: Sequence[Group], keep: Sequence[int], labels: Sequence[str],
              scored_right: Optional[Sequence[bool]] = None) -> Dict[str, Any]:
    """Counts of each label over the qualifying groups ``keep`` (``labels``
    aligned with it), accuracy, the breakdown by every ``meta`` key, and,
    given the forced-decoding verdicts of the same groups, the matrix."""
    def bucket():
        return {"items": 0, **{lab: 0 for lab in LABELS}}

    total = bucket()
    by: Dict[str, Dict[str, Dict]] = defaultdict(lambda: defaultdict(bucket))
    for g, lab in zip(keep, labels):
        for b in [total] + [by[k][str(v)] for k, v in groups[g].meta.items()]:
            b["items"] += 1
            b[lab] += 1

    def finish(b):
        b["accuracy"] = b["right"] / b["items"] if b["items"] else float("nan")
        return b

    res = {**finish(total), "by": {k: {v: finish(b) for v, b in sorted(d.items())} for k, d in by.items()}}
    if scored_right is not None:
        if len(scored_right) != len(labels):
            raise ValueError(f"{len(scored_right)} forced-decoding verdicts for {len(labels)} items")
        matrix = {f"scores {s}, translates {t}": 0 for s in ("right", "wrong") for t in ("right", "wrong")}
        for s, lab in zip(scored_right, labels):
            matrix[f"scores {'right' if s else 'wrong'}, translates {'right' if lab == 'right' else 'wrong'}"] += 1
        res["matrix"] = matrix
    return res
