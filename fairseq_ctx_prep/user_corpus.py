"""Your own document-aligned corpus -> binarized data with ``.docids``
(``fairseq-ctx-prepare-corpus``, ``python3 -m fairseq_ctx_prep.user_corpus``,
``scripts/prepare-corpus.sh``; docs/data-preparation.md, "Your own corpus").

Input: for each of train, valid and test a PREFIX with the line-aligned files
``PREFIX.SRC`` and ``PREFIX.TGT`` (one sentence a line) in one of three
layouts (``--format``):

* ``tsv``: every line is ``DOCID<TAB>sentence``, on both sides, with the same
  id on line *i* of both files;
* ``docids``: plain sentences, and a third file ``PREFIX.docids`` with one
  document id a line (the layout the prepare scripts write in ``text/``);
* ``blank``: plain sentences, documents separated by blank lines, at the same
  lines on both sides.

A document is a run of consecutive lines with one id (as ``--task
document_translation`` reads them): an id that comes back after another
document stops the run. Malformed input stops with one line naming the file
and line, e.g. ``train.de line 7: no document id (expected DOCID<TAB>sentence)``.

Then the steps every prepared corpus goes through (``fairseq_ctx_prep.pipeline``):
optional Moses tokenization (sacremoses), sentencepiece (BPE model, as the
IWSLT and OpenSubtitles recipes) or subword-nmt BPE (as the WMT recipes)
learned on train, optional cleaning of train (whole documents are kept or
dropped, so every kept sentence keeps its context), ``fairseq-preprocess``
and the docids beside the binarized data::

    DEST/text/     {split}.{src,tgt,docids}   the documents as read
    DEST/tok/      tokenized (copies with --tokenizer none)
    DEST/subword/  subword units, and the model (joint.model / joint.codes ...)
    DEST/final/    train cleaned, valid/test whole
    DEST/bin/      fairseq-preprocess output + {split}.{src}-{tgt}.docids

Re-running skips the finished steps whose inputs and settings are unchanged.
"""
from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from .files import (ERROR_PREFIX, SPLITS, PrepError, count_lines, fresh_dir, iter_lines, no_partial_outputs,
                    progress_bar, publish_dir)
from .pipeline import Spec, log, run_steps
from .text import clean_line

PROG = "fairseq-ctx-prepare-corpus"
FORMATS = ("tsv", "docids", "blank")


# --------------------------------------------------------------------------
# Reading the documents
# --------------------------------------------------------------------------

def _aligned(paths: Sequence[Path]) -> Iterator[Tuple[int, List[str]]]:
    """``(line number, [line of each file])``; PrepError naming the shorter
    file when the files do not have the same number of lines."""
    n = 0
    for n, row in enumerate(itertools.zip_longest(*(iter_lines(p) for p in paths)), 1):
        if None in row:
            short = paths[row.index(None)]
            longer = paths[next(i for i, x in enumerate(row) if x is not None)]
            raise PrepError(f"{short} has {n - 1} lines, {longer} has more (line {n}): the files "
                            "must be line-aligned")
        yield n, list(row)
    if n == 0:
        raise PrepError(f"{paths[0]} is empty")


def _split_tsv(line: str, path: Path, n: int) -> Tuple[str, str]:
    doc, tab, text = line.partition("\t")
    doc = doc.strip()
    if not tab or not doc:
        raise PrepError(f"{path} line {n}: no document id (expected DOCID<TAB>sentence)")
    return doc, text


