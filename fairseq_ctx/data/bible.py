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

Usage (from the repository root; ``scripts/prepare-bible.sh`` also installs
the Debian packages)::

    python3 -m fairseq_ctx.data.bible --dest data/bible --vocab-size 8000

The parsing, cleaning, alignment and split functions are pure and unit-tested
in ``tests/test_bible.py``.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

SRC_LANG, TGT_LANG = "es", "en"
MODULES = {SRC_LANG: "spaRV1909eb", TGT_LANG: "engWEB2015eb"}
APT_PACKAGES = ("sword-text-sparv", "sword-text-web", "libsword-utils")
SPLITS = ("train", "valid", "test")
INSTALL_HINT = "apt-get install " + " ".join(APT_PACKAGES)

# A verse reference: (book, chapter, verse), e.g. ("Genesis", 1, 1).
Ref = Tuple[str, int, int]


class PrepError(Exception):
    """A problem the user can fix; reported as one line, without traceback."""


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
# Elements whose *content* is not translation text.
_DROP_RE = re.compile(
    r"<(note|speaker)\b[^>]*/>|<(note|speaker)\b[^>]*>.*?</\2>", re.S)
_BOOK_END_RE = re.compile(r'<div\b[^>]*\beID="[^"]*"[^>]*\btype="book"[^>]*/>')
_TITLE_RE = re.compile(r"<title\b([^>]*)>(.*?)</title>", re.S)
_TAG_RE = re.compile(r"</?([A-Za-z][\w:.-]*)\b[^>]*>")
# Inline wrappers that sit inside running text: removed without a break.
_INLINE_TAGS = frozenset({
    "w", "transChange", "q", "name", "seg", "hi", "foreign", "divineName",
    "rdg", "abbr", "reference", "catchWord", "index", "a"})
# Punctuation that attaches to the word before / after it.
_CLOSING = set(".,;:!?)]}»”’…")
_OPENING = set("([{«“‘¿¡")
_BREAK_RUN_RE = re.compile(r"[\s" + _BREAK + r"]*" + _BREAK + r"[\s" + _BREAK + r"]*")


def _title(match: re.Match) -> str:
    """Keep canonical titles (psalm superscriptions), drop section headings."""
    if 'canonical="true"' in match.group(1):
        return _BREAK + match.group(2) + _BREAK
    return _BREAK


def _tag(match: re.Match) -> str:
    """Inline wrappers vanish; structural tags (div, l, lb, ...) may break."""
    return "" if match.group(1) in _INLINE_TAGS else _BREAK


def _resolve_breaks(text: str) -> str:
    """Turn each run of break markers (and whitespace) into one space or none.

    A run that contains real whitespace becomes one space. A run of markers
    only becomes a space unless it touches the start/end of the text, is
    followed by closing punctuation (``God<note/>.``) or preceded by opening
    punctuation (``“<note/>Come``), in which case it disappears.
    """
    def replace(match: re.Match) -> str:
        run, start, end = match.group(0), match.start(), match.end()
        if run.strip(_BREAK):          # contains whitespace
            return " "
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
    text = _TAG_RE.sub(_tag, text)
    text = _resolve_breaks(text.replace("\xa0", " "))
    text = html.unescape(text)
    return re.sub(r"\s+", " ", text).strip()


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
# Files, markers and external tools
# --------------------------------------------------------------------------

def read_lines(path: Path) -> List[str]:
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def write_lines(path: Path, lines: Iterable[str]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")


def count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def fresh_dir(path: Path) -> Path:
    """Empty temporary sibling of ``path``; publish it with publish_dir()."""
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def publish_dir(tmp: Path, path: Path) -> None:
    """Replace ``path`` by the finished temporary directory ``tmp``."""
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)


