#!/usr/bin/env python3
"""Quickstart: prepare the Bible corpus, train small models on CPU for a bounded
time, translate the test set with beam search and print detokenized sacreBLEU.

    bash scripts/quickstart.sh                      # plain transformer, ~25 min on 2 cores
    bash scripts/quickstart.sh --archs transformer transformer_ctxsan --minutes 10

Each architecture is trained with the same small size, optimiser and time
budget (fairseq's ``--stop-time-hours``), so the table compares like with like.
Training shows fairseq's progress log. The last lines are a table:
arch, parameters, train time, updates, BLEU.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
USER_DIR = os.path.join(REPO, "fairseq_ctx")
if REPO not in sys.path:  # this checkout's list, whether or not the package is installed
    sys.path.insert(0, REPO)
from fairseq_ctx import architectures  # noqa: E402  (torch-free)

# A small Transformer that learns something in minutes on two CPU cores.
SMALL_MODEL = [
    "--encoder-layers", "3", "--decoder-layers", "3",
    "--encoder-embed-dim", "256", "--decoder-embed-dim", "256",
    "--encoder-ffn-embed-dim", "1024", "--decoder-ffn-embed-dim", "1024",
    "--encoder-attention-heads", "4", "--decoder-attention-heads", "4",
    "--share-all-embeddings",
]
TRAIN_FLAGS = [
    "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--lr", "0.001",
    "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "400", "--clip-norm", "1.0",
    "--dropout", "0.1", "--weight-decay", "0.0001",
    "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
    "--max-tokens", "4096", "--required-batch-size-multiple", "1",
    "--num-workers", "0", "--seed", "1", "--cpu", "--no-epoch-checkpoints",
    "--log-format", "simple", "--log-interval", "50",
]
# What --archs NAME trains: a variant of fairseq_ctx/architectures.py by its
# name (concat, ctxsan_both, ...) or by its arch when the list runs that arch
# without model flags (transformer_ctxenc is ctxenc: the document task, the
# previous verse of the chapter as context); a control below; else an --arch
# with no flags. Model flags go to training, task flags to training and decoding.
#
# Quickstart-only controls, built on a list entry: name -> (entry, extra task flags).
CONTROLS = {
    # ctxenc reading a random verse of the split instead of the previous one
    "transformer_ctxenc_random": ("ctxenc", ["--context-mode", "random"]),
}
# Extra evaluation rows of a list entry: (label suffix, extra decoding flags).
# "shuffled context" decodes the same model with every sentence's context taken
# from a random other sentence (Voita et al.'s test that a model really uses
# its context).
EVAL_ROWS = {
    "ctxenc": [(" (shuffled context)", ["--shuffle-context"])],
}


def resolve(name):
    """``(arch, model flags, task flags, extra evaluation rows)`` of ``--archs NAME``;
    the rows are ``(label, extra decoding flags)``."""
    if name in CONTROLS:
        entry, extra_task = CONTROLS[name]
        v = architectures.BY_NAME[entry]
        return v.arch, list(v.flags), [*v.task, *extra_task], []
    v = architectures.BY_NAME.get(name) or next(
        (v for v in architectures.VARIANTS if v.arch == name and not v.flags), None)
    if v is None:
        return name, [], [], []
    return v.arch, list(v.flags), list(v.task), [(name + suffix, flags) for suffix, flags in EVAL_ROWS.get(v.name, [])]


def run(cmd, log_path=None, echo=True):
    """Run a command, streaming its output (fairseq's progress) and keeping a log."""
    print("+ " + " ".join(cmd), flush=True)
    with open(log_path or os.devnull, "w") as log:
        # Unbuffered, or fairseq's progress arrives in 8 KB chunks through the pipe.
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO, env=env)
        for line in proc.stdout:
            log.write(line)
            # fairseq's progress (train_inner/train/valid lines) and errors; the rest goes to the log.
            if echo and re.search(r"\| (train_inner|train|valid) \||done training|Error|error:", line):
                sys.stdout.write(line)
                sys.stdout.flush()
        if proc.wait() != 0:
            sys.exit(f"quickstart: command failed (exit {proc.returncode}); see {log_path}")