def read_documents(prefix: str, src: str, tgt: str, fmt: str) -> Iterator[Tuple[str, str, str]]:
    """``(source sentence, target sentence, document id)`` of one split, in
    file order; PrepError (one line, naming file and line) on malformed input."""
    s_path, t_path = Path(f"{prefix}.{src}"), Path(f"{prefix}.{tgt}")
    paths = [s_path, t_path] + ([Path(f"{prefix}.docids")] if fmt == "docids" else [])
    for path in paths:
        if not path.is_file():
            raise PrepError(f"missing input file: {path} ({'--format ' + fmt})")
    finished, current, first_line = set(), None, {}
    n_blank_docs = 1
    for n, lines in _aligned(paths):
        if fmt == "tsv":
            doc, s = _split_tsv(lines[0], s_path, n)
            t_doc, t = _split_tsv(lines[1], t_path, n)
            if t_doc != doc:
                raise PrepError(f"{t_path} line {n}: document id {t_doc!r}, but {s_path} line {n} "
                                f"has {doc!r}")
            id_path = s_path
        elif fmt == "docids":
            s, t, doc = lines[0], lines[1], lines[2].strip()
            if not doc:
                raise PrepError(f"{paths[2]} line {n}: empty document id")
            id_path = paths[2]
        else:  # blank
            s, t = lines
            blank_s, blank_t = not clean_line(s), not clean_line(t)
            if blank_s != blank_t:
                blank, other = (s_path, t_path) if blank_s else (t_path, s_path)
                raise PrepError(f"{blank} line {n} is blank (a document break) but {other} line {n} "
                                "is not: documents must end at the same lines on both sides")
            if blank_s:
                if current is not None:
                    finished.add(current)
                    current = None
                    n_blank_docs += 1
                continue
            doc = f"doc{n_blank_docs}"
            id_path = s_path
        if doc != current:
            if doc in finished:
                raise PrepError(f"{id_path} line {n}: document {doc!r} continues after another "
                                f"document (first seen on line {first_line[doc]}); the lines of a "
                                "document must be consecutive")
            if current is not None:
                finished.add(current)
            current = doc
            first_line[doc] = n
        yield clean_line(s), clean_line(t), doc


def step_read(dest: Path, inputs: Dict[str, str], src: str, tgt: str, fmt: str) -> Dict[str, int]:
    """Write DEST/text/{split}.{src,tgt,docids} from the user's files;
    returns the sentence pairs per split."""
    tmp, counts = fresh_dir(dest / "text"), {}
    for split in SPLITS:
        prefix = inputs[split]
        n, docs = 0, set()
        with open(tmp / f"{split}.{src}", "w", encoding="utf-8") as fs, \
                open(tmp / f"{split}.{tgt}", "w", encoding="utf-8") as ft, \
                open(tmp / f"{split}.docids", "w", encoding="utf-8") as fd, \
                progress_bar(_line_count(f"{prefix}.{src}"), f"read {split}") as bar:
            for s, t, doc in read_documents(prefix, src, tgt, fmt):
                fs.write(s + "\n")
                ft.write(t + "\n")
                fd.write(doc + "\n")
                docs.add(doc)
                n += 1
                bar.update()
        counts[split] = n
        log(f"text: {split} {n} sentence pairs in {len(docs)} documents ({prefix}.{{{src},{tgt}}})")
    publish_dir(tmp, dest / "text")
    return counts


def _line_count(path: str) -> Optional[int]:
    try:
        return count_lines(Path(path))
    except OSError:
        return None


