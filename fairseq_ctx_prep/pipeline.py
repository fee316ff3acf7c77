"""The pipeline that turns a corpus's raw files into fairseq's binarized
data: fetch, verify, tokenize, learn and apply subwords, clean, binarize.

Each corpus module (``wmt14_en_de``, ``wmt16_ro_en``, ``wmt17_zh_en``,
``iwslt``, ``opensubtitles_en_ru``) describes its data as a ``Spec`` and its
flags as a ``Command``; ``python3 -m fairseq_ctx_prep.CORPUS --help`` lists
them, and ``scripts/prepare-CORPUS.sh`` runs the module.

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
    binarize  fairseq-preprocess (a subprocess: nothing here imports torch),
              docids copied beside the data, every line
              count checked                                   -> DEST/bin/

The text-level functions (``fairseq_ctx_prep.text``) are pure and tested in
``tests/test_prepare_scripts.py`` together with every corpus end to end on
tiny files laid out like the real ones.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from .archives import ARCHIVES
from .download import Fetcher, Need, mirror_prefix
from .files import (ERROR_PREFIX, SPLITS, Log, Markers, PrepError, count_lines, discard_dir, fresh_dir,
                    idx_length, iter_lines, no_partial_outputs, publish_dir, run_logged, write_text_atomic)
from .text import (clean_line, iwslt_train_pair, keep_pair, map_file, moses_unescape, plain_pairs,
                   sgml_pairs, split_group)

# Bump when the output of a step changes, so old markers no longer match.
PIPELINE_VERSION = 2   # 2: En-Vi unescaped in text/, split sizes checked

log = Log("prepare")


@dataclass
class Corpus:
    """How one split is read: ``kind`` plain | sgml | iwslt-train | groups |
    unescape; two Needs (source side, target side), and with ``ctx`` a third:
    the context of every pair, one line each (Voita et al.'s 2018
    ``.en.context``), read as plain lines beside the pairs."""
    kind: str
    src: Need
    tgt: Need
    ctx: Optional[Need] = None


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
    # every corpus has a ctx Need: the explicit source-side context of each pair
    # goes through every step beside the source (text/tok/subword/final
    # {split}.context.{src}) and is binarized with the source dictionary into
    # bin/{split}.{src}-{tgt}.context.{src}, which --task document_translation reads
    context: bool = False
    extra_train: List[Tuple[Path, Path]] = field(default_factory=list)
    settings: dict = field(default_factory=dict)
    # valid/test -> (published number of sentence pairs, where it is published):
    # a built split of another size stops the run (check_sizes)
    expected: Dict[str, Tuple[int, str]] = field(default_factory=dict)
    # the training size the paper(s) report, printed beside ours (never checked:
    # cleaning and corpus versions move it)
    paper_train: str = ""
    # the same as a number, where one paper is followed: a warning when the
    # cleaned training count is more than 10% away from it
    paper_train_pairs: Optional[int] = None


def need(archive_key_or_archive, member: Optional[str]) -> Need:
    archive = ARCHIVES[archive_key_or_archive] if isinstance(archive_key_or_archive, str) \
        else archive_key_or_archive
    return archive, member


def pair_corpus(kind: str, archive, src_member: str, tgt_member: str, tgt_archive=None) -> Corpus:
    return Corpus(kind, need(archive, src_member), need(tgt_archive or archive, tgt_member))


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
    elif corpus.kind == "unescape":
        # Moses-escaped releases (Stanford En-Vi): undone here, in text/, so
        # that text/{valid,test}.* (sacreBLEU's references) hold the real
        # characters, and never again later (that would unescape "&amp;apos;" twice)
        for a, b in plain_pairs(s, t):
            yield moses_unescape(a), moses_unescape(b), None
    elif corpus.kind == "unsegment-src":
        # CWMT datum2017's Chinese is word-segmented; the spaces are removed so
        # that it is raw text like every other Chinese file (as fairseq's
        # examples/multilingual/data_scripts/download_wmt20.sh, prepare_ccmt)
        for a, b in plain_pairs(s, t):
            yield a.replace(" ", ""), b, None
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


def check_sizes(spec: Spec, counts: Dict[str, int], skip: bool) -> None:
    """Stop (one line) when a built valid/test split does not have the
    published number of sentence pairs: a truncated download, a wrong
    archive member or a misaligned SGML file would otherwise give BLEU on
    another test set than the paper's."""
    for split, (published, where) in spec.expected.items():
        if split in counts and counts[split] != published and not skip:
            raise PrepError(f"{split} has {counts[split]} sentence pairs, but {where} has "
                            f"{published} (published size); check the raw files, or pass "
                            "--skip-size-check to build a subset on purpose")


