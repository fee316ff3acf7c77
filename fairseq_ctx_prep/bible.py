"""Prepare a document-level Spanish-English parallel corpus from two Bibles.

Source texts are the SWORD modules ``spaRV1909eb`` (Reina-Valera 1909, Debian
package ``sword-text-sparv``) and ``engWEB2015eb`` (World English Bible,
``sword-text-web``), exported with ``mod2imp`` (``libsword-utils``).

Pipeline (each step is skipped when its marker says it already finished with
the same settings; ``--force`` redoes everything)::

    extract   mod2imp MODULE                     -> DEST/source/MODULE.imp
    text      strip OSIS markup, align verses by
              reference, split by chapter         -> DEST/raw/{split}.{es,en,docids}
    spm       joint sentencepiece model on train,
              encode every split                  -> DEST/spm/
    binarize  fairseq-preprocess --joined-dictionary, docids beside the data,
              line counts verified                -> DEST/bin/

Every chapter (``Book Chapter``, e.g. ``Genesis 1``) is one document; its
verses stay in canonical order and whole chapters go to train/valid/test.

Usage (``scripts/prepare-bible.sh`` also installs the Debian packages)::

    python3 -m fairseq_ctx_prep.bible --dest data/bible --vocab-size 8000

Quirks of the source data handled here (see the functions for details):
footnotes glued between words (``God<note>..</note>created``), spaces lost
around the added words of spaRV1909eb (``<transChange>``), the Reina-Valera
small capitals at chapter starts (``EN el principio``), English-only
deuterocanonical books, and ten chapters whose Spanish verse numbering is
shifted against the English one (dropped whole).

The parsing, cleaning, alignment and split functions are pure and unit-tested
in ``tests/test_bible.py``.
"""
from __future__ import annotations

import argparse
import hashlib
import html
import json
import math
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from .files import (ERROR_PREFIX, SPLITS, Log, Markers, PrepError, count_lines, dir_size, fresh_dir,
                    idx_length, no_partial_outputs, publish_dir, read_lines, run_logged, write_lines,
                    write_text_atomic)

SRC_LANG, TGT_LANG = "es", "en"
MODULES = {SRC_LANG: "spaRV1909eb", TGT_LANG: "engWEB2015eb"}
APT_PACKAGES = ("sword-text-sparv", "sword-text-web", "libsword-utils")
# Bump when the output of a step changes, so old markers no longer match.
PIPELINE_VERSION = 1
INSTALL_HINT = "apt-get install " + " ".join(APT_PACKAGES)

# A verse reference: (book, chapter, verse), e.g. ("Genesis", 1, 1).
Ref = Tuple[str, int, int]


# --------------------------------------------------------------------------
# Parsing mod2imp output
# --------------------------------------------------------------------------

_KEY_RE = re.compile(r"^\$\$\$(.*)$", re.M)
_REF_RE = re.compile(r"^(?P<book>.+) (?P<chapter>\d+):(?P<verse>\d+)$")


def parse_ref(key: str) -> Optional[Ref]:
    """``"I Samuel 3:10"`` -> ``("I Samuel", 3, 10)``; None for headings."""
    match = _REF_RE.match(key.strip())
    if not match:
        return None
    return match["book"], int(match["chapter"]), int(match["verse"])


def parse_imp(text: str) -> List[Tuple[Ref, str]]:
    """Split ``mod2imp`` output into ``(ref, markup)`` entries in file order.

    Module/testament headings and verse 0 (book and chapter introductions)
    are skipped; for a repeated reference the first entry wins.
    """
    parts = _KEY_RE.split(text)
    entries, seen = [], set()
    for key, body in zip(parts[1::2], parts[2::2]):
        ref = parse_ref(key)
        if ref is None or ref[2] == 0 or ref in seen:
            continue
        seen.add(ref)
        entries.append((ref, body.strip("\n")))
    return entries


def doc_id(ref: Ref) -> str:
    """Document id of a verse: its chapter, e.g. ``"Genesis 1"``."""
    return f"{ref[0]} {ref[1]}"


# --------------------------------------------------------------------------
# Stripping OSIS markup
# --------------------------------------------------------------------------

# Stands in for removed markup that may or may not separate two words; it is
# resolved by _resolve_breaks() once all tags are gone.
_BREAK = "\x00"
# Bracket the words of <transChange type="added">, see _space_added_words().
_ADD_OPEN, _ADD_CLOSE = "\x01", "\x02"
# Elements whose *content* is not translation text.
_DROP_RE = re.compile(
    r"<(note|speaker)\b[^>]*/>|<(note|speaker)\b[^>]*>.*?</\2>", re.S)