def _fingerprint(inputs: Dict[str, str], src: str, tgt: str, fmt: str) -> Dict[str, list]:
    """Path, size and modification time of every input file: a changed file
    redoes every step."""
    out = {}
    for split, prefix in inputs.items():
        files = [f"{prefix}.{src}", f"{prefix}.{tgt}"] + ([f"{prefix}.docids"] if fmt == "docids" else [])
        out[split] = [[str(Path(f).resolve()), *((os.stat(f).st_size, os.stat(f).st_mtime_ns)
                                                 if os.path.exists(f) else (None, None))] for f in files]
    return out


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Binarize your own document-aligned parallel corpus for fairseq_ctx "
                    "(--task document_translation): documents from a DOCID<TAB>sentence layout, a "
                    ".docids file or blank lines; optional Moses tokenization; sentencepiece or "
                    "subword-nmt BPE learned on train; fairseq-preprocess; .docids beside the data.",
        epilog="example: %(prog)s --source-lang de --target-lang en --train corpus/train "
               "--valid corpus/valid --test corpus/test --format blank --dest data/mycorpus "
               "(reads corpus/train.de, corpus/train.en, ...)")
    g = p.add_argument_group("input")
    g.add_argument("--source-lang", "-s", required=True, metavar="SRC", help="source suffix, e.g. de")
    g.add_argument("--target-lang", "-t", required=True, metavar="TGT", help="target suffix, e.g. en")
    for split in SPLITS:
        g.add_argument(f"--{split}", required=True, metavar="PREFIX",
                       help=f"the {split} split: PREFIX.SRC and PREFIX.TGT"
                            + (" (whole documents; not cleaned)" if split != "train" else ""))
    g.add_argument("--format", choices=FORMATS, default="tsv",
                   help="tsv: every line DOCID<TAB>sentence on both sides (default); docids: plain "
                        "sentences and PREFIX.docids, one id a line; blank: documents separated by "
                        "blank lines")
    g = p.add_argument_group("processing")
    g.add_argument("--tokenizer", choices=("none", "moses"), default=None,
                   help="Moses punctuation normalization + tokenization (sacremoses, escaping off) "
                        "before subwords (default: moses with --subword bpe, none with sentencepiece)")
    g.add_argument("--aggressive-dash-splits", action="store_true",
                   help="Moses tokenizer -a (as the WMT16 Ro-En recipe)")
    g.add_argument("--subword", choices=("sentencepiece", "bpe"), default="sentencepiece",
                   help="sentencepiece BPE model (default) or subword-nmt BPE, learned on train")
    g.add_argument("--vocab-size", type=int, default=8000,
                   help="sentencepiece vocabulary size (default: 8000, as the Bible corpus)")
    g.add_argument("--character-coverage", type=float, default=1.0,
                   help="sentencepiece character coverage (default 1.0; 0.9995 for Chinese or "
                        "Japanese, as the WMT17 Zh-En recipe)")
    g.add_argument("--merges", type=int, default=32000,
                   help="subword-nmt merge operations (default: 32000)")
    g.add_argument("--separate-vocab", action="store_true",
                   help="one subword model and dictionary per language (default: joint, "
                        "fairseq-preprocess --joined-dictionary)")
    g.add_argument("--clean-ratio", type=float, default=0.0,
                   help="drop train documents with a pair where one side has more than this many "
                        "times the tokens of the other, after subwords (the WMT/IWSLT recipes: "
                        "1.5); 0: off (default)")
    g.add_argument("--min-len", type=int, default=1,
                   help="drop train documents with a shorter sentence, in tokens (default 1: "
                        "drops documents with an empty sentence)")
    g.add_argument("--max-len", type=int, default=250,
                   help="drop train documents with a longer sentence, in tokens (default 250)")
    g = p.add_argument_group("output")
    g.add_argument("--dest", type=Path, required=True, help="output directory (binarized data in DEST/bin)")
    g.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1),
                   help="processes for tokenization, subwords and fairseq-preprocess")
    g.add_argument("--force", action="store_true", help="redo every step")
    return p


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.source_lang == args.target_lang:
        parser.error("--source-lang and --target-lang must differ")
    for flag in ("vocab_size", "merges", "workers"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be >= 1")
    if args.min_len < 1 or args.max_len < args.min_len:
        parser.error("need 1 <= --min-len <= --max-len")
    if not 0 < args.character_coverage <= 1:
        parser.error("--character-coverage must be in (0, 1]")
    if args.tokenizer is None:
        args.tokenizer = "moses" if args.subword == "bpe" else "none"
    return args


def make_spec(args: argparse.Namespace) -> Spec:
    src, tgt = args.source_lang, args.target_lang
    kind = ("spm", args.vocab_size, args.character_coverage) if args.subword == "sentencepiece" \
        else ("bpe", args.merges)
    tok = {lang: ("moses", lang, args.aggressive_dash_splits) if args.tokenizer == "moses" else ("plain",)
           for lang in (src, tgt)}
    inputs = {split: getattr(args, split) for split in SPLITS}
    return Spec(name="corpus", src=src, tgt=tgt, splits={}, tok=tok,
                subword={src: kind, tgt: kind} if args.separate_vocab else {"joint": kind},
                joined_dictionary=not args.separate_vocab, clean_ratio=args.clean_ratio, docids=True,
                settings={"format": args.format, "inputs": _fingerprint(inputs, src, tgt, args.format)})


def run(args: argparse.Namespace) -> dict:
    start = time.time()
    spec = make_spec(args)
    inputs = {split: getattr(args, split) for split in SPLITS}
    with no_partial_outputs(args.dest):
        args.dest.mkdir(parents=True, exist_ok=True)
        return run_steps(args.dest, spec, args,
                         lambda: step_read(args.dest, inputs, spec.src, spec.tgt, args.format), start)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    log.prog = PROG
    try:
        run(args)
    except (PrepError, OSError) as err:
        print(f"{ERROR_PREFIX}{err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; rerun to resume", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
