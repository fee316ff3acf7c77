"""Prepare the papers' translation corpora for fairseq: fetch, verify,
tokenize, learn and apply subwords, clean, binarize.

One module behind ``scripts/prepare-{wmt14-en-de,wmt17-zh-en,wmt16-ro-en,
iwslt,opensubtitles-en-ru}.sh``; also runnable as::

    python3 fairseq_ctx/data/prepare.py DATASET [--dest DIR] [--from DIR | --mirror PREFIX] ...

(run by file path, as ``bible.py``, so that only fairseq-preprocess loads
torch). ``--help`` after a dataset name lists its flags.

Where the raw files come from
-----------------------------
* default: the official URL of every archive (``ARCHIVES`` below, each with
  the page or script it was taken from), downloaded with curl to
  ``DEST/orig/NAME.part``, checked (non-empty; the md5 that sacreBLEU
  publishes for the WMT dev/test archives; the archive opens and holds the
  members needed) and only then renamed to ``DEST/orig/NAME``. A failed
  download stops with one line naming the URL and leaves no ``NAME``.
* ``--mirror PREFIX`` (a URL prefix or a local directory): the same, from
  ``PREFIX/NAME``.
* ``--from DIR``: nothing is downloaded. Every archive is taken from
  ``DIR/NAME``, or its members already unpacked at ``DIR/MEMBER`` (the paths
  inside the archive). ``NAME`` is the archive's file name, except where
  names would collide (IWSLT: the WIT3 path ``2014-01/texts/en/es/en-es.tgz``,
  which may also be found inside the release tarball ``DIR/2014-01.tgz``;
  OPUS: ``OPUS-SETIMES/v2/moses/en-ro.txt.zip``). A missing file stops with one
  line naming what was looked for.

Steps (each skipped when its marker in ``DEST/.done`` holds the same settings;
a step writes ``X.tmp`` and renames it to ``X`` before writing its marker, so
an interrupted step is redone, never taken as finished)::

    text      fetch + unpack (DEST/orig), read the corpora -> DEST/text/{split}.{lang}[, .docids]
    tok       Moses punctuation normalization + tokenization (sacremoses,
              escaping off)                                  -> DEST/tok/
    subword   learn BPE (subword-nmt) / sentencepiece on train, apply to all
              splits                                          -> DEST/subword/
    clean     train pairs filtered by length and length ratio as Moses'
              clean-corpus-n.perl; valid/test kept whole     -> DEST/final/
    binarize  fairseq-preprocess, docids copied beside the data, every line
              count checked                                   -> DEST/bin/

The text-level functions (SGML/XML parsing and alignment, the IWSLT tag
filter, Moses-style cleaning, ``_eos`` groups) are pure and tested in
``tests/test_prepare_scripts.py`` together with every script end to end on
tiny files laid out like the real ones.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

if __package__:
    from . import bible
else:  # run as a file: import the sibling module without loading fairseq_ctx (torch)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bible  # noqa: E402

PrepError = bible.PrepError
Markers = bible.Markers
count_lines, fresh_dir, publish_dir = bible.count_lines, bible.fresh_dir, bible.publish_dir
idx_length = bible.idx_length

SPLITS = ("train", "valid", "test")
# Bump when the output of a step changes, so old markers no longer match.
PIPELINE_VERSION = 1
CHUNK = 2000   # lines per work item of the worker pool

_PROG = "prepare"


def log(msg: str) -> None:
    print(f"[{_PROG}] {msg}", flush=True)


# --------------------------------------------------------------------------
# Raw files: where they come from
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class Archive:
    """A file to fetch. ``name`` is its local name (also its path under
    ``--mirror`` and ``--from``); ``url`` its official address, or None when
    it cannot be downloaded by a script (``manual`` then says how to get it).
    Tar/zip archives are unpacked; any other file is used as it is."""
    name: str
    url: Optional[str]
    md5: Optional[str] = None
    manual: str = ""
    in_release: bool = False   # also found inside the release tarball DIR/<first path part>.tgz

    @property
    def kind(self) -> str:
        if self.name.endswith(".zip"):
            return "zip"
        if self.name.endswith((".tgz", ".tar.gz", ".tar")):
            return "tar"
        return "file"


# A member spec: a path inside an archive; "a|b" names alternatives (the
# first present is used). None: the archive file itself.
Need = Tuple[Archive, Optional[str]]

STATMT = "https://statmt.org"
DATA_STATMT = "https://data.statmt.org"
OPUS = "https://object.pouta.csc.fi"
# md5 sums as published in sacreBLEU's dataset table (sacrebleu 2.6.0,
# sacrebleu/dataset/__init__.py): stable statmt.org test/dev archives.
ARCHIVES = {
    # fairseq examples/translation/prepare-wmt14en2de.sh (URLS)
    "europarl-v7": Archive("training-parallel-europarl-v7.tgz",
                           f"{STATMT}/wmt13/training-parallel-europarl-v7.tgz"),
    "commoncrawl": Archive("training-parallel-commoncrawl.tgz",
                           f"{STATMT}/wmt13/training-parallel-commoncrawl.tgz"),
    # prepare-wmt14en2de.sh --icml17 (WMT14's own news commentary)
    "nc-v9": Archive("training-parallel-nc-v9.tgz", f"{STATMT}/wmt14/training-parallel-nc-v9.tgz"),
    "nc-v12": Archive("training-parallel-nc-v12.tgz",
                      f"{DATA_STATMT}/wmt17/translation-task/training-parallel-nc-v12.tgz"),
    "wmt17-dev": Archive("dev.tgz", f"{DATA_STATMT}/wmt17/translation-task/dev.tgz",
                         "9b1aa63c1cf49dccdd20b962fe313989"),
    "wmt14-test": Archive("test-full.tgz", f"{STATMT}/wmt14/test-full.tgz",
                          "a8cd784e006feb32ac6f3d9ec7eb389a"),
    "wmt17-test": Archive("test.tgz", f"{DATA_STATMT}/wmt17/translation-task/test.tgz",
                          "86a1724c276004aa25455ae2a04cef26"),
    # UN Parallel Corpus v1.0 as distributed by OPUS (moses format); the
    # official release (conferences.unite.un.org/UNCorpus) needs a form.
    "unpc": Archive("OPUS-UNPC/v1.0/moses/en-zh.txt.zip", f"{OPUS}/OPUS-UNPC/v1.0/moses/en-zh.txt.zip"),
    # rsennrich/wmt16-scripts sample/download_files.sh (Europarl + SETimes2)
    "europarl-v7-ro": Archive("ro-en.tgz", "https://www.statmt.org/europarl/v7/ro-en.tgz"),
    "setimes2": Archive("OPUS-SETIMES/v2/moses/en-ro.txt.zip", f"{OPUS}/OPUS-SETIMES/v2/moses/en-ro.txt.zip"),
    "wmt16-dev": Archive("dev.tgz", f"{DATA_STATMT}/wmt16/translation-task/dev.tgz",
                         "4a3dc2760bb077f4308cce96b06e6af6"),
    "wmt16-test": Archive("test.tgz", f"{DATA_STATMT}/wmt16/translation-task/test.tgz",
                          "3d809cd0c2c86adb2c67034d15c4e446"),
    # Voita et al. 2019, github.com/lena-voita/good-translation-wrong-in-context
    # ("Training data"): OpenSubtitles2018 En-Ru, context_aware = groups of 4
    # consecutive sentences joined by " _eos ".
    "voita-opensubs": Archive(
        "acl19_good_translation_wrong_in_context.zip",
        "https://www.dropbox.com/s/5drjpx07541eqst/acl19_good_translation_wrong_in_context.zip?dl=1"),
}

WIT3_HINT = ("WIT3 no longer serves per-pair archives (wit3.fbk.eu/archive/... answers 404): "
             "download the release tarballs {releases} from https://wit3.fbk.eu/{page} "
             "(Google Drive links), put them (or their unpacked trees) in a directory "
             "and pass --from DIR")


def wit3_archive(release: str, src: str, tgt: str, page: str, releases: str) -> Archive:
    """A per-pair WIT3 archive, named by its path in the WIT3 release tree
    (as fairseq's prepare-iwslt14.sh downloaded it from
    https://wit3.fbk.eu/archive/2014-01/texts/de/en/de-en.tgz)."""
    return Archive(f"{release}/texts/{src}/{tgt}/{src}-{tgt}.tgz", None,
                   manual=WIT3_HINT.format(releases=releases, page=page), in_release=True)


STANFORD_ENVI = "https://nlp.stanford.edu/projects/nmt/data/iwslt15.en-vi"


def stanford_envi(fname: str) -> Archive:
    """Luong & Manning's IWSLT'15 En-Vi files (133k train, tst2012, tst2013)."""
    return Archive(f"iwslt15.en-vi/{fname}", f"{STANFORD_ENVI}/{fname}")


def md5sum(path: Path) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _alternatives(member: str) -> List[str]:
    return member.split("|")


def archive_names(path: Path, kind: str) -> List[str]:
    """Member file names of a tar or zip archive; PrepError if unreadable."""
    try:
        if kind == "zip":
            with zipfile.ZipFile(path) as z:
                return [n for n in z.namelist() if not n.endswith("/")]
        with tarfile.open(path, "r:*") as t:
            return [m.name[2:] if m.name.startswith("./") else m.name
                    for m in t.getmembers() if m.isfile()]
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError) as err:
        raise PrepError(f"{path} is not a readable {kind} archive ({err}); "
                        "delete it and rerun") from None