_BOOK_END_RE = re.compile(r'<div\b[^>]*\beID="[^"]*"[^>]*\btype="book"[^>]*/>')
_TITLE_RE = re.compile(r"<title\b([^>]*)>(.*?)</title>", re.S)
# Inline wrappers that sit inside running text: removed without a break.
_INLINE_TAG_RE = re.compile(
    r"</?(?:w|q|name|seg|hi|foreign|divineName|rdg|abbr|reference|catchWord"
    r"|index|a)\b[^>]*>")
_ADDED_OPEN_RE = re.compile(r"<transChange\b[^>]*>")
# Any other tag (div, l, lg, lb, p, chapter, milestone, ...) may break.
_TAG_RE = re.compile(r"<[^>]*>")
# Punctuation that attaches to the word before / after it.
_CLOSING = set(".,;:!?)]}»”’…")
_OPENING = set("([{«“‘¿¡")
_BREAK_RUN_RE = re.compile(r"\s*\x00[\s\x00]*")
_ADDED_RE = re.compile(r"(\w*)\x01([^\x01\x02]*)\x02(?=(\w?))")
# Spanish object pronouns written attached to a verb (``sácalo``, ``díjole``).
_ENCLITICS = frozenset(
    "me te se le la lo nos os les las los selo sela melo".split())
# What may precede the first word of a sentence ("" = start of the verse).
_SENTENCE_START = ("", ".", ":", "!", "?", "¡", "¿")
# Accented words that are not verbs, so never take an enclitic.
_NOT_VERBS = frozenset(
    "cuánto cuán qué cómo quién dónde más él tú mí sí aún también además "
    "jamás allá acá aquí allí así".split())


def _title(match: re.Match) -> str:
    """Keep canonical titles (psalm superscriptions), drop section headings."""
    if 'canonical="true"' in match.group(1):
        return _BREAK + match.group(2) + _BREAK
    return _BREAK


def _char_before(text: str, pos: int) -> str:
    """Last non-space character before ``pos`` ("" if none)."""
    pos -= 1
    while pos >= 0 and text[pos].isspace():
        pos -= 1
    return text[pos] if pos >= 0 else ""


def _takes_enclitic(word: str, text: str, start: int) -> bool:
    """Whether ``word`` (at ``text[start:]``) looks like a verb that an
    enclitic pronoun attaches to.

    Verbs in the Reina-Valera take enclitics as infinitives/imperatives
    (``ver``, ``haced``, ``haz``), gerunds and accented finite forms
    (``viéndo``, ``fué``, ``sáca``), or short imperatives (``di``, ``da``).
    Capitalised words count only at the start of a sentence (``Dad``), not
    mid-sentence (``Jehová los acose``).
    """
    lower = word.lower()
    if word[:1].isupper() and _char_before(text, start) not in _SENTENCE_START:
        return False
    if lower in _NOT_VERBS:
        return False
    return (lower.endswith(("r", "d", "z", "ndo"))
            or lower in ("he", "vi", "di", "da", "ve")
            or bool(re.search("[áéíóú]", lower)))


def _space_added_words(text: str) -> str:
    """Restore spaces lost around ``<transChange type="added">`` words.

    spaRV1909eb often writes added words glued to their neighbours
    (``Jehová</w><transChange>será</transChange><w>con``). An added word is
    separated from the next word by a space, and from the previous one too,
    unless it is an enclitic pronoun attached to a verb (``sáca`` + ``lo``).
    """
    if _ADD_OPEN not in text:
        return text

    def replace(match: re.Match) -> str:
        before, added, after = match.group(1), match.group(2), match.group(3)
        glue = (not before or
                (added.strip().lower() in _ENCLITICS
                 and _takes_enclitic(before, text, match.start())))
        return before + ("" if glue else " ") + added + (" " if after else "")

    text = _ADDED_RE.sub(replace, text)
    return text.replace(_ADD_OPEN, "").replace(_ADD_CLOSE, "")