def describe_sizes(spec: Spec) -> str:
    checked = ", ".join(f"{split} {n} ({where})" for split, (n, where) in spec.expected.items())
    return "expected " + (checked or "valid/test sizes: none published that we found, not checked")


def context_name(spec: Spec, split: str) -> str:
    """File name of a split's explicit context in text/, tok/, subword/, final/."""
    return f"{split}.context.{spec.src}"


def _with_context(corpus: Corpus, pairs: Iterator[Tuple[str, str, Optional[str]]], paths
                  ) -> Iterator[Tuple[str, str, Optional[str], Optional[str]]]:
    """The pairs of a corpus with the line of its context file beside each
    (None without one); PrepError when the context file has another length."""
    if corpus.ctx is None:
        for a, b, doc in pairs:
            yield a, b, doc, None
        return
    ctx_path = paths[(corpus.ctx[0].name, corpus.ctx[1])]
    src_path = paths[(corpus.src[0].name, corpus.src[1])]
    for row in itertools.zip_longest(pairs, iter_lines(ctx_path)):
        if row[0] is None or row[1] is None:
            raise PrepError(f"{ctx_path} and {src_path} have different line counts "
                            f"({count_lines(ctx_path)} and {count_lines(src_path)})")
        (a, b, doc), c = row
        yield a, b, doc, clean_line(c)


def step_text(dest: Path, spec: Spec, fetcher: Fetcher, skip_size_check: bool = False) -> dict:
    needs = [n for corpora in spec.splits.values() for c in corpora
             for n in (c.src, c.tgt) + ((c.ctx,) if c.ctx else ())]
    paths = fetcher.fetch(needs)
    tmp, counts = fresh_dir(dest / "text"), {}
    for split, corpora in spec.splits.items():
        sources = list(corpora)
        n = 0
        with open(tmp / f"{split}.{spec.src}", "w", encoding="utf-8") as fs, \
                open(tmp / f"{split}.{spec.tgt}", "w", encoding="utf-8") as ft, \
                open(tmp / f"{split}.docids" if spec.docids else os.devnull, "w",
                     encoding="utf-8") as fd, \
                open(tmp / context_name(spec, split) if spec.context else os.devnull, "w",
                     encoding="utf-8") as fc:
            streams = [_with_context(c, _corpus_pairs(c, paths), paths) for c in sources]
            if split == "train":
                streams += [((a, b, None, None) for a, b in plain_pairs(ps, pt))
                            for ps, pt in spec.extra_train]
            for i, stream in enumerate(streams):
                for a, b, doc, ctx in stream:
                    fs.write(a + "\n")
                    ft.write(b + "\n")
                    fd.write(f"{split}-{i}-{doc}\n")
                    fc.write((ctx or "") + "\n")   # no context: an empty line
                    n += 1
        if n == 0:
            raise PrepError(f"no {split} sentence pairs were read")
        counts[split] = n
        log(f"text: {split} {n} sentence pairs"
            + (f" (the paper: {spec.paper_train})" if split == "train" and spec.paper_train else ""))
    check_sizes(spec, counts, skip_size_check)   # before publishing: no marker on a mismatch
    publish_dir(tmp, dest / "text")
    return counts