class Markers:
    """Step-completion markers in ``DEST/.done``.

    A marker holds the settings the step ran with (including those of the
    steps before it), so changing e.g. ``--vocab-size`` redoes the steps
    that depend on it. It is written only after the step's outputs are in
    place, so an interrupted step is never taken as finished.
    """

    def __init__(self, dest: Path):
        self.dir = dest / ".done"

    def done(self, step: str, settings: dict) -> bool:
        path = self.dir / step
        try:
            return json.loads(path.read_text(encoding="utf-8")) == settings
        except (OSError, ValueError):
            return False

    def mark(self, step: str, settings: dict) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / (step + ".tmp")
        tmp.write_text(json.dumps(settings, sort_keys=True), encoding="utf-8")
        tmp.replace(self.dir / step)

    def clear(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def log(msg: str) -> None:
    print(f"[prepare-bible] {msg}", flush=True)


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


def run_logged(cmd: List[str], logfile: Path) -> None:
    """Run a command with its output in ``logfile``; PrepError on failure."""
    with open(logfile, "w", encoding="utf-8") as f:
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise PrepError(f"`{' '.join(cmd[:3])} ...` failed with exit code "
                        f"{proc.returncode}; see {logfile}")


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


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
    """Clean, align, truncate and split; write DEST/raw and alignment stats."""
    pairs, stats = align(load_verses(dest, SRC_LANG), load_verses(dest, TGT_LANG))
    if not pairs:
        raise PrepError("no verse pairs could be aligned: check the mod2imp "
                        f"output in {dest / 'source'} and rerun with --force")
    if args.max_verses:
        pairs = pairs[:args.max_verses]
    splits = assign_splits([p.doc for p in pairs], args.valid_frac,
                           args.test_frac, args.split_seed)
    tmp = fresh_dir(dest / "raw")
    for split, items in split_pairs(pairs, splits).items():
        write_lines(tmp / f"{split}.{SRC_LANG}", (p.src for p in items))
        write_lines(tmp / f"{split}.{TGT_LANG}", (p.tgt for p in items))
        write_lines(tmp / f"{split}.docids", (p.doc for p in items))
    summary = asdict(stats)
    summary["dropped"] = stats.dropped
    summary["kept_after_max_verses"] = len(pairs)
    (tmp / "alignment.json").write_text(json.dumps(summary, indent=2),
                                        encoding="utf-8")
    publish_dir(tmp, dest / "raw")


def step_spm(dest: Path, args: argparse.Namespace) -> None:
    """Train a joint sentencepiece model on train and encode all splits."""
    import sentencepiece as spm

    raw, tmp = dest / "raw", fresh_dir(dest / "spm")
    train_text = tmp / "train.joint.txt"
    write_lines(train_text, read_lines(raw / f"train.{SRC_LANG}")
                + read_lines(raw / f"train.{TGT_LANG}"))
    trainer_log = tmp / "train.log"
    # sentencepiece logs to stderr from C++; keep it out of the console.
    saved_stderr = os.dup(2)
    try:
        with open(trainer_log, "w") as f:
            os.dup2(f.fileno(), 2)
            spm.SentencePieceTrainer.train(
                input=str(train_text), model_prefix=str(tmp / "spm"),
                vocab_size=args.vocab_size, model_type=args.spm_type,
                character_coverage=1.0, hard_vocab_limit=False,
                num_threads=args.workers, input_sentence_size=0,
                shuffle_input_sentence=False)
    except RuntimeError as err:
        raise PrepError(f"sentencepiece training failed ({err}); "
                        f"see {trainer_log}") from None
    finally:
        os.dup2(saved_stderr, 2)
        os.close(saved_stderr)
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
    logfile = dest / "preprocess.log"
    run_logged(cmd, logfile)
    for split in SPLITS:
        shutil.copyfile(dest / "raw" / f"{split}.docids",
                        tmp / f"{split}.{SRC_LANG}-{TGT_LANG}.docids")
    verify_counts(dest, tmp)
    publish_dir(tmp, dest / "bin")


def binarized_sizes(bin_dir: Path, split: str) -> Dict[str, int]:
    """Number of sentences in each binarized side of one split."""
    from fairseq.data import data_utils

    sizes = {}
    for lang in (SRC_LANG, TGT_LANG):
        prefix = bin_dir / f"{split}.{SRC_LANG}-{TGT_LANG}.{lang}"
        dataset = data_utils.load_indexed_dataset(str(prefix), None)
        if dataset is None:
            raise PrepError(f"binarized data {prefix}.bin/.idx is missing; "
                            "rerun with --force")
        sizes[lang] = len(dataset)
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
    log(f"aligned {align_stats['aligned']} verse pairs, dropped "
        f"{align_stats['dropped']} (only in {SRC_LANG}: {align_stats['src_only']}, "
        f"only in {TGT_LANG}: {align_stats['tgt_only']}, empty {SRC_LANG}: "
        f"{align_stats['src_empty']}, empty {TGT_LANG}: {align_stats['tgt_empty']})")
    log(f"sentencepiece {stats['spm_type']} vocab {stats['spm_vocab_size']}, "
        f"fairseq dict {stats['fairseq_dict_size']}; disk "
        f"{stats['disk_bytes']['total'] / 2**20:.1f} MiB "
        f"(bin {stats['disk_bytes']['bin'] / 2**20:.1f} MiB); "
        f"{stats['seconds_this_run']} s")
    log(f"stats in {dest / 'stats.json'}")


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="prepare-bible",
        description="Build a chapter-level es-en corpus from the Reina-Valera "
                    "1909 and World English Bible SWORD modules.")
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
    dest.mkdir(parents=True, exist_ok=True)
    markers = Markers(dest)
    if args.force:
        markers.clear()
    settings: dict = {"modules": MODULES}
    steps = [
        ("extract", {}, lambda: step_extract(dest)),
        ("text", {"max_verses": args.max_verses, "valid_frac": args.valid_frac,
                  "test_frac": args.test_frac, "split_seed": args.split_seed},
         lambda: step_text(dest, args)),
        ("spm", {"vocab_size": args.vocab_size, "spm_type": args.spm_type},
         lambda: step_spm(dest, args)),
        ("binarize", {}, lambda: step_binarize(dest, args)),
    ]
    for name, step_settings, action in steps:
        settings = {**settings, **step_settings}
        if markers.done(name, settings):
            log(f"{name}: already done, skipping")
            continue
        log(f"{name}: running")
        action()
        markers.mark(name, settings)
    verify_counts(dest, dest / "bin")
    stats = collect_stats(dest, args, time.time() - start)
    (dest / "stats.json").write_text(json.dumps(stats, indent=2) + "\n",
                                     encoding="utf-8")
    print_stats(stats, dest)
    return stats


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    try:
        run_pipeline(args)
    except PrepError as err:
        print(f"prepare-bible: error: {err}", file=sys.stderr)
        return 1
    except OSError as err:
        print(f"prepare-bible: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("prepare-bible: interrupted; rerun to resume", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