def _resolve_breaks(text: str) -> str:
    """Turn each run of break markers (and whitespace) into one space or none.

    A run disappears at the start/end of the text, before closing
    punctuation (``God<note/>.``, ``coins <note/> ?``) and after opening
    punctuation (``“<note/>Come``); otherwise it becomes one space.
    """
    def replace(match: re.Match) -> str:
        start, end = match.start(), match.end()
        if start == 0 or end == len(text):
            return ""
        if text[end] in _CLOSING or text[start - 1] in _OPENING:
            return ""
        return " "

    return _BREAK_RUN_RE.sub(replace, text)


def clean_osis(markup: str) -> str:
    """Plain text of one verse's OSIS markup.

    Footnotes, cross references and speaker labels are dropped, section
    headings dropped, canonical titles kept; Strong's ``<w>`` wrappers and
    other inline tags are unwrapped. Removed markup never glues two words
    together, never leaves doubled spaces and never detaches punctuation.
    Anything after the end of the book (e.g. an appended glossary) is cut.
    """
    book_end = _BOOK_END_RE.search(markup)
    if book_end:
        markup = markup[:book_end.start()]
    text = _DROP_RE.sub(_BREAK, markup)
    text = _TITLE_RE.sub(_title, text)
    text = _INLINE_TAG_RE.sub("", text)
    text = _ADDED_OPEN_RE.sub(_ADD_OPEN, text).replace("</transChange>", _ADD_CLOSE)
    text = _TAG_RE.sub(_BREAK, text)
    text = _space_added_words(text)
    text = _resolve_breaks(text.replace("\xa0", " "))
    text = html.unescape(text)
    return re.sub(r"\s+", " ", text).strip()


_WORD_RE = re.compile(r"\w+")


def _first_caps_run(text: str) -> Optional[Tuple[int, int]]:
    """Span of the first run of all-capital words (one of 2+ letters)."""
    run: List[re.Match] = []
    for match in _WORD_RE.finditer(text):
        word = match.group(0)
        joined = not run or text[run[-1].end():match.start()] == " "
        if word.isalpha() and word.isupper() and joined:
            run.append(match)
            continue
        if any(len(m.group(0)) > 1 for m in run):
            break
        run = [match] if word.isalpha() and word.isupper() else []
    if any(len(m.group(0)) > 1 for m in run):
        return run[0].start(), run[-1].end()
    return None


def normalize_chapter_caps(verses: Sequence[Tuple[Ref, str]]
                           ) -> List[Tuple[Ref, str]]:
    """Undo the Reina-Valera small capitals at the start of each chapter.

    The first word(s) of a chapter are printed in capitals (``EN el
    principio``, ``Y ACONTECIÓ``, psalm title + ``¡OH Jehová``). In verse 1
    the first run of all-capital words containing a word of two or more
    letters is recased: its first word capitalised, the others lower-cased
    unless the corpus mostly writes them capitalised (``Y JEHOVÁ`` ->
    ``Y Jehová``).
    """
    counts: Dict[str, int] = {}   # words not at the start of a sentence
    for _, text in verses:
        for match in _WORD_RE.finditer(text):
            if _char_before(text, match.start()) not in _SENTENCE_START:
                counts[match.group(0)] = counts.get(match.group(0), 0) + 1

    def recase(word: str, first: bool) -> str:
        title = word[:1] + word[1:].lower()
        if first or counts.get(title, 0) > counts.get(word.lower(), 0):
            return title
        return word.lower()

    def fix(text: str) -> str:
        span = _first_caps_run(text)
        if span is None:
            return text
        words = text[span[0]:span[1]].split(" ")
        fixed = " ".join(recase(w, i == 0) for i, w in enumerate(words))
        return text[:span[0]] + fixed + text[span[1]:]

    return [(ref, fix(text) if ref[2] == 1 else text) for ref, text in verses]


# --------------------------------------------------------------------------
# Alignment and split
# --------------------------------------------------------------------------

@dataclass
class AlignStats:
    """Counts explaining which verses did not become pairs."""
    src_verses: int = 0
    tgt_verses: int = 0
    aligned: int = 0
    src_empty: int = 0            # reference in both, source text empty
    tgt_empty: int = 0            # reference in both, target text empty
    src_only: int = 0             # reference missing in the target module
    tgt_only: int = 0             # reference missing in the source module
    tgt_only_books: Dict[str, int] = field(default_factory=dict)
    src_only_books: Dict[str, int] = field(default_factory=dict)

    @property
    def dropped(self) -> int:
        return self.src_empty + self.tgt_empty + self.src_only + self.tgt_only


