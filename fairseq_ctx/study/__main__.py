"""``python3 -m fairseq_ctx.study``: train (and evaluate) the converged study.

    OMP_NUM_THREADS=1 taskset -c 1 python3 -m fairseq_ctx.study --data data/bible --out runs/study

Re-running the same command continues where it stopped: finished runs are
skipped, an interrupted run resumes from its last finished epoch.
"""
import argparse
import os
import sys

from fairseq_ctx.study import runs as study_runs
from fairseq_ctx.study.train import StudyError, train

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m fairseq_ctx.study", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=os.path.join(REPO, "data", "bible"),
                   help="Bible corpus from scripts/prepare-bible.sh (raw/ and bin/ inside)")
    p.add_argument("--out", default=os.path.join(REPO, "runs", "study"), help="checkpoints and logs")
    p.add_argument("--runs", nargs="+", help="only these runs (default: all, in order): "
                   + ", ".join(r.name for r in study_runs.RUNS))
    p.add_argument("--stage", choices=["train"], default="train")
    p.add_argument("--threads", type=int, default=1, help="OMP threads of every child process (default 1)")
    return p.parse_args(argv)


def main(argv=None):
    opts = parse_args(argv)
    bin_dir = os.path.join(opts.data, "bin")
    if not os.path.exists(os.path.join(bin_dir, "dict.es.txt")):
        sys.exit(f"study: error: --data {opts.data}: no binarized corpus in {bin_dir} "
                 f"(run: bash scripts/prepare-bible.sh --dest {opts.data})")
    os.environ["OMP_NUM_THREADS"] = str(opts.threads)
    user_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    selected = study_runs.by_name(opts.runs)
    try:
        waiting = []
        for run in selected:
            if not train(run, bin_dir, user_dir, opts.out, echo=lambda s: print(s, flush=True)):
                waiting.append(run)
        for run in waiting:  # warm starts whose source finished later in this pass
            train(run, bin_dir, user_dir, opts.out, echo=lambda s: print(s, flush=True))
    except StudyError as e:
        sys.exit(f"study: error: {e}")


if __name__ == "__main__":
    main()
