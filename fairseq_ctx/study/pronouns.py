"""A contrastive pronoun set mined from the Bible corpus's held-out chapters:
third-person pronoun gender that the Spanish verse leaves open and the
previous verse settles.

Spanish drops subject pronouns ("dijo" = he/she said) and its possessive
"su"/"sus" does not mark the possessor's gender, so an English "he"/"she",
"his"/"her" must come from the context.  A verse qualifies when

* it is not the first verse of its chapter (it has a previous verse);
* its English reference has pronouns of exactly one gender
  (masculine: he, him, his, himself; feminine: she, her, hers, herself);
* the previous verse's English reference has pronouns of that same gender and
  none of the other, i.e. the previous verse is about a referent of that
  gender (a proxy: we cannot check the Spanish for the referent itself);
* its Spanish verse has no explicit subject pronoun (él, ella, ellos, ellas),
  which would decide the gender without context.

Object clitics (lo/la) can still hint at the gender, and "la" is also an
article, so they are not filtered; the set is therefore "mostly decided by
the previous verse", and a model that ignores context can score above 50%
through such hints or through the frequency of "he" in the Bible.  Per-class
accuracy shows the latter: a model that always prefers the masculine form
scores 1.0 on "he" and 0.0 on "she".

The contrastive variant flips every pronoun of the verse to the other gender
(he<->she, him->her, his->her, himself<->herself, hers->his; "her" becomes
"his" before a content word and "him" otherwise), keeping capitalisation.

Output, in Voita et al.'s (2019) format read by ``fairseq_ctx.evaluation.contrastive
--format voita``: ``pronouns.src`` and ``pronouns.dst`` (one candidate per
line, ``previous _eos current``), ``pronouns.json`` (groups with ``dst``,
``true_ind``, and our ``class`` and ``where``).  The true candidate is first
in even-numbered groups and second in odd ones, so a tie rule cannot favour
one class.  The order is that of the splits and lines: the output is
deterministic.

    python3 -m fairseq_ctx.study.pronouns --raw data/bible/raw --out DIR
"""
import argparse
import json
import os
import re
from typing import Dict, List, Optional, Sequence

MASCULINE = {"he": "she", "him": "her", "his": "her", "himself": "herself"}
FEMININE = {"she": "he", "hers": "his", "herself": "himself"}  # "her": see _flip_her
GENDER_WORDS = {"masculine": set(MASCULINE), "feminine": set(FEMININE) | {"her"}}
SPANISH_SUBJECT_PRONOUNS = {"él", "ella", "ellos", "ellas"}
# words after which "her" is an object ("gave her the", "to her and"): -> "him"
_NOT_A_NOUN = {
    "the", "a", "an", "to", "and", "or", "but", "in", "into", "out", "up", "down", "for", "from", "with",
    "by", "on", "upon", "at", "of", "off", "that", "this", "these", "those", "as", "away", "not", "again",
    "all", "be", "is", "was", "go", "so", "then", "there", "when", "if", "because", "after", "before",
    "until", "saying", "said", "over", "under", "about", "against", "among", "between", "through", "no",
    "yet", "also", "who", "which", "what", "how", "why", "where", "while", "nor", "back", "forth",
}
_WORD_RE = re.compile(r"[A-Za-z]+|[^A-Za-z]+")


def words(text: str) -> List[str]:
    return re.findall(r"[a-záéíóúüñ]+", text.lower())


def gender(text: str) -> Optional[str]:
    """'masculine' / 'feminine' when the English text has pronouns of one
    gender only, else None (none, or both)."""
    present = set(words(text))
    found = [g for g, ws in GENDER_WORDS.items() if present & ws]
    return found[0] if len(found) == 1 else None


def _keep_case(new: str, old: str) -> str:
    if old.isupper() and len(old) > 1:
        return new.upper()
    return new.capitalize() if old[0].isupper() else new