@dataclass
class Pair:
    """One aligned verse: reference, source text, target text."""
    ref: Ref
    src: str
    tgt: str

    @property
    def doc(self) -> str:
        return doc_id(self.ref)


def _count(counter: Dict[str, int], key: str) -> None:
    counter[key] = counter.get(key, 0) + 1


def align(src: Sequence[Tuple[Ref, str]], tgt: Sequence[Tuple[Ref, str]]
          ) -> Tuple[List[Pair], AlignStats]:
    """Pair cleaned verses by reference, in the source's (canonical) order.

    Verses whose reference exists on one side only, or whose text is empty on
    either side, are dropped and counted in the returned stats.
    """
    tgt_by_ref = dict(tgt)
    src_refs = {ref for ref, _ in src}
    stats = AlignStats(src_verses=len(src), tgt_verses=len(tgt))
    pairs = []
    for ref, src_text in src:
        if ref not in tgt_by_ref:
            stats.src_only += 1
            _count(stats.src_only_books, ref[0])
        elif not src_text:
            stats.src_empty += 1
        elif not tgt_by_ref[ref]:
            stats.tgt_empty += 1
        else:
            pairs.append(Pair(ref, src_text, tgt_by_ref[ref]))
    for ref, _ in tgt:
        if ref not in src_refs:
            stats.tgt_only += 1
            _count(stats.tgt_only_books, ref[0])
    stats.aligned = len(pairs)
    return pairs, stats


def chapter_length_mismatch(pairs: Sequence[Pair]) -> Dict[str, float]:
    """Mean absolute log character-length ratio of each chapter's pairs.

    Correctly aligned chapters stay below ~0.21 for this corpus; chapters
    whose verse numbering is shifted by one or more verses score 0.25-0.55.
    """
    totals: Dict[str, List[float]] = {}
    for pair in pairs:
        ratio = abs(math.log(len(pair.src) / len(pair.tgt)))
        totals.setdefault(pair.doc, []).append(ratio)
    return {doc: sum(r) / len(r) for doc, r in totals.items()}


def drop_misaligned_chapters(pairs: Sequence[Pair], max_mismatch: float
                             ) -> Tuple[List[Pair], Dict[str, float]]:
    """Remove whole chapters whose length mismatch exceeds ``max_mismatch``.

    spaRV1909eb follows other chapter/verse divisions than the English text
    in a few chapters (e.g. Jonah 1:17 is Spanish 2:1), so their verses pair
    up shifted; a shifted chapter shows as a large length mismatch. Returns
    the kept pairs and the dropped chapters with their scores.
    """
    scores = chapter_length_mismatch(pairs)
    bad = {doc: round(score, 3) for doc, score in scores.items()
           if score > max_mismatch}
    return [p for p in pairs if p.doc not in bad], bad


def chapter_score(doc: str, seed: int) -> float:
    """Deterministic pseudo-random number in [0, 1) for a chapter id."""
    digest = hashlib.sha256(f"{seed}\t{doc}".encode("utf-8")).hexdigest()
    return int(digest[:15], 16) / 16 ** 15


def assign_splits(docs: Iterable[str], valid_frac: float, test_frac: float,
                  seed: int = 1) -> Dict[str, str]:
    """Map each chapter id to ``train``/``valid``/``test``.

    A chapter's split depends only on its id and the seed (a hash), so it is
    stable across runs and corpus subsets. With at least three chapters,
    valid and test each get at least one (the lowest-scoring train chapter).
    """
    docs = list(dict.fromkeys(docs))
    scores = {doc: chapter_score(doc, seed) for doc in docs}
    splits = {}
    for doc in docs:
        score = scores[doc]
        splits[doc] = ("test" if score < test_frac else
                       "valid" if score < test_frac + valid_frac else "train")
    if len(docs) >= 3:
        for split in ("test", "valid"):
            if split not in splits.values():
                train = [d for d in docs if splits[d] == "train"]
                splits[min(train, key=scores.get)] = split
    return splits


def split_pairs(pairs: Sequence[Pair], splits: Dict[str, str]
                ) -> Dict[str, List[Pair]]:
    """Group pairs by split, keeping their order."""
    out: Dict[str, List[Pair]] = {split: [] for split in SPLITS}
    for pair in pairs:
        out[splits[pair.doc]].append(pair)
    return out


# --------------------------------------------------------------------------
# External tools
# --------------------------------------------------------------------------