def step_tok(dest: Path, spec: Spec, workers: int) -> None:
    tmp = fresh_dir(dest / "tok")
    for split in SPLITS:
        for lang in (spec.src, spec.tgt):
            map_file(dest / "text" / f"{split}.{lang}", tmp / f"{split}.{lang}", spec.tok[lang], workers)
        if spec.context:   # source-side text: the source's processing
            name = context_name(spec, split)
            map_file(dest / "text" / name, tmp / name, spec.tok[spec.src], workers)
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
        if spec.context:
            name = context_name(spec, split)
            map_file(tok / name, tmp / name, jobs[spec.src], workers)
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
        if spec.context:
            shutil.copyfile(sub / context_name(spec, split), tmp / context_name(spec, split))
    rows = zip(iter_lines(sub / f"train.{spec.src}"), iter_lines(sub / f"train.{spec.tgt}"),
               iter_lines(text / "train.docids") if spec.docids else itertools.count(),
               iter_lines(sub / context_name(spec, "train")) if spec.context else itertools.repeat(""))
    # a unit is kept or dropped whole: a document, or a single pair
    units = (list(g) for _, g in itertools.groupby(rows, key=lambda row: row[2]))
    kept = total = 0
    with open(tmp / f"train.{spec.src}", "w", encoding="utf-8") as fs, \
            open(tmp / f"train.{spec.tgt}", "w", encoding="utf-8") as ft, \
            open(tmp / "train.docids" if spec.docids else os.devnull, "w", encoding="utf-8") as fd, \
            open(tmp / context_name(spec, "train") if spec.context else os.devnull, "w",
                 encoding="utf-8") as fc:
        for unit in units:
            total += len(unit)
            # the context is not filtered: it is cut to the model's positions when read
            if all(keep_pair(s, t, args.min_len, args.max_len, spec.clean_ratio) for s, t, _, _ in unit):
                kept += len(unit)
                for s, t, d, c in unit:
                    fs.write(s + "\n")
                    ft.write(t + "\n")
                    fd.write(f"{d}\n")
                    fc.write(c + "\n")
    if kept == 0:
        raise PrepError(f"cleaning kept no training pair of {total} (check --min-len, "
                        "--max-len, --clean-ratio)")
    publish_dir(tmp, dest / "final")
    log(f"clean: kept {kept} of {total} training pairs"
        + (f" (the paper: {spec.paper_train})" if spec.paper_train else ""))
    if spec.paper_train_pairs and abs(kept - spec.paper_train_pairs) > 0.1 * spec.paper_train_pairs:
        log(f"warning: {kept} training pairs are more than 10% away from the paper's "
            f"{spec.paper_train_pairs}: check the corpora (--corpus, --corpora, --from)")
    return {"train_before_clean": total, "train": kept}


def bin_prefix(bin_dir: Path, spec: Spec, split: str, lang: str) -> Path:
    return bin_dir / f"{split}.{spec.src}-{spec.tgt}.{lang}"


def context_prefix(bin_dir: Path, spec: Spec, split: str) -> Path:
    """Where --task document_translation looks for a split's explicit context."""
    return bin_dir / f"{split}.{spec.src}-{spec.tgt}.context.{spec.src}"


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
        if spec.context:
            idx = Path(str(context_prefix(dest / "bin", spec, split)) + ".idx")
            if not idx.is_file():
                raise PrepError(f"{idx} is missing; rerun with --force")
            seen["context"] = idx_length(idx)
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
    run_logged(cmd, dest / "binarize.log")
    if spec.docids:
        for split in SPLITS:
            shutil.copyfile(final / f"{split}.docids", tmp / f"{split}.{spec.src}-{spec.tgt}.docids")
    if spec.context:
        # the context with the source dictionary: fairseq-preprocess --only-source
        # writes {split}.{src}-None.{src}.{bin,idx}, renamed to context_prefix
        ctx_tmp = fresh_dir(dest / "bin-context")
        run_logged([sys.executable, "-m", "fairseq_cli.preprocess", "--only-source",
                    "--source-lang", spec.src, "--srcdict", str(tmp / f"dict.{spec.src}.txt"),
                    "--trainpref", str(final / "train.context"), "--validpref", str(final / "valid.context"),
                    "--testpref", str(final / "test.context"), "--destdir", str(ctx_tmp),
                    "--workers", str(max(1, workers))], dest / "binarize-context.log")
        for split in SPLITS:
            for ext in ("bin", "idx"):
                (ctx_tmp / f"{split}.{spec.src}-None.{spec.src}.{ext}").rename(
                    Path(f"{context_prefix(tmp, spec, split)}.{ext}"))
        discard_dir(ctx_tmp)
    publish_dir(tmp, dest / "bin")
    verify_counts(dest, spec)