def pick_members(names: Iterable[str], members: Iterable[str], where: str) -> Dict[str, str]:
    """Map each member spec to the first of its alternatives in ``names``."""
    present, chosen = set(names), {}
    for spec in members:
        hit = next((alt for alt in _alternatives(spec) if alt in present), None)
        if hit is None:
            raise PrepError(f"{where} has no {' or '.join(_alternatives(spec))}")
        chosen[spec] = hit
    return chosen


def extract_members(path: Path, kind: str, chosen: Dict[str, str], out: Path) -> None:
    """Write the chosen members of an archive under ``out`` (by their
    member path; nothing else is unpacked, no path leaves ``out``)."""
    wanted = {real: spec for spec, real in chosen.items()}
    if kind == "zip":
        with zipfile.ZipFile(path) as z:
            for real in wanted:
                target = out / real
                target.parent.mkdir(parents=True, exist_ok=True)
                with z.open(real) as fin, open(target, "wb") as fout:
                    shutil.copyfileobj(fin, fout, 1 << 20)
        return
    with tarfile.open(path, "r:*") as t:
        for m in t:
            name = m.name[2:] if m.name.startswith("./") else m.name
            if m.isfile() and name in wanted:
                target = out / name
                target.parent.mkdir(parents=True, exist_ok=True)
                with t.extractfile(m) as fin, open(target, "wb") as fout:
                    shutil.copyfileobj(fin, fout, 1 << 20)


class Fetcher:
    """Finds, downloads, checks and unpacks the raw files (see the module
    docstring for ``--from`` and ``--mirror``)."""

    def __init__(self, dest: Path, from_dir: Optional[Path], mirror: Optional[str],
                 check_md5: bool = True):
        self.orig = dest / "orig"
        self.from_dir = from_dir
        self.mirror = mirror
        self.check_md5 = check_md5

    def fetch(self, needs: Sequence[Need]) -> Dict[Tuple[str, Optional[str]], Path]:
        """Path of every (archive, member) in ``needs``."""
        groups: Dict[str, Tuple[Archive, List[Optional[str]]]] = {}
        for archive, member in needs:
            groups.setdefault(archive.name, (archive, []))[1].append(member)
        paths = {}
        for archive, members in groups.values():
            for member, path in self._fetch_one(archive, members).items():
                paths[(archive.name, member)] = path
        return paths

    def _fetch_one(self, archive: Archive, members: List[Optional[str]]) -> Dict[Optional[str], Path]:
        specs = [m for m in members if m is not None]
        if self.from_dir is not None and specs and archive.kind != "file":
            unpacked = {}
            for spec in specs:
                hit = next((self.from_dir / alt for alt in _alternatives(spec)
                            if (self.from_dir / alt).is_file()), None)
                if hit is None:
                    break
                unpacked[spec] = hit
            else:
                log(f"using the unpacked files of {archive.name} in {self.from_dir}")
                return unpacked
        path = self._archive_path(archive, specs)
        if archive.kind == "file":
            return {None: path}
        out = self.orig / (archive.name + ".d")
        if out.is_dir() and all(any((out / alt).is_file() for alt in _alternatives(s)) for s in specs):
            log(f"{archive.name}: already unpacked, skipping")
        else:
            chosen = pick_members(archive_names(path, archive.kind), specs, str(path))
            log(f"unpacking {len(chosen)} file(s) of {path}")
            tmp = fresh_dir(out)
            extract_members(path, archive.kind, chosen, tmp)
            publish_dir(tmp, out)
        result = {}
        for spec in specs:
            result[spec] = next(out / alt for alt in _alternatives(spec) if (out / alt).is_file())
        return result

    def _archive_path(self, archive: Archive, specs: List[str]) -> Path:
        if self.from_dir is not None:
            candidate = self.from_dir / archive.name
            if candidate.is_file():
                self._verify(candidate, archive, specs)
                return candidate
            release = self.from_dir / (archive.name.split("/", 1)[0] + ".tgz")
            if archive.in_release and release.is_file():
                return self._from_release(release, archive, specs)
            wanted = f"{candidate}"
            if specs and archive.kind != "file":
                more = f" and {len(specs) - 1} more" if len(specs) > 1 else ""
                wanted += (f" (or its unpacked files: {self.from_dir / _alternatives(specs[0])[0]}"
                           f"{more})")
            if archive.in_release:
                wanted += f" (or {release} holding it)"
            raise PrepError(f"missing raw file: {wanted}")
        local = self.orig / archive.name
        if local.is_file():
            log(f"{archive.name}: already downloaded, skipping")
            return local
        if self.mirror is not None:
            url = self.mirror.rstrip("/") + "/" + archive.name
        elif archive.url is None:
            raise PrepError(f"{archive.name} cannot be downloaded automatically: {archive.manual}")
        else:
            url = archive.url
        local.parent.mkdir(parents=True, exist_ok=True)
        part = local.with_name(local.name + ".part")
        try:
            download(url, part)
            self._verify(part, archive, specs, label=url)
        except BaseException:
            part.unlink(missing_ok=True)
            raise
        part.replace(local)
        return local

    def _from_release(self, release: Path, archive: Archive, specs: List[str]) -> Path:
        """Take a per-pair archive out of a WIT3 release tarball (2014-01.tgz)."""
        local = self.orig / archive.name
        if local.is_file():
            log(f"{archive.name}: already taken out of {release}, skipping")
            return local
        chosen = pick_members(archive_names(release, "tar"), [archive.name], str(release))
        log(f"taking {archive.name} out of {release}")
        tmp = fresh_dir(self.orig / (archive.name + ".from-release"))
        extract_members(release, "tar", chosen, tmp)
        self._verify(tmp / archive.name, archive, specs)
        local.parent.mkdir(parents=True, exist_ok=True)
        (tmp / archive.name).replace(local)
        shutil.rmtree(tmp)
        return local

    def _verify(self, path: Path, archive: Archive, specs: List[str],
                label: Optional[str] = None) -> None:
        """Non-empty, the published md5 (if any), the members needed present.
        ``label`` names the file in messages (the URL of a download)."""
        label = label or str(path)
        if path.stat().st_size == 0:
            raise PrepError(f"{label} is empty")
        if archive.md5 and self.check_md5:
            got = md5sum(path)
            if got != archive.md5:
                raise PrepError(f"{label}: md5 {got} differs from {archive.md5} published for "
                                f"{archive.url} (wrong or damaged file; --skip-checksums to "
                                "use it anyway)")
        if archive.kind != "file":
            pick_members(archive_names(path, archive.kind), specs, label)


