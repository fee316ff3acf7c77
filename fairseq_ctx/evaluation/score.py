"""Score systems against a reference as the papers did, and as document-level
work reports.

Usage (``fairseq-ctx-score`` is the same command)::

    python3 -m fairseq_ctx.evaluation.score --ref test.de \\
        --hyp transformer=gen.transformer.log ctxsan=gen.ctxsan.log \\
        --baseline transformer [--docids test.en-de.docids] [--metrics bleu,chrf,ter] \\
        [--tokenized-compound-split --lang de] \\
        [--src-bin data/bin/test.en-de.en --length-buckets --plot buckets.png] [--json scores.json]

``--hyp NAME=FILE``: a fairseq-generate log (its ``D-`` lines, sorted by
sentence id; every id of the reference must be there) or a text file with
one hypothesis a line (``NAME=`` may be left out: the file name is used).
``--ref``: the detokenized reference, one sentence a line.

Printed per system: detokenized sacreBLEU, chrF2 and TER (``--metrics``;
sacreBLEU's implementations, each signature once, below the table); with
``--docids`` (one document id per reference line, the task's ``.docids``),
document-level BLEU (d-BLEU: each document's sentences joined, see
:mod:`.document`) and BLEU of the documents' first sentences against the later
ones; with ``--baseline``, per metric the difference from the baseline and the
two-sided p-value of paired bootstrap resampling (sacreBLEU's implementation,
``--bootstrap-samples`` resamples, ``--seed``; sentences resampled, documents
for d-BLEU).  Differences smaller than 0.005 are printed with two significant
digits, so a printed ``+0.00`` is exactly zero, whose p-value is 1; with
``--tokenized-compound-split``, the same for tokenized BLEU with compound
splitting (Moses tokenization with ``--lang``, ``##AT##`` splitting, BLEU
on whitespace tokens: the Vaswani et al. 2017 En-De convention).  With
``--length-buckets``, BLEU by source length: in subword tokens of the
binarized source with ``--src-bin PREFIX`` (its sizes without ``</s>``, the
DC paper's unit), or in whitespace tokens of ``--src``; buckets closed on the
left (``--bucket-edges``, default 10,20,30,40,50: <10, 10-19, ..., >=50);
``--plot`` writes it as a PNG.  ``--json`` writes everything.  See
:mod:`fairseq_ctx.evaluation.bleu` and :mod:`.length_buckets`.

Unreadable or misaligned input stops with one line, e.g.
``fairseq_ctx: error: gen.log: no D- line for sentence id(s) 17 (552 of 553 found); ...``.
"""
import argparse
import json
import logging
import os
import re
from typing import Dict, List, Optional, Sequence

from fairseq_ctx.errors import install_excepthook

from .bleu import (DEFAULT_BOOTSTRAP_SAMPLES, DEFAULT_SEED, METRICS, EvaluationError, compound_split_lines,
                   corpus_score, detok_bleu, format_delta, is_generate_log, paired_bootstrap,
                   paired_bootstrap_metrics, read_generate_log, read_hypotheses, read_lines, tokenized_bleu)