log = Log("prepare-bible")


def run_mod2imp(module: str) -> str:
    """Raw OSIS export of a SWORD module; PrepError if unavailable/empty."""
    if shutil.which("mod2imp") is None:
        raise PrepError(f"mod2imp not found: install it with `{INSTALL_HINT}` "
                        "(or run scripts/prepare-bible.sh as root)")
    proc = subprocess.run(["mod2imp", module], capture_output=True)
    text = proc.stdout.decode("utf-8", errors="replace")
    if proc.returncode != 0 or "$$$" not in text:
        raise PrepError(f"`mod2imp {module}` produced no text (exit code "
                        f"{proc.returncode}): install the SWORD module with "
                        f"`{INSTALL_HINT}`")
    return text


# --------------------------------------------------------------------------
# Steps
# --------------------------------------------------------------------------

def step_extract(dest: Path) -> None:
    """Export both modules with mod2imp into DEST/source."""
    tmp = fresh_dir(dest / "source")
    for module in MODULES.values():
        (tmp / f"{module}.imp").write_text(run_mod2imp(module), encoding="utf-8")
    publish_dir(tmp, dest / "source")


def load_verses(dest: Path, lang: str) -> List[Tuple[Ref, str]]:
    """Cleaned verses of one language from the extracted module."""
    text = (dest / "source" / f"{MODULES[lang]}.imp").read_text(encoding="utf-8")
    return [(ref, clean_osis(markup)) for ref, markup in parse_imp(text)]


def step_text(dest: Path, args: argparse.Namespace) -> None:
    """Clean, align, filter, truncate and split; write DEST/raw."""
    src = normalize_chapter_caps(load_verses(dest, SRC_LANG))
    pairs, stats = align(src, load_verses(dest, TGT_LANG))
    pairs, misaligned = drop_misaligned_chapters(pairs, args.max_mismatch)
    if not pairs:
        raise PrepError("no verse pairs could be aligned: check the mod2imp "
                        f"output in {dest / 'source'} and rerun with --force")
    summary = asdict(stats)
    summary.update(
        misaligned_chapters=misaligned,
        misaligned_pairs=stats.aligned - len(pairs),
        dropped=stats.dropped + stats.aligned - len(pairs),
        kept=len(pairs))
    if args.max_verses:
        pairs = pairs[:args.max_verses]
    summary["kept_after_max_verses"] = len(pairs)
    splits = assign_splits([p.doc for p in pairs], args.valid_frac,
                           args.test_frac, args.split_seed)
    tmp = fresh_dir(dest / "raw")
    for split, items in split_pairs(pairs, splits).items():
        write_lines(tmp / f"{split}.{SRC_LANG}", (p.src for p in items))
        write_lines(tmp / f"{split}.{TGT_LANG}", (p.tgt for p in items))
        write_lines(tmp / f"{split}.docids", (p.doc for p in items))
    (tmp / "alignment.json").write_text(json.dumps(summary, indent=2) + "\n",
                                        encoding="utf-8")
    publish_dir(tmp, dest / "raw")


def step_spm(dest: Path, args: argparse.Namespace) -> None:
    """Train a joint sentencepiece model on train and encode all splits."""
    import sentencepiece as spm

    raw, tmp = dest / "raw", fresh_dir(dest / "spm")
    train_text = tmp / "train.joint.txt"
    write_lines(train_text, read_lines(raw / f"train.{SRC_LANG}")
                + read_lines(raw / f"train.{TGT_LANG}"))
    try:
        spm.SentencePieceTrainer.train(
            input=str(train_text), model_prefix=str(tmp / "spm"),
            vocab_size=args.vocab_size, model_type=args.spm_type,
            character_coverage=1.0, hard_vocab_limit=False,
            num_threads=args.workers, input_sentence_size=0,
            shuffle_input_sentence=False, minloglevel=2)
    except RuntimeError as err:   # e.g. --vocab-size too large for bpe
        raise PrepError(f"sentencepiece training failed: {err}") from None
    train_text.unlink()
    model = spm.SentencePieceProcessor(model_file=str(tmp / "spm.model"))
    for split in SPLITS:
        for lang in (SRC_LANG, TGT_LANG):
            pieces = model.encode(read_lines(raw / f"{split}.{lang}"), out_type=str)
            write_lines(tmp / f"{split}.{lang}", (" ".join(p) for p in pieces))
    publish_dir(tmp, dest / "spm")