def download(url: str, target: Path) -> None:
    """Download ``url`` to ``target`` (curl, else urllib); PrepError naming
    the URL on any failure."""
    log(f"downloading {url}")
    if shutil.which("curl"):
        cmd = ["curl", "-fL", "--retry", "3", "--retry-delay", "5", "--connect-timeout", "60",
               "-o", str(target), url]
        cmd.insert(1, "--progress-bar" if sys.stderr.isatty() else "-sS")
        proc = subprocess.run(cmd, stderr=None if sys.stderr.isatty() else subprocess.PIPE,
                              text=True)
        if proc.returncode != 0:
            detail = (proc.stderr or "").strip().splitlines()
            reason = detail[-1] if detail else f"curl exit code {proc.returncode}"
            raise PrepError(f"download failed: {url} ({reason})")
    else:
        try:
            with urllib.request.urlopen(url, timeout=60) as resp, open(target, "wb") as out:
                shutil.copyfileobj(resp, out, 1 << 20)
        except (OSError, ValueError) as err:
            raise PrepError(f"download failed: {url} ({err})") from None
    if not target.is_file() or target.stat().st_size == 0:
        raise PrepError(f"download failed: {url} (nothing received)")


def mirror_prefix(value: str) -> str:
    """``--mirror`` value as a URL prefix (a local directory becomes file://)."""
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", value):
        return value
    return Path(value).resolve().as_uri()


# --------------------------------------------------------------------------
# Text: reading and aligning the corpora (pure functions)
# --------------------------------------------------------------------------

# Characters that fairseq (Python's universal newlines) or a line-based tool
# would take as line ends, and other control characters: replaced by spaces
# so that every split keeps one sentence per line on both sides.
_BREAKS_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x85\u2028\u2029]")
_SPACES_RE = re.compile(r"\s+")


def clean_line(line: str) -> str:
    """One sentence: no line breaks or control characters inside, single
    spaces, no leading/trailing space, no byte-order mark."""
    return _SPACES_RE.sub(" ", _BREAKS_RE.sub(" ", line.replace("\ufeff", ""))).strip()


def iter_lines(path: Path) -> Iterator[str]:
    """Lines of a UTF-8 file split on "\\n" only (as count_lines counts them),
    without the newline; undecodable bytes become U+FFFD."""
    with open(path, encoding="utf-8", errors="replace", newline="\n") as f:
        for line in f:
            yield line[:-1] if line.endswith("\n") else line


def plain_pairs(src: Path, tgt: Path) -> Iterator[Tuple[str, str]]:
    """Sentence pairs of two line-aligned files; PrepError if their line
    counts differ."""
    n = 0
    for n, (s, t) in enumerate(itertools.zip_longest(iter_lines(src), iter_lines(tgt)), 1):
        if s is None or t is None:
            raise PrepError(f"{src} and {tgt} have different line counts "
                            f"({count_lines(src)} and {count_lines(tgt)})")
        yield clean_line(s), clean_line(t)
    if n == 0:
        raise PrepError(f"{src} is empty")