from .document import bleu_by_position, document_bleu, format_position_table, join_documents, read_docids
from .length_buckets import (DEFAULT_EDGES, binarized_lengths, bleu_by_length, format_length_table, parse_edges,
                             plot_length_buckets)


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog="fairseq-ctx-score",
        description="BLEU, chrF and TER (sacreBLEU, with signatures; optionally tokenized BLEU with compound "
                    "splitting), document-level BLEU and BLEU by document position (--docids), paired bootstrap "
                    "p-values against a baseline for each metric, and BLEU by source length.",
        epilog="examples:\n"
               "  fairseq-ctx-score --ref test.en --hyp base=gen.transformer.log ctxenc=test.ctxenc.en "
               "--baseline base\n"
               "  fairseq-ctx-score --ref test.en --docids test.docids --hyp ctxenc=test.ctxenc.en \\\n"
               "      --src-bin data/bin/test.es-en.es --length-buckets --plot buckets.png --json scores.json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ref", required=True, help="detokenized reference, one sentence a line")
    p.add_argument("--hyp", required=True, nargs="+", action="extend", metavar="NAME=FILE",
                   help="systems: fairseq-generate logs (D- lines) or text files, one hypothesis a line "
                        "(--hyp A=F1 B=F2, or --hyp given once per system)")
    p.add_argument("--hyp-format", choices=("auto", "genlog", "text"), default="auto",
                   help="how to read --hyp files (default: a generate log if it has D-<id> lines)")
    p.add_argument("--baseline", metavar="NAME", help="compare every other system with this one")
    p.add_argument("--metrics", default=",".join(METRICS), type=_metric_list,
                   help=f"sentence-level metrics, comma-separated, among {','.join(METRICS)} (default: all; BLEU "
                        "is always computed)")
    p.add_argument("--docids", metavar="FILE",
                   help="one document id per reference line (the task's .docids file): adds document-level BLEU "
                        "(d-BLEU) and BLEU of first vs later sentences of the documents")
    p.add_argument("--bootstrap-samples", type=int, default=DEFAULT_BOOTSTRAP_SAMPLES,
                   help=f"paired bootstrap resamples (default {DEFAULT_BOOTSTRAP_SAMPLES})")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"bootstrap seed (default {DEFAULT_SEED})")
    p.add_argument("--tokenize", default=None,
                   help="sacreBLEU tokenizer for the detokenized BLEU (default: sacreBLEU's, 13a)")
    p.add_argument("--tokenized-compound-split", action="store_true",
                   help="also tokenized BLEU with compound splitting (Vaswani et al. 2017 En-De)")
    p.add_argument("--lang", help="target language: Moses tokenization for --tokenized-compound-split, "
                                  "and sacreBLEU's trg_lang")
    p.add_argument("--input-tokenized", action="store_true",
                   help="hypotheses and reference are already Moses-tokenized: no tokenization before "
                        "compound splitting (the BLEU column is then not detokenized BLEU)")
    p.add_argument("--src", help="source sentences (text, or a generate log's S- lines) for --length-buckets: "
                                 "length = whitespace tokens (a generate log's S- lines are printed after BPE "
                                 "removal and detokenization, so they count words, not subwords)")
    p.add_argument("--src-bin", metavar="PREFIX",
                   help="binarized source split without .idx/.bin (e.g. data/bin/test.en-de.en) for "
                        "--length-buckets: length = subword tokens, the dataset's sizes without </s>")
    p.add_argument("--length-buckets", action="store_true", help="BLEU by source-length bucket")
    p.add_argument("--bucket-edges", default=",".join(map(str, DEFAULT_EDGES)),
                   help="bucket edges in source tokens, each opening a bucket (default 10,20,30,40,50: "
                        "<10, 10-19, ..., 40-49, >=50, as the DC paper's groups)")
    p.add_argument("--bucket-metric", choices=("bleu", "tok"), default="bleu",
                   help="score per bucket: detokenized BLEU (default) or the compound-split tokenized BLEU")
    p.add_argument("--plot", metavar="PNG", help="plot the length buckets (implies --length-buckets)")
    p.add_argument("--json", metavar="FILE", help="write all results as JSON")
    return p.parse_args(argv)