def step_binarize(dest: Path, args: argparse.Namespace) -> None:
    """fairseq-preprocess into DEST/bin, add docids, verify line counts."""
    tok, tmp = dest / "spm", fresh_dir(dest / "bin")
    cmd = [sys.executable, "-m", "fairseq_cli.preprocess",
           "--source-lang", SRC_LANG, "--target-lang", TGT_LANG,
           "--trainpref", str(tok / "train"), "--validpref", str(tok / "valid"),
           "--testpref", str(tok / "test"), "--destdir", str(tmp),
           "--joined-dictionary", "--workers", str(args.workers)]
    logfile = dest / "binarize.log"
    run_logged(cmd, logfile)
    for split in SPLITS:
        shutil.copyfile(dest / "raw" / f"{split}.docids",
                        tmp / f"{split}.{SRC_LANG}-{TGT_LANG}.docids")
    verify_counts(dest, tmp)
    publish_dir(tmp, dest / "bin")


def binarized_sizes(bin_dir: Path, split: str) -> Dict[str, int]:
    """Number of sentences in each binarized side of one split."""
    sizes = {}
    for lang in (SRC_LANG, TGT_LANG):
        prefix = f"{split}.{SRC_LANG}-{TGT_LANG}.{lang}"
        if not (bin_dir / f"{prefix}.bin").is_file():
            raise PrepError(f"{bin_dir / prefix}.bin is missing; rerun with --force")
        sizes[lang] = idx_length(bin_dir / f"{prefix}.idx")
    return sizes


def verify_counts(dest: Path, bin_dir: Path) -> None:
    """Fail unless raw text, pieces, binarized data and docids all agree."""
    for split in SPLITS:
        counts = {"docids": count_lines(bin_dir / f"{split}.{SRC_LANG}-{TGT_LANG}.docids"),
                  "raw docids": count_lines(dest / "raw" / f"{split}.docids")}
        for lang in (SRC_LANG, TGT_LANG):
            counts[f"raw {lang}"] = count_lines(dest / "raw" / f"{split}.{lang}")
            counts[f"spm {lang}"] = count_lines(dest / "spm" / f"{split}.{lang}")
        for lang, size in binarized_sizes(bin_dir, split).items():
            counts[f"bin {lang}"] = size
        if len(set(counts.values())) != 1:
            raise PrepError(f"line counts disagree for {split}: {counts}; "
                            "rerun with --force")


# --------------------------------------------------------------------------
# Stats and driver
# --------------------------------------------------------------------------

def collect_stats(dest: Path, args: argparse.Namespace, seconds: float) -> dict:
    """Sizes of what was produced (also written to DEST/stats.json)."""
    raw, bin_dir = dest / "raw", dest / "bin"
    stats = {"pairs": {}, "chapters": {}}
    for split in SPLITS:
        docids = read_lines(raw / f"{split}.docids")
        stats["pairs"][split] = len(docids)
        stats["chapters"][split] = len(set(docids))
    dict_lines = count_lines(bin_dir / f"dict.{SRC_LANG}.txt")
    stats.update({
        "spm_vocab_size": count_lines(dest / "spm" / "spm.vocab"),
        "spm_type": args.spm_type,
        "fairseq_dict_size": dict_lines + 4,   # + <s> <pad> </s> <unk>
        "disk_bytes": {"total": dir_size(dest), "bin": dir_size(bin_dir),
                       "raw": dir_size(raw)},
        "alignment": json.loads((raw / "alignment.json").read_text()),
        "max_verses": args.max_verses,
        "seconds_this_run": round(seconds, 1),
    })
    return stats


