"""Text cleaning and SGML: reading and aligning the corpora (pure functions),
and the line processors (Moses normalization and tokenization, subword-nmt,
sentencepiece) that the pipeline maps over every split with a worker pool.

The tokenizer and subword libraries are imported inside ``make_processor``,
so importing this module needs nothing beyond the standard library.
"""
from __future__ import annotations

import itertools
import multiprocessing
import re
from pathlib import Path
from typing import Callable, Iterable, Iterator, List, Optional, Tuple

from .files import PrepError, count_lines, iter_lines, progress_bar

CHUNK = 2000   # lines per work item of the worker pool


# Characters that fairseq (Python's universal newlines) or a line-based tool
# would take as line ends, and other control characters: replaced by spaces
# so that every split keeps one sentence per line on both sides.
_BREAKS_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x85\u2028\u2029]")
_SPACES_RE = re.compile(r"\s+")


def clean_line(line: str) -> str:
    """One sentence: no line breaks or control characters inside, single
    spaces, no leading/trailing space, no byte-order mark."""
    return _SPACES_RE.sub(" ", _BREAKS_RE.sub(" ", line.replace("\ufeff", ""))).strip()


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
    ``("plain",)`` clean_line only; ``("moses", lang, aggressive)`` Moses normalize-punctuation
    (+ remove-non-printing-char) and tokenizer (escaping off; ``aggressive``
    = tokenizer.perl -a); ``("bpe", codes)`` subword-nmt; ``("spm", model)``
    sentencepiece pieces."""
    kind = job[0]
    if kind == "plain":
        return lambda lines: [clean_line(x) for x in lines]
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
    n, total = 0, count_lines(src)
    with open(dst, "w", encoding="utf-8") as out, progress_bar(total, f"{src.parent.name}/{src.name}") as bar:
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
                bar.update(len(lines))
        finally:
            if pool is not None:
                pool.terminate()
    if n != total:
        raise PrepError(f"{dst} has {n} lines, {src} {total}")
    return n


