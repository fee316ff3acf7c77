"""``python3 -m fairseq_ctx.tables TABLE`` (console script ``fairseq-ctx-table``):
reproduce one of the papers' tables (``--list`` names them).

Imports nothing beyond the standard library before the table runs (fairseq
and torch run in the training and decoding subprocesses; scoring and the
analyses import them when they start), so ``--help`` is immediate.
"""
import argparse
import logging
import sys

from . import all_tables, get_table
from ..errors import ERROR_PREFIX
from .config import ArgsFileError
from .definition import TableError


def get_parser() -> argparse.ArgumentParser:
    names = [table.name for table in all_tables()]
    parser = argparse.ArgumentParser(
        prog="fairseq-ctx-table",
        description="Train every row of a paper's table, average checkpoints, decode, score, analyse and print "
                    "the table beside the paper's numbers (docs/tables.md).",
        epilog="examples:\n"
               "  fairseq-ctx-table ctxsan-table1 --smoke --cpu        # every row, tiny, on the Bible corpus\n"
               "  fairseq-ctx-table ctxsan-table1 --data data/wmt14-en-de/bin --gpus 8\n"
               "  fairseq-ctx-table gret-table1 --data wmt14_en_de=data/wmt14-en-de/bin --rows 3 4 --dry-run",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("table", metavar="TABLE", choices=names, help="one of: " + ", ".join(names))
    parser.add_argument("--root", metavar="DIR",
                        help="the fairseq_ctx checkout whose configs/, data/ and runs/ are used (default: the one "
                             "containing the current directory)")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny models, 3 updates, beam 2, on the Bible corpus (every dataset replaced by --data): "
                             "checks that every row runs; the numbers mean nothing")
    parser.add_argument("--data", action="append", metavar="[DATASET=]DIR",
                        help="binarized data: DIR for every dataset of the table, or DATASET=DIR (repeatable); "
                             "default: each dataset's prepare-script output under ROOT (smoke: ROOT/data/bible/bin)")
    parser.add_argument("--ref-dir", action="append", metavar="[DATASET=]DIR",
                        help="directory of the detokenized references SUBSET.TGT (default: raw/ or text/ beside "
                             "the binarized data, as the prepare scripts write them)")
    parser.add_argument("--out", help="models, logs and tables (default: ROOT/runs/tables, smoke: "
                                      "ROOT/runs/tables-smoke)")
    parser.add_argument("--rows", nargs="+", metavar="ROW",
                        help="only these rows (numbers from 1 or labels) and the models they need (warm start, "
                             "model decoded); a baseline is compared with when an earlier run scored it; an "
                             "analysis whose rows were not run is skipped")
    parser.add_argument("--gpus", type=int, choices=(1, 2, 4, 8),
                        help="GPUs fairseq-train uses (it takes every visible one: set CUDA_VISIBLE_DEVICES): "
                             "appends --update-freq E/N, E the GPU batches per update the config and "
                             "--batch-reading give (ctxsan, Voita: 8)")
    parser.add_argument("--batch-reading", choices=("as-written", "8gpu"), default="as-written",
                        help="DC and GRET give their batch (4960 / 2048 tokens, 50 sentences) without a GPU "
                             "count: as-written (default) makes it the batch of one update; 8gpu the batch of "
                             "each of 8 GPUs (8x per update, 8x the epochs); other tables are unaffected")
    parser.add_argument("--cpu", action="store_true", help="pass --cpu to training, decoding and analyses")
    parser.add_argument("--extra-train-args", metavar="ARGS",
                        help="appended to every fairseq-train command (e.g. '--fp16')")
    parser.add_argument("--extra-generate-args", metavar="ARGS", help="appended to every fairseq-generate command")
    parser.add_argument("--probing-args", metavar="ARGS", help="flags for fairseq_ctx.analysis.probing (DC Table 4)")
    parser.add_argument("--bootstrap-samples", type=int, default=1000,
                        help="paired bootstrap resamples (default 1000)")
    parser.add_argument("--no-analyses", action="store_true", help="skip the analyses (plots, gates, ...)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the commands of the rows still to run; run nothing")
    return parser


def main(argv=None) -> int:
    parser = get_parser()
    opts = parser.parse_args(argv)
    if opts.bootstrap_samples < 1:
        parser.error("--bootstrap-samples must be positive")
    for name in ("sacrebleu", "matplotlib", "PIL"):  # their INFO chatter (bootstrap progress, font search)
        logging.getLogger(name).setLevel(logging.WARNING)
    table = get_table(opts.table)
    from .running import TableRun

    try:
        return TableRun(table, opts).run()
    except (TableError, ArgsFileError) as err:
        print(f"{ERROR_PREFIX}{err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