def training_minutes(checkpoint, fallback_seconds):
    """Cumulative training time (minutes) kept in a fairseq checkpoint, which
    survives a resume, unlike this process's wall time."""
    import torch

    import fairseq_ctx

    fairseq_ctx.register()  # the allow-list for weights-only loading
    state = torch.load(checkpoint, map_location="cpu")
    return state.get("extra_state", {}).get("previous_training_time", fallback_seconds) / 60


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--archs", nargs="+", default=["transformer"],
                   help="architectures or named variants to train (default: transformer); variants: "
                   + ", ".join([*architectures.names(), *CONTROLS]))
    p.add_argument("--minutes", type=float, default=15.0, help="training budget per architecture (default 15)")
    p.add_argument("--data", default=os.path.join(REPO, "data", "bible"), help="Bible corpus directory")
    p.add_argument("--out", default=os.path.join(REPO, "runs", "quickstart"), help="checkpoints, logs, results")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="OMP threads for training and decoding")
    opts = p.parse_args()
    if opts.minutes <= 0:
        p.error("--minutes must be positive")

    bin_dir, raw_dir = os.path.join(opts.data, "bin"), os.path.join(opts.data, "raw")
    if not os.path.exists(os.path.join(bin_dir, "dict.es.txt")):
        run(["bash", os.path.join(REPO, "scripts", "prepare-bible.sh"), "--dest", opts.data])
    refs = read_lines(os.path.join(raw_dir, "test.en"))
    os.makedirs(opts.out, exist_ok=True)
    os.environ["OMP_NUM_THREADS"] = str(opts.threads)

    rows = []
    import sacrebleu

    for name in opts.archs:
        arch, model_flags, task_flags, extra_rows = resolve(name)
        save = os.path.join(opts.out, name)
        start = time.time()
        last = os.path.join(save, "checkpoint_last.pt")
        if os.path.exists(last) and training_minutes(last, 0) >= opts.minutes:
            print(f"{name}: {last} already has its {opts.minutes:g}-minute budget; decoding only", flush=True)
        else:  # fresh, or resumes an interrupted run from checkpoint_last.pt
            run([sys.executable, "-m", "fairseq_cli.train", bin_dir, "--user-dir", USER_DIR, "--arch", arch,
                 *SMALL_MODEL, *TRAIN_FLAGS, *model_flags, *task_flags, "--save-dir", save,
                 "--stop-time-hours", str(opts.minutes / 60)], log_path=save + ".train.log")
        train_minutes = training_minutes(last, fallback_seconds=time.time() - start)
        train_log = open(save + ".train.log", encoding="utf-8").read()
        params = int(re.search(r"num\. shared model params: ([\d,]+)", train_log).group(1).replace(",", ""))
        updates = re.findall(r"num_updates (\d+)", train_log)
        for label, gen_flags in [(name, [])] + extra_rows:
            tag = re.sub(r"\W+", "_", label).strip("_")
            gen_log = os.path.join(opts.out, tag + ".test.log")
            run([sys.executable, "-m", "fairseq_cli.generate", bin_dir, "--user-dir", USER_DIR,
                 "--path", os.path.join(save, "checkpoint_best.pt"), "--gen-subset", "test",
                 "--beam", str(opts.beam), "--max-len-a", "1.5", "--max-len-b", "10", "--batch-size", "64",
                 "--required-batch-size-multiple", "1",
                 "--remove-bpe", "sentencepiece", "--cpu", *task_flags, *gen_flags], log_path=gen_log, echo=False)
            hyps = {}
            for line in read_lines(gen_log):
                m = re.match(r"^D-(\d+)\t\S+\t(.*)$", line)
                if m:
                    hyps[int(m.group(1))] = m.group(2)
            if sorted(hyps) != list(range(len(refs))):
                sys.exit(f"quickstart: {label} produced {len(hyps)} translations for {len(refs)} test "
                         f"sentences; see {gen_log}")
            metric = sacrebleu.BLEU()
            bleu = metric.corpus_score([hyps[i] for i in range(len(refs))], [refs])
            with open(os.path.join(opts.out, tag + ".test.hyp"), "w", encoding="utf-8") as f:
                f.writelines(hyps[i] + "\n" for i in range(len(refs)))
            rows.append({"arch": label, "params": params, "train_minutes": round(train_minutes, 1),
                         "updates": int(updates[-1]) if updates else 0, "bleu": round(bleu.score, 2),
                         "signature": str(metric.get_signature())})
            print(f"{label}: {bleu}", flush=True)

    with open(os.path.join(opts.out, "results.json"), "w") as f:
        json.dump(rows, f, indent=2)
    print(f"\n{'arch':<40}{'params':>10}{'train min':>11}{'updates':>9}{'BLEU':>7}")
    for r in rows:
        print(f"{r['arch']:<40}{r['params'] / 1e6:>9.2f}M{r['train_minutes']:>11.1f}{r['updates']:>9}{r['bleu']:>7.2f}")
    print(f"detokenized sacreBLEU on the Bible test set ({len(refs)} verses), {rows[0]['signature']}")


if __name__ == "__main__":
    main()