def flip(text: str) -> str:
    """The verse with every third-person singular pronoun in the other gender."""
    pieces = _WORD_RE.findall(text)
    out = []
    for i, piece in enumerate(pieces):
        low = piece.lower()
        if low in MASCULINE:
            out.append(_keep_case(MASCULINE[low], piece))
        elif low in FEMININE:
            out.append(_keep_case(FEMININE[low], piece))
        elif low == "her":
            nxt = pieces[i + 2].lower() if i + 2 < len(pieces) and pieces[i + 1] == " " else ""
            out.append(_keep_case("his" if nxt.isalpha() and nxt not in _NOT_A_NOUN else "him", piece))
        else:
            out.append(piece)
    return "".join(out)


def mine(es: Sequence[str], en: Sequence[str], docids: Sequence[str], split: str = "") -> List[Dict]:
    """The qualifying verses of one split (see the module docstring)."""
    if not len(es) == len(en) == len(docids):
        raise ValueError(f"{split}: {len(es)} Spanish, {len(en)} English lines and {len(docids)} docids")
    items = []
    for i in range(1, len(en)):
        if docids[i] != docids[i - 1]:
            continue
        g = gender(en[i])
        if g is None or gender(en[i - 1]) != g:
            continue
        if set(words(es[i])) & SPANISH_SUBJECT_PRONOUNS:
            continue
        contrast = flip(en[i])
        if contrast == en[i]:
            continue
        items.append({"class": g, "where": f"{split}:{i + 1}", "src": es[i], "src_prev": es[i - 1],
                      "ref": en[i], "ref_prev": en[i - 1], "contrast": contrast})
    return items


def _read(path: str) -> List[str]:
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def write_voita(items: Sequence[Dict], true_inds: Sequence[int], out_dir: str, meta_keys: Sequence[str],
                separator: str = "_eos"):
    """Write ``items`` (dicts with src_prev, src, ref_prev, ref, contrast) as
    a Voita-format set ``out_dir/pronouns.{src,dst,json}``: one group of two
    candidates per item, the reference at ``true_inds[k]``; each group's JSON
    entry carries ``dst``, ``true_ind`` and the item's ``meta_keys``."""
    os.makedirs(out_dir, exist_ok=True)
    groups, src_lines, dst_lines = [], [], []
    for item, true_ind in zip(items, true_inds):
        dst = [item["contrast"], item["contrast"]]
        dst[true_ind] = item["ref"]
        for cand in dst:
            src_lines.append(f"{item['src_prev']} {separator} {item['src']}")
            dst_lines.append(f"{item['ref_prev']} {separator} {cand}")
        groups.append({"dst": dst, "true_ind": true_ind, **{k: item[k] for k in meta_keys}})
    for name, lines in (("pronouns.src", src_lines), ("pronouns.dst", dst_lines)):
        with open(os.path.join(out_dir, name), "w", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in lines)
    with open(os.path.join(out_dir, "pronouns.json"), "w", encoding="utf-8") as f:
        json.dump(groups, f, ensure_ascii=False, indent=0)


def build(raw_dir: str, out_dir: str, splits: Sequence[str] = ("valid", "test"), separator: str = "_eos") -> Dict:
    """Write the set (pronouns.{src,dst,json}) and return counts per class."""
    items = []
    for split in splits:
        base = os.path.join(raw_dir, split)
        items += mine(_read(base + ".es"), _read(base + ".en"), _read(base + ".docids"), split)
    write_voita(items, [k % 2 for k in range(len(items))], out_dir, ("class", "where"), separator)
    counts = {g: sum(1 for item in items if item["class"] == g) for g in GENDER_WORDS}
    return {"groups": len(items), "by_class": counts}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--raw", required=True, help="the corpus's raw/ directory ({split}.es/.en/.docids)")
    p.add_argument("--out", required=True)
    p.add_argument("--splits", nargs="+", default=["valid", "test"], help="held-out splits to mine")
    opts = p.parse_args(argv)
    for split in opts.splits:
        for ext in ("es", "en", "docids"):
            path = os.path.join(opts.raw, f"{split}.{ext}")
            if not os.path.exists(path):
                p.error(f"--raw {opts.raw}: missing {path}")
    print(json.dumps(build(opts.raw, opts.out, opts.splits)))


if __name__ == "__main__":
    main()