def _metric_list(text: str) -> List[str]:
    names = [m.strip().lower() for m in text.split(",") if m.strip()]
    unknown = [m for m in names if m not in METRICS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown metric(s) {', '.join(unknown)}; choose among {', '.join(METRICS)}")
    return ["bleu"] + [m for m in METRICS if m in names and m != "bleu"]


def parse_systems(specs: List[str]) -> Dict[str, str]:
    systems: Dict[str, str] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = os.path.splitext(os.path.basename(spec))[0], spec
        if not name or not path:
            raise EvaluationError(f"--hyp {spec!r}: expected NAME=FILE")
        if name in systems:
            raise EvaluationError(f"--hyp: system name {name!r} given twice")
        systems[name] = path
    return systems


def _p(v: Optional[float]) -> str:
    if v is None:
        return "-"
    return f"{v:.4f}" + ("*" if v < 0.05 else " ")


def format_table(rows: List[dict], baseline: Optional[str], tok: bool, metrics: Sequence[str] = ("bleu",),
                 document: bool = False) -> str:
    width = max([8] + [len(r["name"]) + 2 for r in rows])
    cols = [("BLEU", "bleu", "delta", "p_value")]
    cols += [(METRICS[m], m, f"{m}_delta", f"{m}_p_value") for m in metrics if m != "bleu"]
    if document:
        cols.append(("d-BLEU", "dbleu", "dbleu_delta", "dbleu_p_value"))
    if tok:
        cols.append(("tok BLEU", "tok_bleu", "tok_delta", "tok_p_value"))
    head = f"{'system':<{width}}"
    for title, _, _, _ in cols:
        head += f"{title:>10}" + (f"{'diff':>10}{'p-value':>10}" if baseline else "")
    lines = [head]
    for r in rows:
        line = f"{r['name']:<{width}}"
        for _, score, delta, p in cols:
            line += f"{r[score]:>10.2f}"
            if baseline:
                line += f"{format_delta(r.get(delta)):>10}{_p(r.get(p)):>10}"
        lines.append(line)
    return "\n".join(lines)


def parse_table(text: str) -> Dict[str, Dict[str, str]]:
    """The first table :func:`format_table` printed in ``text``, read back
    through its header: ``{system: {column title: cell as printed}}``, the
    titles as printed (``BLEU``, ``chrF``, ``d-BLEU``, ``tok BLEU``; the
    columns beside each score, when printed, as ``"BLEU diff"``,
    ``"BLEU p-value"``). The name column is as wide as the header says and
    every other column 10 characters, as :func:`format_table` writes them;
    the rows end at the first line that is not one. ``{}`` when no table was
    printed. Scripts that record what a user saw (the first command's and a
    newcomer's records) read the table with this, so its layout is decided
    here only."""
    lines = text.splitlines()
    for i, head in enumerate(lines):
        if not head.startswith("system "):
            continue
        # the name column ends where BLEU's right-aligned 10-character column begins
        first = re.match(r"system +BLEU", head)
        width = first.end() - 10 if first else 0
        if width < len("system") or (len(head) - width) % 10:
            continue
        titles = [head[j:j + 10].strip() for j in range(width, len(head), 10)]
        if not all(titles):
            continue
        for k, t in enumerate(titles):  # each score's diff and p-value columns follow it
            if t in ("diff", "p-value"):
                titles[k] = f"{titles[k - (1 if t == 'diff' else 2)]} {t}"
        table: Dict[str, Dict[str, str]] = {}
        for row in lines[i + 1:]:
            cells = [row[j:j + 10].strip() for j in range(width, width + 10 * len(titles), 10)]
            name = row[:width].strip()
            if not name or " " in name or len(row.rstrip()) > width + 10 * len(titles) \
                    or not re.fullmatch(r"-?\d+\.\d+", cells[0]):
                break
            table[name] = dict(zip(titles, cells))
        return table
    return {}


def main(argv=None):
    install_excepthook()
    for name in ("sacrebleu", "matplotlib", "PIL"):  # their INFO/DEBUG chatter, whatever the root level
        logging.getLogger(name).setLevel(logging.WARNING)
    args = parse_args(argv)
    systems = parse_systems(args.hyp)
    if args.baseline is not None and args.baseline not in systems:
        raise EvaluationError(f"--baseline {args.baseline!r} is not one of the --hyp names ({', '.join(systems)})")
    if args.tokenized_compound_split and not args.lang and not args.input_tokenized:
        raise EvaluationError("--tokenized-compound-split needs --lang (the target language, for Moses "
                              "tokenization) or --input-tokenized")
    if args.bucket_metric == "tok" and not args.tokenized_compound_split:
        raise EvaluationError("--bucket-metric tok needs --tokenized-compound-split")
    buckets = args.length_buckets or args.plot is not None
    if buckets and bool(args.src) == bool(args.src_bin):
        raise EvaluationError("--length-buckets needs one of --src (the source sentences) and --src-bin "
                              "(the binarized source)")
    edges = parse_edges(args.bucket_edges) if buckets else None
    if args.seed is not None and args.seed <= 0:
        raise EvaluationError(f"--seed must be a positive integer (sacreBLEU treats 0 as unseeded), not {args.seed}")

    refs = read_lines(args.ref)
    if not refs:
        raise EvaluationError(f"{args.ref}: empty reference")
    n = len(refs)
    hyps = {name: read_hypotheses(path, n, args.hyp_format) for name, path in systems.items()}
    srcs, src_lengths = None, None
    if buckets and args.src_bin:
        src_lengths = binarized_lengths(args.src_bin)
        if len(src_lengths) != n:
            raise EvaluationError(f"{args.src_bin}: {len(src_lengths)} sentences, but the reference has {n}")
    elif buckets:
        src_lines = read_lines(args.src)
        if is_generate_log(src_lines):
            srcs = read_generate_log(args.src, n, "S", lines=src_lines)
        elif len(src_lines) != n:
            raise EvaluationError(f"{args.src}: {len(src_lines)} lines, but the reference has {n}")
        else:
            srcs = src_lines
    docids = read_docids(args.docids, n) if args.docids else None
    trg_lang = args.lang or ""

    rows = []
    signature = None
    signatures = {}
    for name, h in hyps.items():
        score, signature = detok_bleu(h, refs, tokenize=args.tokenize, trg_lang=trg_lang)
        row = {"name": name, "path": systems[name], "bleu": score}
        for m in args.metrics[1:]:
            row[m], signatures[m] = corpus_score(m, h, refs)
        if docids is not None:
            row["dbleu"], signatures["dbleu"] = document_bleu(h, refs, docids, tokenize=args.tokenize,
                                                              trg_lang=trg_lang)
        rows.append(row)
    signatures["bleu"] = signature

    tok_signature, split = None, None
    if args.tokenized_compound_split:
        lang = None if args.input_tokenized else args.lang
        split_refs = compound_split_lines(refs, lang)
        split = {name: compound_split_lines(h, lang) for name, h in hyps.items()}
        for row in rows:
            row["tok_bleu"], tok_signature = tokenized_bleu(split[row["name"]], split_refs)
        tok_signature += f"|pre:{'moses-' + lang if lang else 'pretokenized'}+compound-split"

    bootstrap = None
    if args.baseline is not None:
        others = {name: h for name, h in hyps.items() if name != args.baseline}
        tested, bs_sigs = paired_bootstrap_metrics(hyps[args.baseline], others, refs, args.metrics,
                                                   n_samples=args.bootstrap_samples, seed=args.seed,
                                                   tokenize=args.tokenize, trg_lang=trg_lang)
        res, bs_sig = tested["bleu"], bs_sigs["bleu"]
        bootstrap = {"test": "paired bootstrap resampling (sacreBLEU), two-sided", "samples": args.bootstrap_samples,
                     "seed": args.seed, "signature": bs_sig, "signatures": bs_sigs}
        if docids is not None:
            # documents are the resampled units of d-BLEU
            joined_refs = join_documents(refs, docids)
            tested["dbleu"], bootstrap["signatures"]["dbleu"] = paired_bootstrap(
                join_documents(hyps[args.baseline], docids), {k: join_documents(h, docids) for k, h in others.items()},
                joined_refs, n_samples=args.bootstrap_samples, seed=args.seed, tokenize=args.tokenize,
                trg_lang=trg_lang)
        if split is not None:
            tres, tbs_sig = paired_bootstrap(split[args.baseline], {k: split[k] for k in others}, split_refs,
                                             n_samples=args.bootstrap_samples, seed=args.seed,
                                             tokenize="none", smooth_method="none")
            bootstrap["signature_tok"] = tbs_sig
        for row in rows:
            r = res.get(row["name"])
            if r is not None:
                row.update(delta=r.delta, p_value=r.p_value, bootstrap_mean=r.mean, bootstrap_ci95=r.ci)
            for m, results in tested.items():
                if m != "bleu" and row["name"] in results:
                    row.update({f"{m}_delta": results[row["name"]].delta,
                                f"{m}_p_value": results[row["name"]].p_value})
            if split is not None and row["name"] in tres:
                t = tres[row["name"]]
                row.update(tok_delta=t.delta, tok_p_value=t.p_value)

    length = None
    unit = "subword tokens of the binarized source (without </s>)" if args.src_bin else None
    if buckets:
        if args.bucket_metric == "tok":
            length = bleu_by_length(srcs, split, split_refs, edges, score_fn=lambda h, r: tokenized_bleu(h, r)[0],
                                    lengths=src_lengths, unit=unit)
        else:
            length = bleu_by_length(srcs, hyps, refs, edges,
                                    score_fn=lambda h, r: detok_bleu(h, r, args.tokenize, trg_lang)[0],
                                    lengths=src_lengths, unit=unit)
        length["metric"] = "tokenized compound-split BLEU" if args.bucket_metric == "tok" else "detokenized sacreBLEU"
        length["src"] = args.src_bin or args.src
    position = None
    if docids is not None:
        position = bleu_by_position(hyps, refs, docids,
                                    score_fn=lambda h, r: detok_bleu(h, r, args.tokenize, trg_lang)[0])
        position["docids"] = args.docids

    documents = f" in {position['documents']} documents" if position else ""
    print(f"{len(rows)} system(s), {n} sentences{documents}, reference {args.ref}")
    print(format_table(rows, args.baseline, args.tokenized_compound_split, args.metrics, docids is not None))
    print(f"BLEU: detokenized sacreBLEU, {signature}"
          + (" (on pre-tokenized text: not comparable with detokenized scores)" if args.input_tokenized else ""))
    if "chrf" in signatures:
        print(f"chrF: sacreBLEU chrF2, {signatures['chrf']}")
    if "ter" in signatures:
        print(f"TER: sacreBLEU TER (an error rate: lower is better), {signatures['ter']}")
    if "dbleu" in signatures:
        print(f"d-BLEU: sacreBLEU on each document's sentences joined by spaces ({position['documents']} documents "
              f"of {args.docids}), {signatures['dbleu']}")
    if tok_signature:
        print(f"tok BLEU: tokenized BLEU with compound splitting (multi-bleu.perl equivalent), {tok_signature}")
    if bootstrap:
        print(f"p-value: paired bootstrap resampling against {args.baseline} (sacreBLEU, {args.bootstrap_samples} "
              f"resamples{' of sentences, of documents for d-BLEU' if docids is not None else ''}, seed "
              f"{args.seed}), two-sided; * p < 0.05; a diff printed as +0.00 is exactly 0 (p = 1)")
    if position:
        print(f"\nBLEU by position in the document ({args.docids}): first sentences vs the later ones"
              + (f" (diff from {args.baseline})" if args.baseline else ""))
        print(format_position_table(position, args.baseline))
    if length:
        print(f"\n{length['metric']} by source length ({length['unit']} of {length['src']}; "
              f"{length['groups']} groups, closed on the left):")
        print(format_length_table(length, args.baseline))
    if args.plot:
        plot_length_buckets(length, args.plot, baseline=args.baseline,
                            title=f"{length['metric']} by source length")
        print(f"plot: {args.plot}")
    result = {"ref": args.ref, "sentences": n, "baseline": args.baseline,
              "bleu_signature": signature, "tok_bleu_signature": tok_signature, "signatures": signatures,
              "bootstrap": bootstrap, "systems": rows, "length_buckets": length, "position": position}
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
    return result


def cli_main():
    main()


if __name__ == "__main__":
    cli_main()