# --------------------------------------------------------------------------
# Command line and driver
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class Command:
    """The command line of one corpus (``fairseq-ctx-prepare-NAME``, or
    ``python3 -m fairseq_ctx_prep.MODULE``): the flags every corpus shares, the corpus's own
    (``add_arguments``), and how its Spec is made from them."""
    name: str
    description: str
    dest: str                                          # default DEST, as the help shows it
    make_spec: Callable[[argparse.Namespace], Spec]
    add_arguments: Callable[[argparse.ArgumentParser], None] = lambda parser: None
    merges: Optional[int] = 32000                      # None: no --merges (sentencepiece only)
    clean_ratio: float = 1.5
    extra_train: bool = True
    example_flags: str = ""                            # the corpus's required flags, for --help's example

    def parser(self) -> argparse.ArgumentParser:
        prog = f"fairseq-ctx-prepare-{self.name}"
        flags = f" {self.example_flags}" if self.example_flags else ""
        parser = argparse.ArgumentParser(
            prog=prog, description=self.description, formatter_class=argparse.RawDescriptionHelpFormatter,
            epilog=f"example:\n"
                   f"  {prog}{flags}                 # download, check, write {self.dest.split()[0]}\n"
                   f"  {prog}{flags} --from DIR      # the archives are in DIR: download nothing\n"
                   f"(the same as: bash scripts/prepare-{self.name}.sh{flags} ...)")
        add_common_arguments(parser, self.dest, self.merges, self.clean_ratio)
        self.add_arguments(parser)
        if self.extra_train:
            parser.add_argument("--extra-train", action="append", default=[], metavar="PREFIX",
                                help="add the raw parallel files PREFIX.SRC / PREFIX.TGT to "
                                     "train (repeatable)")
        return parser

    def parse_args(self, argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
        parser = self.parser()
        args = parser.parse_args(argv)
        for flag in ("merges", "vocab_size", "zh_vocab_size"):
            if getattr(args, flag, 1) is not None and getattr(args, flag, 1) < 0:
                parser.error(f"--{flag.replace('_', '-')} must be >= 0")
        if args.min_len < 1 or args.max_len < args.min_len:
            parser.error("need 1 <= --min-len <= --max-len")
        if args.workers < 1:
            parser.error("--workers must be >= 1")
        return args

    def main(self, argv: Optional[Sequence[str]] = None) -> int:
        args = self.parse_args(argv)
        log.prog = f"prepare-{self.name}"
        try:
            run_pipeline(self, args)
        except (PrepError, OSError) as err:
            print(f"{ERROR_PREFIX}{err}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print(f"{log.prog}: interrupted; rerun to resume", file=sys.stderr)
            return 130
        return 0


def add_common_arguments(p: argparse.ArgumentParser, dest: str, merges: Optional[int] = 32000,
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
    p.add_argument("--skip-size-check", action="store_true",
                   help="build valid/test even when their number of sentence pairs differs "
                        "from the published one (default: stop)")
    p.add_argument("--force", action="store_true", help="redo every step (downloads are kept)")


def make_spec(command: Command, args: argparse.Namespace) -> Spec:
    spec = command.make_spec(args)
    for prefix in getattr(args, "extra_train", []):
        pair = (Path(f"{prefix}.{spec.src}"), Path(f"{prefix}.{spec.tgt}"))
        for path in pair:
            if not path.is_file():
                raise PrepError(f"missing raw file: {path} (--extra-train {prefix})")
        spec.extra_train.append(pair)
    return spec


def run_pipeline(command: Command, args: argparse.Namespace) -> dict:
    start = time.time()
    spec = make_spec(command, args)
    log.prog = "prepare-" + spec.name
    dest = args.dest or Path("data") / spec.name
    with no_partial_outputs(dest):
        dest.mkdir(parents=True, exist_ok=True)
        fetcher = Fetcher(dest, args.from_dir.resolve() if args.from_dir else None,
                          mirror_prefix(args.mirror) if args.mirror else None, log,
                          check_md5=not args.skip_checksums)
        log(describe_sizes(spec))
        return run_steps(dest, spec, args, lambda: step_text(dest, spec, fetcher, args.skip_size_check),
                         start)


def run_steps(dest: Path, spec: Spec, args: argparse.Namespace, text_step: Callable[[], dict],
              start: float) -> dict:
    """The steps from ``text_step`` (which writes DEST/text/{split}.{src,tgt}
    [, .docids] and returns the pair counts) to DEST/bin, skipping finished
    ones, then DEST/stats.json and a one-line summary. ``args`` needs
    ``force``, ``workers``, ``min_len`` and ``max_len``."""
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
        ("text", "text", {}, lambda: stats.update(text=text_step())),
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
    # again on the finished data: a re-run that skipped the text step (built
    # earlier with --skip-size-check) must not pass silently
    check_sizes(spec, stats["final"], getattr(args, "skip_size_check", False))
    stats["paper_train"] = spec.paper_train
    stats["languages"] = [spec.src, spec.tgt]
    if spec.docids:
        stats["documents"] = {split: count_documents(dest / "bin" / f"{split}.{spec.src}-{spec.tgt}.docids")
                              for split in SPLITS}
    write_text_atomic(stats_path, json.dumps(stats, indent=2) + "\n")
    log("done: " + ", ".join(f"{s} {n} pairs" + (f" in {stats['documents'][s]} documents" if spec.docids else "")
                             for s, n in stats["final"].items())
        + f" in {dest / 'bin'} ({time.time() - start:.0f} s)"
        + (f"; the paper's train: {spec.paper_train}" if spec.paper_train else ""))
    return stats


def count_documents(docids: Path) -> int:
    """Documents of a docids file: runs of consecutive lines with the same id
    (as --task document_translation reads them)."""
    return sum(1 for _ in itertools.groupby(iter_lines(docids)))