_TAG_RE = re.compile(r"<doc\b([^>]*)>|<seg\b([^>]*)>(.*?)</seg\s*>", re.I | re.S)
_ATTR_RE = re.compile(r"""\b(docid|id)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.I)


def _attr(attrs: str, name: str) -> Optional[str]:
    for m in _ATTR_RE.finditer(attrs):
        if m.group(1).lower() == name:
            return next(g for g in m.groups()[1:] if g is not None)
    return None


def parse_sgml(text: str, where: str = "input") -> List[Tuple[Tuple[str, str], str]]:
    """Segments of a WMT .sgm or IWSLT .xml file: ``((docid, segid), text)``
    in file order. The text is kept as written between the tags (as
    fairseq's recipes and sacreBLEU read it), stripped. PrepError on a
    segment outside a document, a missing id or a repeated (docid, segid)."""
    docid, segs, seen = None, [], set()
    for m in _TAG_RE.finditer(text):
        if m.group(1) is not None:
            docid = _attr(m.group(1), "docid")
            if docid is None:
                raise PrepError(f"{where}: <doc> without docid")
            continue
        segid = _attr(m.group(2), "id")
        if docid is None or segid is None:
            raise PrepError(f"{where}: malformed <seg> near {m.group(0)[:60]!r}")
        key = (docid, segid)
        if key in seen:
            raise PrepError(f"{where}: segment {segid} of document {docid} appears twice")
        seen.add(key)
        segs.append((key, clean_line(m.group(3))))
    if not segs:
        raise PrepError(f"{where} has no <seg> segments")
    return segs


def read_text(path: Path) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def sgml_pairs(src: Path, tgt: Path) -> List[Tuple[str, str, str]]:
    """Aligned ``(src, tgt, docid)`` of two SGML/XML files, matched by
    (docid, segment id), in the source file's order; PrepError naming both
    files if their segments differ."""
    s_segs = parse_sgml(read_text(src), str(src))
    t_segs = dict(parse_sgml(read_text(tgt), str(tgt)))
    s_keys = [k for k, _ in s_segs]
    only_s = [k for k in s_keys if k not in t_segs]
    only_t = set(t_segs) - set(s_keys)
    if only_s or only_t:
        first = (only_s or sorted(only_t))[0]
        raise PrepError(f"{src} and {tgt} do not hold the same segments: {len(only_s)} only in "
                        f"the first, {len(only_t)} only in the second (e.g. document "
                        f"{first[0]} segment {first[1]})")
    return [(text, t_segs[key], key[0]) for key, text in s_segs]


_KEEP_TAG_RE = re.compile(r"^<(title|description)>(.*)</\1>$", re.S)


def iwslt_train_pair(src: str, tgt: str) -> Optional[Tuple[str, str]]:
    """A line pair of WIT3 ``train.tags.*`` files: the sentences; the text
    of ``<title>``/``<description>`` (kept, as fairseq's prepare-iwslt14.sh
    keeps them); None for every other metadata line (url, talkid, keywords,
    speaker, reviewer, translator, doc tags) or a pair where only one side
    is metadata."""
    src, tgt = clean_line(src), clean_line(tgt)
    s_tag, t_tag = src.startswith("<"), tgt.startswith("<")
    if not s_tag and not t_tag:
        return src, tgt
    ms, mt = _KEEP_TAG_RE.match(src), _KEEP_TAG_RE.match(tgt)
    if ms and mt and ms.group(1) == mt.group(1):
        return clean_line(ms.group(2)), clean_line(mt.group(2))
    return None


_MOSES_ESCAPES = (("&#124;", "|"), ("&lt;", "<"), ("&gt;", ">"), ("&apos;", "'"),
                  ("&quot;", '"'), ("&#91;", "["), ("&#93;", "]"), ("&amp;", "&"))


def moses_unescape(text: str) -> str:
    """Undo tokenizer.perl's escaping (as sacremoses' MosesDetokenizer)."""
    for escaped, char in _MOSES_ESCAPES:
        text = text.replace(escaped, char)
    return text


def split_group(line: str) -> List[str]:
    """Sentences of one Voita et al. line (``s1 _eos s2 _eos s3 _eos s4``;
    the separator is the whitespace-delimited token ``_eos``)."""
    parts, current = [], []
    for token in clean_line(line).split(" "):
        if token == "_eos":
            parts.append(" ".join(current))
            current = []
        elif token:
            current.append(token)
    parts.append(" ".join(current))
    return parts


def keep_pair(src: str, tgt: str, min_len: int, max_len: int, ratio: float,
              max_word_len: int = 1000) -> bool:
    """Moses clean-corpus-n.perl's test on one (whitespace-tokenized) pair:
    both sides non-empty, ``min_len <= tokens <= max_len``, neither side more
    than ``ratio`` times longer than the other (``ratio <= 0``: no ratio test),
    no token longer than ``max_word_len`` characters. (Unlike the Perl
    script, '|' is kept: there are no factors here.)"""
    s, t = src.split(), tgt.split()
    if not s or not t:
        return False
    if not (min_len <= len(s) <= max_len and min_len <= len(t) <= max_len):
        return False
    if ratio > 0 and (len(s) / len(t) > ratio or len(t) / len(s) > ratio):
        return False
    return max(map(len, s + t)) <= max_word_len


# --------------------------------------------------------------------------
# Line processors (tokenizer, BPE, sentencepiece), run over a worker pool
# --------------------------------------------------------------------------

_ROMANIAN_CEDILLA = str.maketrans({"Ş": "Ș", "ş": "ș", "Ţ": "Ț", "ţ": "ț"})
_PROCESS: Optional[Callable[[List[str]], List[str]]] = None


def make_processor(job: tuple) -> Callable[[List[str]], List[str]]:
    """A function from a list of lines to processed lines. Jobs:
    ``("plain",)`` clean_line only; ``("unescape",)`` also undo Moses
    escaping; ``("moses", lang, aggressive)`` Moses normalize-punctuation
    (+ remove-non-printing-char) and tokenizer (escaping off; ``aggressive``
    = tokenizer.perl -a); ``("bpe", codes)`` subword-nmt; ``("spm", model)``
    sentencepiece pieces."""
    kind = job[0]
    if kind == "plain":
        return lambda lines: [clean_line(x) for x in lines]
    if kind == "unescape":
        return lambda lines: [clean_line(moses_unescape(x)) for x in lines]
    if kind == "moses":
        from sacremoses import MosesPunctNormalizer, MosesTokenizer
        lang, aggressive = job[1], job[2]
        norm = MosesPunctNormalizer(lang=lang, post_remove_control_chars=True)
        tok = MosesTokenizer(lang=lang)

        def moses(lines):
            out = []
            for line in lines:
                text = norm.normalize(clean_line(line))
                if lang == "ro":   # one spelling of ș/ț (as Sennrich's WMT16 normalise-romanian.py)
                    text = text.translate(_ROMANIAN_CEDILLA)
                out.append(clean_line(tok.tokenize(text, aggressive_dash_splits=aggressive,
                                                   escape=False, return_str=True)))
            return out
        return moses
    if kind == "bpe":
        from subword_nmt.apply_bpe import BPE
        with open(job[1], encoding="utf-8") as f:
            bpe = BPE(f)
        return lambda lines: [bpe.segment(clean_line(x)) for x in lines]
    if kind == "spm":
        import sentencepiece as spm
        model = spm.SentencePieceProcessor(model_file=str(job[1]))
        return lambda lines: [" ".join(p) for p in model.encode([clean_line(x) for x in lines],
                                                                out_type=str)]
    raise ValueError(f"unknown job {job!r}")


def _init_worker(job: tuple) -> None:
    global _PROCESS
    _PROCESS = make_processor(job)


def _run_chunk(lines: List[str]) -> List[str]:
    return _PROCESS(lines)


def _chunks(lines: Iterable[str], size: int = CHUNK) -> Iterator[List[str]]:
    it = iter(lines)
    while True:
        chunk = list(itertools.islice(it, size))
        if not chunk:
            return
        yield chunk


def map_file(src: Path, dst: Path, job: tuple, workers: int) -> int:
    """Process every line of ``src`` into ``dst`` (order kept); returns the
    number of lines, which the caller checks."""
    n = 0
    with open(dst, "w", encoding="utf-8") as out:
        if workers <= 1:
            process = make_processor(job)
            results: Iterable[List[str]] = map(process, _chunks(iter_lines(src)))
            pool = None
        else:
            pool = multiprocessing.get_context("fork").Pool(workers, _init_worker, (job,))
            results = pool.imap(_run_chunk, _chunks(iter_lines(src)))
        try:
            for lines in results:
                for line in lines:
                    if "\n" in line:
                        raise PrepError(f"a processed line of {src} contains a newline")
                    out.write(line + "\n")
                n += len(lines)
        finally:
            if pool is not None:
                pool.terminate()
    if n != count_lines(src):
        raise PrepError(f"{dst} has {n} lines, {src} {count_lines(src)}")
    return n


# --------------------------------------------------------------------------
# Datasets
# --------------------------------------------------------------------------

@dataclass
class Corpus:
    """How one split is read: ``kind`` plain | sgml | iwslt-train | groups |
    unescape; two Needs (source side, target side)."""
    kind: str
    src: Need
    tgt: Need


@dataclass
class Spec:
    name: str
    src: str                                  # binarized as --source-lang
    tgt: str                                  # and --target-lang
    splits: Dict[str, List[Corpus]]           # train/valid/test -> corpora, concatenated
    tok: Dict[str, tuple]                     # lang -> processor job of the tok step
    subword: Dict[str, tuple]                 # "joint" or lang -> ("bpe", merges) | ("spm", vocab, coverage)
    joined_dictionary: bool
    clean_ratio: float
    docids: bool = False                      # write {split}.{src}-{tgt}.docids
    extra_train: List[Tuple[Path, Path]] = field(default_factory=list)
    settings: dict = field(default_factory=dict)


def _need(archive_key_or_archive, member: Optional[str]) -> Need:
    archive = ARCHIVES[archive_key_or_archive] if isinstance(archive_key_or_archive, str) \
        else archive_key_or_archive
    return archive, member


def _pair_corpus(kind: str, archive, src_member: str, tgt_member: str, tgt_archive=None) -> Corpus:
    return Corpus(kind, _need(archive, src_member), _need(tgt_archive or archive, tgt_member))


def spec_wmt14(args) -> Spec:
    """WMT14 En-De (Vaswani et al. 2017; Yang et al. 2019; Weng et al. 2020;
    Ampomah et al. 2021): Europarl v7 + CommonCrawl + News Commentary (v9 =
    WMT14's, default; v12 = fairseq's default recipe), newstest2013 valid
    (plain text of WMT17's dev.tgz), newstest2014 test (test-full: all 3003
    sentences). Same train/valid data for both directions; the direction
    picks the test SGML files and the binarized language order."""
    src, tgt = args.direction.split("-")
    nc = f"nc-{args.news_commentary}"
    train = [
        _pair_corpus("plain", "europarl-v7", f"training/europarl-v7.de-en.{src}",
                     f"training/europarl-v7.de-en.{tgt}"),
        _pair_corpus("plain", "commoncrawl", f"commoncrawl.de-en.{src}", f"commoncrawl.de-en.{tgt}"),
        _pair_corpus("plain", nc, f"training/news-commentary-{args.news_commentary}.de-en.{src}",
                     f"training/news-commentary-{args.news_commentary}.de-en.{tgt}"),
    ]
    return Spec(
        name=f"wmt14-{args.direction}", src=src, tgt=tgt,
        splits={"train": train,
                "valid": [_pair_corpus("plain", "wmt17-dev", f"dev/newstest2013.{src}",
                                       f"dev/newstest2013.{tgt}")],
                "test": [_pair_corpus("sgml", "wmt14-test",
                                      f"test-full/newstest2014-deen-src.{src}.sgm",
                                      f"test-full/newstest2014-deen-ref.{tgt}.sgm")]},
        tok={l: ("moses", l, True) for l in (src, tgt)},
        subword={"joint": ("bpe", args.merges)}, joined_dictionary=True,
        clean_ratio=args.clean_ratio,
        settings={"news_commentary": args.news_commentary})


def spec_wmt16(args) -> Spec:
    """WMT16 Ro-En (Weng et al. 2020): Europarl v7 ro-en + SETimes2 (the
    ~0.6M pairs of the WMT16 task, as Sennrich et al.'s wmt16-scripts),
    newsdev2016 valid, newstest2016 test (GRET's "newstest2015/2016" cannot
    be: WMT15 had no Romanian; both WMT16 sets have 1999 sentences)."""
    src, tgt = args.direction.split("-")
    pair = f"{src}{tgt}"
    train = [
        _pair_corpus("plain", "europarl-v7-ro", f"europarl-v7.ro-en.{src}", f"europarl-v7.ro-en.{tgt}"),
        _pair_corpus("plain", "setimes2", f"SETIMES.en-ro.{src}|SETIMES2.en-ro.{src}",
                     f"SETIMES.en-ro.{tgt}|SETIMES2.en-ro.{tgt}"),
    ]
    return Spec(
        name=f"wmt16-{args.direction}", src=src, tgt=tgt,
        splits={"train": train,
                "valid": [_pair_corpus("sgml", "wmt16-dev", f"dev/newsdev2016-{pair}-src.{src}.sgm",
                                       f"dev/newsdev2016-{pair}-ref.{tgt}.sgm")],
                "test": [_pair_corpus("sgml", "wmt16-test", f"test/newstest2016-{pair}-src.{src}.sgm",
                                      f"test/newstest2016-{pair}-ref.{tgt}.sgm")]},
        tok={l: ("moses", l, True) for l in (src, tgt)},
        subword={"joint": ("bpe", args.merges)}, joined_dictionary=True,
        clean_ratio=args.clean_ratio)


def spec_wmt17(args) -> Spec:
    """WMT17 Zh-En (Yang et al. 2019; Weng et al. 2020): News Commentary v12
    and the UN Parallel Corpus v1.0 (OPUS copy) by default, CWMT or anything
    else with --extra-train (it needs registration); newsdev2017 valid,
    newstest2017 test. English: Moses + subword-nmt BPE. Chinese: no word
    segmenter here (jieba is not a dependency; Moses cannot segment
    Chinese), so a sentencepiece BPE model is learned on the untokenized
    Chinese text and does segmentation and subwords in one step.
    Separate dictionaries (no shared script)."""
    corpora = [c.strip() for c in args.corpora.split(",") if c.strip()]
    train = []
    for c in corpora:
        if c == "nc-v12":
            train.append(_pair_corpus("plain", "nc-v12", "training/news-commentary-v12.zh-en.zh",
                                      "training/news-commentary-v12.zh-en.en"))
        elif c == "un":
            train.append(_pair_corpus("plain", "unpc", "UNPC.en-zh.zh", "UNPC.en-zh.en"))
        else:
            raise PrepError(f"--corpora: unknown corpus {c!r} (choose from nc-v12, un)")
    if not train and not args.extra_train:
        raise PrepError("--corpora is empty and no --extra-train was given")
    return Spec(
        name="wmt17-zh-en", src="zh", tgt="en",
        splits={"train": train,
                "valid": [_pair_corpus("sgml", "wmt17-dev", "dev/newsdev2017-zhen-src.zh.sgm",
                                       "dev/newsdev2017-zhen-ref.en.sgm")],
                "test": [_pair_corpus("sgml", "wmt17-test", "test/newstest2017-zhen-src.zh.sgm",
                                      "test/newstest2017-zhen-ref.en.sgm")]},
        tok={"zh": ("plain",), "en": ("moses", "en", True)},
        subword={"zh": ("spm", args.zh_vocab_size, 0.9995), "en": ("bpe", args.merges)},
        joined_dictionary=False, clean_ratio=args.clean_ratio,
        settings={"corpora": corpora})


# DC paper (Ampomah et al. 2021, Sect. 5.1): sets and shared vocabulary sizes.
IWSLT_PAIRS = {
    "es-en": {"release": "2014", "vocab": 34000,
              "valid": ["tst2010", "tst2011", "tst2012", "dev2010"], "test": ["tst2014"]},
    "ro-en": {"release": "2014", "vocab": 32000,
              "valid": ["tst2010", "tst2011", "tst2012", "dev2010"], "test": ["tst2014"]},
    "fr-en": {"release": "2015", "vocab": 31000, "valid": ["tst2013"], "test": ["tst2014", "tst2015"]},
    "en-vi": {"release": "stanford", "vocab": 21000, "valid": ["tst2012"], "test": ["tst2013"]},
}


def spec_iwslt(args) -> Spec:
    """IWSLT tasks of the DC paper; one prepared pair serves both directions.

    * es-en, ro-en: IWSLT14 (WIT3 release 2014-01, English-to-X archives
      ``texts/en/X/en-X.tgz``): train.tags, valid = tst2010+tst2011+tst2012+
      dev2010, test = tst2014 from the test release 2014-01-test.
    * fr-en: IWSLT15 (2015-01, ``texts/fr/en/fr-en.tgz``): valid = tst2013,
      test = tst2014 + tst2015; tst2015 comes from the test release
      2015-01-test, whose archives hold the source side only: the French
      from ``texts/fr/en/fr-en.tgz``, the English from ``texts/en/fr/en-fr.tgz``,
      matched by talk and segment id.
    * en-vi: the IWSLT15 En-Vi files of Luong & Manning (Stanford; 133k
      train, tst2012 valid, tst2013 test: the DC paper's sizes), already
      Moses-tokenized: only their escaping is undone.
    """
    pair = args.pair
    conf = IWSLT_PAIRS[pair]
    src, tgt = pair.split("-")
    splits: Dict[str, List[Corpus]] = {}
    if conf["release"] == "stanford":
        def files(split):
            return Corpus("plain", (stanford_envi(f"{split}.{src}"), None),
                          (stanford_envi(f"{split}.{tgt}"), None))
        splits = {"train": [files("train")], "valid": [files(s) for s in conf["valid"]],
                  "test": [files(s) for s in conf["test"]]}
        tok = {l: ("unescape",) for l in (src, tgt)}
    else:
        year = conf["release"]
        yy = year[2:]
        if year == "2014":   # English-to-X archives (the only direction WIT3 listed for es, ro)
            a, b = "en", src
        else:
            a, b = src, tgt
        hint = (f"{year}-01.tgz and {year}-01-test.tgz", f"{year}-01 and https://wit3.fbk.eu/{year}-01-b")
        train_arch = wit3_archive(f"{year}-01", a, b, hint[1], hint[0])
        test_arch = wit3_archive(f"{year}-01-test", a, b, hint[1], hint[0])
        d = f"{a}-{b}"

        def xml(arch, name, lang, d=d):
            return (arch, f"{d}/IWSLT{yy}.TED.{name}.{d}.{lang}.xml")

        def sets(names):
            out = []
            for name in names:
                if name == "tst2014" and year == "2014":
                    out.append(Corpus("sgml", xml(test_arch, name, src), xml(test_arch, name, tgt)))
                elif name == "tst2015":
                    rev = wit3_archive(f"{year}-01-test", b, a, hint[1], hint[0])
                    out.append(Corpus("sgml", xml(test_arch, name, src),
                                      xml(rev, name, tgt, d=f"{b}-{a}")))
                else:
                    out.append(Corpus("sgml", xml(train_arch, name, src), xml(train_arch, name, tgt)))
            return out
        splits = {"train": [Corpus("iwslt-train", (train_arch, f"{d}/train.tags.{d}.{src}"),
                                   (train_arch, f"{d}/train.tags.{d}.{tgt}"))],
                  "valid": sets(conf["valid"]), "test": sets(conf["test"])}
        tok = {l: ("moses", l, False) for l in (src, tgt)}
    vocab = args.vocab_size or conf["vocab"]
    return Spec(
        name=f"iwslt-{pair}", src=src, tgt=tgt, splits=splits, tok=tok,
        subword={"joint": ("spm", vocab, 1.0)}, joined_dictionary=True,
        clean_ratio=args.clean_ratio, settings={"pair": pair})


def spec_opensubs(args) -> Spec:
    """OpenSubtitles2018 En-Ru as released by Voita et al. (2019) for
    context-aware NMT: ``context_aware/{en,ru}_{train,dev,test}``, each line a
    group of 4 consecutive sentences joined by ``_eos``. Each group becomes a
    4-line document (one docid per line), so ``--task document_translation``
    gives each sentence the previous sentence(s) of its group. Already
    tokenized: no tokenizer. Joint subword-nmt BPE (one codes file, usable
    with ``fairseq_ctx.contrastive --bpe subword_nmt --bpe-codes``), separate
    dictionaries (Voita et al.: source and target vocabularies)."""
    arch = "voita-opensubs"

    def member(lang, split):
        return (f"data_to_publish/context_aware/{lang}_{split}|context_aware/{lang}_{split}")
    splits = {split: [_pair_corpus("groups", arch, member("en", name), member("ru", name))]
              for split, name in (("train", "train"), ("valid", "dev"), ("test", "test"))}
    return Spec(
        name="opensubtitles-en-ru", src="en", tgt="ru", splits=splits,
        tok={"en": ("plain",), "ru": ("plain",)},
        subword={"joint": ("bpe", args.merges)}, joined_dictionary=False,
        clean_ratio=args.clean_ratio, docids=True)


DATASETS = {
    "wmt14-en-de": spec_wmt14,
    "wmt16-ro-en": spec_wmt16,
    "wmt17-zh-en": spec_wmt17,
    "iwslt": spec_iwslt,
    "opensubtitles-en-ru": spec_opensubs,
}


# --------------------------------------------------------------------------
# Steps
# --------------------------------------------------------------------------

def _corpus_pairs(corpus: Corpus, paths) -> Iterator[Tuple[str, str, Optional[str]]]:
    """(src, tgt, docid or None) of one corpus."""
    s = paths[(corpus.src[0].name, corpus.src[1])]
    t = paths[(corpus.tgt[0].name, corpus.tgt[1])]
    if corpus.kind == "plain":
        for a, b in plain_pairs(s, t):
            yield a, b, None
    elif corpus.kind == "sgml":
        yield from sgml_pairs(s, t)
    elif corpus.kind == "iwslt-train":
        for a, b in plain_pairs(s, t):
            pair = iwslt_train_pair(a, b)
            if pair is not None:
                yield pair[0], pair[1], None
    elif corpus.kind == "groups":
        for n, (a, b) in enumerate(plain_pairs(s, t), 1):
            sa, sb = split_group(a), split_group(b)
            if len(sa) != len(sb):
                raise PrepError(f"line {n}: {s} has {len(sa)} sentences, {t} {len(sb)}")
            for x, y in zip(sa, sb):
                yield x, y, str(n)
    else:
        raise ValueError(corpus.kind)


def step_text(dest: Path, spec: Spec, fetcher: Fetcher) -> dict:
    needs = [n for corpora in spec.splits.values() for c in corpora for n in (c.src, c.tgt)]
    paths = fetcher.fetch(needs)
    tmp, counts = fresh_dir(dest / "text"), {}
    for split, corpora in spec.splits.items():
        sources = list(corpora)
        n = 0
        with open(tmp / f"{split}.{spec.src}", "w", encoding="utf-8") as fs, \
                open(tmp / f"{split}.{spec.tgt}", "w", encoding="utf-8") as ft, \
                open(tmp / f"{split}.docids" if spec.docids else os.devnull, "w",
                     encoding="utf-8") as fd:
            streams = [_corpus_pairs(c, paths) for c in sources]
            if split == "train":
                streams += [((a, b, None) for a, b in plain_pairs(ps, pt))
                            for ps, pt in spec.extra_train]
            for i, stream in enumerate(streams):
                for a, b, doc in stream:
                    fs.write(a + "\n")
                    ft.write(b + "\n")
                    fd.write(f"{split}-{i}-{doc}\n")
                    n += 1
        if n == 0:
            raise PrepError(f"no {split} sentence pairs were read")
        counts[split] = n
        log(f"text: {split} {n} sentence pairs")
    publish_dir(tmp, dest / "text")
    return counts


def step_tok(dest: Path, spec: Spec, workers: int) -> None:
    tmp = fresh_dir(dest / "tok")
    for split in SPLITS:
        for lang in (spec.src, spec.tgt):
            map_file(dest / "text" / f"{split}.{lang}", tmp / f"{split}.{lang}", spec.tok[lang], workers)
    publish_dir(tmp, dest / "tok")


def _learn(kind: tuple, inputs: List[Path], prefix: Path, workers: int) -> tuple:
    """Learn one subword model on the concatenation of ``inputs``; returns
    the processor job that applies it."""
    joint = prefix.with_name(prefix.name + ".input")
    with open(joint, "w", encoding="utf-8") as out:
        for path in inputs:
            for line in iter_lines(path):
                out.write(line + "\n")
    if kind[0] == "bpe":
        from subword_nmt.learn_bpe import learn_bpe
        codes = prefix.with_name(prefix.name + ".codes")
        with open(joint, encoding="utf-8") as fin, open(codes, "w", encoding="utf-8") as fout:
            learn_bpe(fin, fout, kind[1], num_workers=workers)
        joint.unlink()
        return ("bpe", str(codes))
    import sentencepiece as spm
    try:
        spm.SentencePieceTrainer.train(
            input=str(joint), model_prefix=str(prefix), vocab_size=kind[1], model_type="bpe",
            character_coverage=kind[2], hard_vocab_limit=False, num_threads=max(1, workers),
            input_sentence_size=10_000_000, shuffle_input_sentence=True, minloglevel=2)
    except RuntimeError as err:
        raise PrepError(f"sentencepiece training failed: {err}") from None
    joint.unlink()
    return ("spm", str(prefix) + ".model")


def step_subword(dest: Path, spec: Spec, workers: int) -> None:
    tok, tmp = dest / "tok", fresh_dir(dest / "subword")
    jobs = {}
    if "joint" in spec.subword:
        job = _learn(spec.subword["joint"], [tok / f"train.{spec.src}", tok / f"train.{spec.tgt}"],
                     tmp / "joint", workers)
        jobs = {spec.src: job, spec.tgt: job}
    else:
        for lang in (spec.src, spec.tgt):
            jobs[lang] = _learn(spec.subword[lang], [tok / f"train.{lang}"], tmp / lang, workers)
    final = dest / "subword"
    for split in SPLITS:
        for lang, job in jobs.items():
            map_file(tok / f"{split}.{lang}", tmp / f"{split}.{lang}", job, workers)
    publish_dir(tmp, final)
    log("subword: model(s) in " + ", ".join(sorted(p.name for p in final.iterdir()
                                                  if p.suffix in (".codes", ".model"))))


def step_clean(dest: Path, spec: Spec, args) -> dict:
    """Filter train pairs (whole documents for docid data, so that every
    kept sentence keeps its context); valid/test unchanged."""
    sub, text, tmp = dest / "subword", dest / "text", fresh_dir(dest / "final")
    for split in ("valid", "test"):
        for lang in (spec.src, spec.tgt):
            shutil.copyfile(sub / f"{split}.{lang}", tmp / f"{split}.{lang}")
        if spec.docids:
            shutil.copyfile(text / f"{split}.docids", tmp / f"{split}.docids")
    rows = zip(iter_lines(sub / f"train.{spec.src}"), iter_lines(sub / f"train.{spec.tgt}"),
               iter_lines(text / "train.docids") if spec.docids else itertools.count())
    # a unit is kept or dropped whole: a document, or a single pair
    units = (list(g) for _, g in itertools.groupby(rows, key=lambda row: row[2]))
    kept = total = 0
    with open(tmp / f"train.{spec.src}", "w", encoding="utf-8") as fs, \
            open(tmp / f"train.{spec.tgt}", "w", encoding="utf-8") as ft, \
            open(tmp / "train.docids" if spec.docids else os.devnull, "w", encoding="utf-8") as fd:
        for unit in units:
            total += len(unit)
            if all(keep_pair(s, t, args.min_len, args.max_len, spec.clean_ratio) for s, t, _ in unit):
                kept += len(unit)
                for s, t, d in unit:
                    fs.write(s + "\n")
                    ft.write(t + "\n")
                    fd.write(f"{d}\n")
    if kept == 0:
        raise PrepError(f"cleaning kept no training pair of {total} (check --min-len, "
                        "--max-len, --clean-ratio)")
    publish_dir(tmp, dest / "final")
    log(f"clean: kept {kept} of {total} training pairs")
    return {"train_before_clean": total, "train": kept}


def bin_prefix(bin_dir: Path, spec: Spec, split: str, lang: str) -> Path:
    return bin_dir / f"{split}.{spec.src}-{spec.tgt}.{lang}"


def verify_counts(dest: Path, spec: Spec) -> Dict[str, int]:
    """Every split: same number of lines in both final sides, the binarized
    data and the docids file (if any). Returns the counts."""
    counts = {}
    for split in SPLITS:
        seen = {}
        for lang in (spec.src, spec.tgt):
            seen[f"final {lang}"] = count_lines(dest / "final" / f"{split}.{lang}")
            idx = Path(str(bin_prefix(dest / "bin", spec, split, lang)) + ".idx")
            if not idx.is_file():
                raise PrepError(f"{idx} is missing; rerun with --force")
            seen[f"bin {lang}"] = idx_length(idx)
        if spec.docids:
            seen["docids"] = count_lines(dest / "bin" / f"{split}.{spec.src}-{spec.tgt}.docids")
        if len(set(seen.values())) != 1:
            raise PrepError(f"line counts disagree for {split}: {seen}; rerun with --force")
        counts[split] = seen[f"final {spec.src}"]
    return counts


def step_binarize(dest: Path, spec: Spec, workers: int) -> None:
    final, tmp = dest / "final", fresh_dir(dest / "bin")
    cmd = [sys.executable, "-m", "fairseq_cli.preprocess",
           "--source-lang", spec.src, "--target-lang", spec.tgt,
           "--trainpref", str(final / "train"), "--validpref", str(final / "valid"),
           "--testpref", str(final / "test"), "--destdir", str(tmp), "--workers", str(max(1, workers))]
    if spec.joined_dictionary:
        cmd.append("--joined-dictionary")
    bible.run_logged(cmd, dest / "binarize.log")
    if spec.docids:
        for split in SPLITS:
            shutil.copyfile(final / f"{split}.docids", tmp / f"{split}.{spec.src}-{spec.tgt}.docids")
    publish_dir(tmp, dest / "bin")
    verify_counts(dest, spec)


# --------------------------------------------------------------------------
# Command line and driver
# --------------------------------------------------------------------------

def _add_common(p: argparse.ArgumentParser, dest: str, merges: Optional[int] = 32000,
                clean_ratio: float = 1.5) -> None:
    p.add_argument("--dest", type=Path, default=None,
                   help=f"output directory (default: {dest})")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--from", dest="from_dir", type=Path, metavar="DIR",
                     help="take the raw files from DIR (archives under their names, or "
                          "their unpacked contents); download nothing")
    src.add_argument("--mirror", metavar="PREFIX",
                     help="download PREFIX/NAME instead of the official URLs (a URL prefix "
                          "or a local directory)")
    if merges is not None:
        p.add_argument("--merges", type=int, default=merges,
                       help=f"subword-nmt BPE merge operations (default: {merges})")
    p.add_argument("--clean-ratio", type=float, default=clean_ratio,
                   help="drop training pairs where one side has more than this many times "
                        f"the tokens of the other, after subwords; 0: off (default: {clean_ratio})")
    p.add_argument("--min-len", type=int, default=1, help="drop shorter training pairs (tokens)")
    p.add_argument("--max-len", type=int, default=250, help="drop longer training pairs (tokens)")
    p.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1),
                   help="processes for tokenization, subwords and fairseq-preprocess")
    p.add_argument("--skip-checksums", action="store_true",
                   help="do not compare archives with their published md5 sums")
    p.add_argument("--force", action="store_true", help="redo every step (downloads are kept)")


def _extra_train(p: argparse.ArgumentParser) -> None:
    p.add_argument("--extra-train", action="append", default=[], metavar="PREFIX",
                   help="add the raw parallel files PREFIX.SRC / PREFIX.TGT to train (repeatable)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="prepare", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="dataset", required=True, metavar="DATASET")
    p = sub.add_parser("wmt14-en-de", prog="prepare-wmt14-en-de", help="WMT14 English-German (either direction)")
    _add_common(p, "data/wmt14-en-de (data/wmt14-de-en with --direction de-en)")
    p.add_argument("--direction", choices=("en-de", "de-en"), default="en-de")
    p.add_argument("--news-commentary", choices=("v9", "v12"), default="v9",
                   help="News Commentary release: v9 (WMT14's, default) or v12 (fairseq's recipe)")
    _extra_train(p)
    p = sub.add_parser("wmt16-ro-en", prog="prepare-wmt16-ro-en", help="WMT16 Romanian-English")
    _add_common(p, "data/wmt16-ro-en")
    p.add_argument("--direction", choices=("ro-en", "en-ro"), default="ro-en")
    _extra_train(p)
    p = sub.add_parser("wmt17-zh-en", prog="prepare-wmt17-zh-en", help="WMT17 Chinese-English")
    _add_common(p, "data/wmt17-zh-en")
    p.add_argument("--corpora", default="nc-v12,un",
                   help="comma-separated training corpora: nc-v12, un (default: nc-v12,un)")
    p.add_argument("--zh-vocab-size", type=int, default=32000,
                   help="sentencepiece BPE vocabulary of the Chinese side (default: 32000)")
    _extra_train(p)
    p = sub.add_parser("iwslt", prog="prepare-iwslt", help="IWSLT14 es-en/ro-en, IWSLT15 fr-en/en-vi")
    _add_common(p, "data/iwslt-PAIR", merges=None)
    p.add_argument("--pair", choices=sorted(IWSLT_PAIRS), required=True)
    p.add_argument("--vocab-size", type=int, default=0,
                   help="joint sentencepiece BPE vocabulary (default: the DC paper's: "
                        + ", ".join(f"{k} {v['vocab']}" for k, v in IWSLT_PAIRS.items()) + ")")
    _extra_train(p)
    p = sub.add_parser("opensubtitles-en-ru", prog="prepare-opensubtitles-en-ru", help="OpenSubtitles2018 En-Ru (Voita et al.)")
    _add_common(p, "data/opensubtitles-en-ru", clean_ratio=0.0)
    return parser


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    for flag in ("merges", "vocab_size", "zh_vocab_size"):
        if getattr(args, flag, 1) is not None and getattr(args, flag, 1) < 0:
            parser.error(f"--{flag.replace('_', '-')} must be >= 0")
    if args.min_len < 1 or args.max_len < args.min_len:
        parser.error("need 1 <= --min-len <= --max-len")
    if args.workers < 1:
        parser.error("--workers must be >= 1")
    return args


def make_spec(args: argparse.Namespace) -> Spec:
    spec = DATASETS[args.dataset](args)
    extra = getattr(args, "extra_train", [])
    for prefix in extra:
        pair = (Path(f"{prefix}.{spec.src}"), Path(f"{prefix}.{spec.tgt}"))
        for path in pair:
            if not path.is_file():
                raise PrepError(f"missing raw file: {path} (--extra-train {prefix})")
        spec.extra_train.append(pair)
    return spec


def run_pipeline(args: argparse.Namespace) -> dict:
    global _PROG
    start = time.time()
    spec = make_spec(args)
    _PROG = "prepare-" + spec.name
    dest = args.dest or Path("data") / spec.name
    dest.mkdir(parents=True, exist_ok=True)
    fetcher = Fetcher(dest, args.from_dir.resolve() if args.from_dir else None,
                      mirror_prefix(args.mirror) if args.mirror else None,
                      check_md5=not args.skip_checksums)
    markers = Markers(dest)
    if args.force:
        markers.clear()
    stats_path = dest / "stats.json"
    try:
        stats = json.loads(stats_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        stats = {}
    settings: dict = {"dataset": spec.name, "version": PIPELINE_VERSION, **spec.settings,
                      "extra_train": [str(p) for p, _ in spec.extra_train]}
    steps = [
        ("text", "text", {}, lambda: stats.update(text=step_text(dest, spec, fetcher))),
        ("tok", "tok", {"tok": {k: list(v) for k, v in spec.tok.items()}},
         lambda: step_tok(dest, spec, args.workers)),
        ("subword", "subword", {"subword": {k: list(v) for k, v in spec.subword.items()}},
         lambda: step_subword(dest, spec, args.workers)),
        ("clean", "final", {"min_len": args.min_len, "max_len": args.max_len,
                            "clean_ratio": spec.clean_ratio},
         lambda: stats.update(clean=step_clean(dest, spec, args))),
        ("binarize", "bin", {"joined_dictionary": spec.joined_dictionary},
         lambda: step_binarize(dest, spec, args.workers)),
    ]
    markers.run(steps, settings, dest, log)
    stats["final"] = verify_counts(dest, spec)
    stats["languages"] = [spec.src, spec.tgt]
    tmp = stats_path.with_name("stats.json.tmp")
    tmp.write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
    tmp.replace(stats_path)
    log("done: " + ", ".join(f"{s} {n} pairs" for s, n in stats["final"].items())
        + f" in {dest / 'bin'} ({time.time() - start:.0f} s)")
    return stats


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    try:
        run_pipeline(args)
    except (PrepError, OSError) as err:
        print(f"{_PROG if _PROG != 'prepare' else 'prepare-' + args.dataset}: error: {err}",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{_PROG}: interrupted; rerun to resume", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