def print_stats(stats: dict, dest: Path) -> None:
    pairs, chapters = stats["pairs"], stats["chapters"]
    align_stats = stats["alignment"]
    log("done: " + ", ".join(f"{s} {pairs[s]} pairs / {chapters[s]} chapters"
                             for s in SPLITS))
    log(f"aligned {align_stats['aligned']} verse pairs by reference, kept "
        f"{align_stats['kept']}; dropped {align_stats['dropped']} verses: "
        f"{align_stats['tgt_only']} only in {TGT_LANG} (deuterocanon etc.), "
        f"{align_stats['src_only']} only in {SRC_LANG}, "
        f"{align_stats['src_empty']} empty in {SRC_LANG}, "
        f"{align_stats['tgt_empty']} empty in {TGT_LANG}, "
        f"{align_stats['misaligned_pairs']} in "
        f"{len(align_stats['misaligned_chapters'])} chapters with shifted "
        "verse numbering")
    if stats["max_verses"]:
        log(f"--max-verses: used the first {stats['max_verses']} pairs only")
    log(f"sentencepiece {stats['spm_type']} vocab {stats['spm_vocab_size']}, "
        f"fairseq dict {stats['fairseq_dict_size']}; disk "
        f"{stats['disk_bytes']['total'] / 2**20:.1f} MiB "
        f"(bin {stats['disk_bytes']['bin'] / 2**20:.1f} MiB); "
        f"{stats['seconds_this_run']} s")
    log(f"stats in {dest / 'stats.json'}")


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="fairseq-ctx-prepare-bible",
        description="Build a chapter-level es-en corpus from the Reina-Valera "
                    "1909 and World English Bible SWORD modules.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n"
               "  fairseq-ctx-prepare-bible --dest data/bible     # data/bible/{raw,spm,bin}, about a minute\n"
               "(the same as: bash scripts/prepare-bible.sh)")
    parser.add_argument("--dest", type=Path, default=Path("data/bible"),
                        help="output directory (default: data/bible)")
    parser.add_argument("--vocab-size", type=int, default=8000,
                        help="joint sentencepiece vocabulary size (default: 8000)")
    parser.add_argument("--spm-type", choices=("unigram", "bpe"), default="unigram",
                        help="sentencepiece model type (default: unigram)")
    parser.add_argument("--max-verses", type=int, default=0, metavar="N",
                        help="keep only the first N aligned pairs (quick tests)")
    parser.add_argument("--valid-frac", type=float, default=0.0175,
                        help="fraction of chapters for valid (default: 0.0175)")
    parser.add_argument("--test-frac", type=float, default=0.0175,
                        help="fraction of chapters for test (default: 0.0175)")
    parser.add_argument("--max-mismatch", type=float, default=0.23,
                        help="drop chapters whose mean |log(es/en length)| "
                             "exceeds this (shifted verse numbering; default: 0.23)")
    parser.add_argument("--split-seed", type=int, default=1,
                        help="seed of the chapter hash used for the split")
    parser.add_argument("--workers", type=int, default=2,
                        help="worker processes for fairseq-preprocess")
    parser.add_argument("--force", action="store_true",
                        help="redo every step even if finished before")
    args = parser.parse_args(argv)
    if args.vocab_size < 100:
        parser.error("--vocab-size must be at least 100")
    if args.max_verses < 0:
        parser.error("--max-verses must be >= 0")
    if not (0 <= args.valid_frac and 0 <= args.test_frac
            and args.valid_frac + args.test_frac < 1):
        parser.error("--valid-frac and --test-frac must be >= 0 and sum below 1")
    return args


def run_pipeline(args: argparse.Namespace) -> dict:
    """Run (or skip) every step, then collect, print and save the stats."""
    start, dest = time.time(), args.dest
    with no_partial_outputs(dest):
        dest.mkdir(parents=True, exist_ok=True)
        return _run_steps(args, dest, start)


def _run_steps(args: argparse.Namespace, dest: Path, start: float) -> dict:
    markers = Markers(dest)
    if args.force:
        markers.clear()
    settings: dict = {"modules": MODULES, "version": PIPELINE_VERSION}
    steps = [
        ("extract", "source", {}, lambda: step_extract(dest)),
        ("text", "raw", {"max_verses": args.max_verses,
                         "valid_frac": args.valid_frac,
                         "test_frac": args.test_frac,
                         "split_seed": args.split_seed,
                         "max_mismatch": args.max_mismatch},
         lambda: step_text(dest, args)),
        ("spm", "spm", {"vocab_size": args.vocab_size,
                        "spm_type": args.spm_type},
         lambda: step_spm(dest, args)),
        ("binarize", "bin", {}, lambda: step_binarize(dest, args)),
    ]
    markers.run(steps, settings, dest, log)
    verify_counts(dest, dest / "bin")
    stats = collect_stats(dest, args, time.time() - start)
    write_text_atomic(dest / "stats.json", json.dumps(stats, indent=2) + "\n")
    print_stats(stats, dest)
    return stats


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    try:
        run_pipeline(args)
    except (PrepError, OSError) as err:
        print(f"{ERROR_PREFIX}{err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("prepare-bible: interrupted; rerun to resume", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
