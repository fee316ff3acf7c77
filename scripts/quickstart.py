#!/usr/bin/env python3
"""Quickstart: prepare the Bible corpus, train small models on CPU within one
time budget, translate the test set as the README's fairseq-ctx-translate line
does and print detokenized sacreBLEU.

    bash scripts/quickstart.sh                      # plain transformer, 15 minutes in all
    bash scripts/quickstart.sh --archs transformer transformer_ctxsan --minutes 30

``--minutes`` is the budget of the whole run: ``--decode-minutes`` per
architecture is kept for translating the test set and the rest is split
evenly between the architectures' training, so the table compares like with
like. Each model is the study's (``fairseq_ctx/study/runs.py``: 3+3 layers,
d=128, its recipe) trained to the end of a learning-rate schedule that fits
its share: a short calibration run measures the architecture's seconds per
update on this machine, the share gives the number of updates, and the rate
warms up over a quarter of them (at most the study's 400) and decays linearly
to zero at the last one (a model whose rate has not decayed is markedly worse
at the same number of updates). fairseq's ``--stop-time-hours`` stops a run
that falls behind its plan. Each model is translated from its
``checkpoint_last.pt`` with exactly the command the README shows (printed
before it runs: the same file, the same BLEU). When the budget buys fewer
than ``MIN_UPDATES`` updates, one line says that its BLEU means nothing on
this machine in this budget. Training shows fairseq's progress log; the last
lines are a table: arch, parameters, train time, updates, BLEU.
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

from fairseq_ctx.study.runs import RECIPE, SIZE  # noqa: E402  (torch-free)
from fairseq_ctx.study.train import child_env  # noqa: E402

# Below this many updates the model is still in its first, steep descent (the
# study's baseline under a 2,000-update schedule: validation loss 6.78 at 400
# updates, 5.67 at 800, 4.83 at 2,000), so its BLEU says nothing.
MIN_UPDATES = 400
# The study's warm-up; shorter budgets warm up over a quarter of their updates.
WARMUP_UPDATES = 400
# The calibration run: updates made, and the first one timed (the first ones
# include start-up work: data loading, allocator growth).
CALIBRATION_UPDATES = 30  # --calibration-updates; timed from a third of them on
# Of the training share, the part planned for updates: the rest is start-up,
# the end-of-epoch checkpoint saves, and slack for a machine slower than at
# calibration.
PLAN_SHARE = 0.9
# The README's translate line (README.md, "Quickstart"; docs/translate.md): the
# quickstart decodes with exactly these flags, so its BLEU is the one a reader
# gets by running that line on the same checkpoint.
DECODE_FLAGS = ["--beam", "4", "--max-len-a", "1.5", "--max-len-b", "10"]
CHECKPOINT = "checkpoint_last.pt"
# The plan of a model (its updates), kept beside it so that a resumed run keeps its schedule.
PLAN = "quickstart-plan.json"

TRAIN_FLAGS = [*RECIPE, "--seed", "1", "--cpu", "--no-epoch-checkpoints", "--disable-validation"]


def schedule(updates):
    """Warm-up, then linear decay to zero at exactly ``updates``."""
    warmup = max(1, min(WARMUP_UPDATES, updates // 4))
    return ["--lr-scheduler", "polynomial_decay", "--power", "1", "--end-learning-rate", "0",
            "--warmup-updates", str(warmup), "--total-num-update", str(updates), "--max-update", str(updates)]


def seconds_per_update(log_text, start=CALIBRATION_UPDATES // 3):
    """From a calibration run's log: seconds per update between updates
    ``start`` and the last one logged (fairseq's ``train_wall``)."""
    # train_inner lines (num_updates=N ... train_wall=S) and, when an epoch is shorter than the
    # log interval, end-of-epoch lines (| num_updates N | ... | train_wall S)
    walls = {int(u): float(w) for u, w in re.findall(r"num_updates[= ](\d+)\b.*?train_wall[= ]([\d.]+)", log_text)}
    if start not in walls or max(walls) <= start:
        return None
    last = max(walls)
    return max(walls[last] - walls[start], 1.0) / (last - start)


def plan_updates(train_seconds, per_update):
    """Updates that fit ``PLAN_SHARE`` of ``train_seconds`` (at least 1)."""
    return max(1, int(PLAN_SHARE * train_seconds / per_update))


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
        # Unbuffered (or fairseq's progress arrives in 8 KB chunks through the
        # pipe), with the study's allocator where installed.
        env = child_env()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO, env=env)
        for line in proc.stdout:
            log.write(line)
            # fairseq's progress (train_inner/train/valid lines) and errors; the rest goes to the log.
            if echo and re.search(r"\| (train_inner|train|valid) \||done training|Error|error:", line):
                sys.stdout.write(line)
                sys.stdout.flush()
        if proc.wait() != 0:
            sys.exit(f"fairseq_ctx: error: command failed (exit {proc.returncode}); see {log_path}")


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


def translate_command(bin_dir, raw_dir, spm_model, checkpoint, output, extra=()):
    """The README's fairseq-ctx-translate line for ``checkpoint`` (as
    ``python3 -m fairseq_ctx.translate``, the same command)."""
    bpe = ["--bpe", "sentencepiece", "--sentencepiece-model", spm_model] if os.path.exists(spm_model) else []
    return [sys.executable, "-m", "fairseq_ctx.translate", bin_dir, "--path", checkpoint,
            "--input", os.path.join(raw_dir, "test.es"), "--docids", os.path.join(raw_dir, "test.docids"),
            *bpe, *DECODE_FLAGS, "--output", output, "--no-progress-bar", *extra]


def budget_split(minutes, decode_minutes, n_archs):
    """Training minutes per architecture: the budget less ``decode_minutes``
    per architecture, split evenly; None if nothing is left to train."""
    train = (minutes - decode_minutes * n_archs) / n_archs
    return train if train > 0 else None


def too_few_updates(name, updates, train_minutes, budget_minutes):
    """The one line printed when a model made too few updates, else None."""
    if updates >= MIN_UPDATES:
        return None
    return (f"quickstart: {name} made only {updates} update{'' if updates == 1 else 's'} in {train_minutes:.1f} "
            f"training minutes, fewer than {MIN_UPDATES}: on this machine a {budget_minutes:g}-minute budget "
            f"does not train a model, so its BLEU means nothing (give more --minutes)")


def read_plan(save):
    path = os.path.join(save, PLAN)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def calibrate(name, train_cmd, save, train_seconds, updates=CALIBRATION_UPDATES):
    """The plan of one model: a short run measures seconds per update, the
    share gives the updates; written beside the model (a resumed run keeps
    it). The calibration's time counts against the share."""
    plan = read_plan(save)
    if plan is not None:
        return plan
    start = time.time()
    cal_dir = save + ".calibration"
    log = cal_dir + ".log"
    run([*train_cmd, "--save-dir", cal_dir, "--no-save", "--max-update", str(updates),
         "--lr-scheduler", "inverse_sqrt", "--warmup-updates", str(WARMUP_UPDATES),
         "--log-interval", str(updates // 3)], log_path=log, echo=False)
    with open(log, encoding="utf-8") as f:
        per_update = seconds_per_update(f.read(), updates // 3)
    if per_update is None:
        sys.exit(f"fairseq_ctx: error: the calibration run of {name} logged no timing; see {log}")
    left = train_seconds - (time.time() - start)
    left = max(left, 0.0)
    plan = {"seconds_per_update": round(per_update, 3), "updates": plan_updates(left, per_update),
            "train_seconds": round(left, 1)}
    os.makedirs(save, exist_ok=True)
    with open(os.path.join(save, PLAN), "w") as f:
        json.dump(plan, f)
    print(f"{name}: {per_update:.2f} s per update here, so {plan['updates']} updates in its "
          f"{left / 60:.3g} training minutes", flush=True)
    return plan


def trained_updates(checkpoint):
    """Updates a fairseq checkpoint has made (0 when there is none)."""
    if not os.path.exists(checkpoint):
        return 0
    import torch

    import fairseq_ctx

    fairseq_ctx.register()  # the allow-list for weights-only loading
    state = torch.load(checkpoint, map_location="cpu")
    return int(state.get("optimizer_history", [{}])[-1].get("num_updates", 0))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--archs", nargs="+", default=["transformer"],
                   help="architectures or named variants to train (default: transformer); variants: "
                   + ", ".join([*architectures.names(), *CONTROLS]))
    p.add_argument("--minutes", type=float, default=15.0,
                   help="time budget of the whole run, training and translating every architecture (default 15)")
    p.add_argument("--decode-minutes", type=float, default=2.0,
                   help="of the budget, minutes kept per architecture for translating the test set (default 2)")
    p.add_argument("--data", default=os.path.join(REPO, "data", "bible"), help="Bible corpus directory")
    p.add_argument("--out", default=os.path.join(REPO, "runs", "quickstart"), help="checkpoints, logs, results")
    p.add_argument("--calibration-updates", type=int, default=CALIBRATION_UPDATES,
                   help=f"updates of each architecture's speed calibration (default {CALIBRATION_UPDATES}; "
                        "timed from a third of them on)")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="OMP threads for training and decoding")
    opts = p.parse_args()
    if opts.calibration_updates < 3:
        p.error(f"--calibration-updates must be at least 3, got {opts.calibration_updates}")
    if opts.minutes <= 0 or opts.decode_minutes < 0:
        p.error("--minutes must be positive and --decode-minutes not negative")
    train_budget = budget_split(opts.minutes, opts.decode_minutes, len(opts.archs))
    if train_budget is None:
        p.error(f"--minutes {opts.minutes:g} leaves no training time after --decode-minutes "
                f"{opts.decode_minutes:g} for each of {len(opts.archs)} architectures")

    bin_dir, raw_dir = os.path.join(opts.data, "bin"), os.path.join(opts.data, "raw")
    spm_model = os.path.join(opts.data, "spm", "spm.model")
    if not os.path.exists(os.path.join(bin_dir, "dict.es.txt")):
        run(["bash", os.path.join(REPO, "scripts", "prepare-bible.sh"), "--dest", opts.data])
    refs = read_lines(os.path.join(raw_dir, "test.en"))
    os.makedirs(opts.out, exist_ok=True)
    os.environ["OMP_NUM_THREADS"] = str(opts.threads)
    print(f"quickstart: {opts.minutes:g} minutes in all: {train_budget:.3g} training minutes for each of "
          f"{len(opts.archs)} architecture(s), {opts.decode_minutes:g} for translating each", flush=True)

    rows, notes = [], []
    import sacrebleu

    run_start = time.time()
    for name in opts.archs:
        arch, model_flags, task_flags, extra_rows = resolve(name)
        save = os.path.join(opts.out, name)
        start = time.time()
        last = os.path.join(save, CHECKPOINT)
        train_cmd = [sys.executable, "-m", "fairseq_cli.train", bin_dir, "--user-dir", USER_DIR, "--arch", arch,
                     *SIZE, *TRAIN_FLAGS, *model_flags, *task_flags]
        plan = calibrate(name, train_cmd, save, train_budget * 60, opts.calibration_updates)
        if trained_updates(last) >= plan["updates"]:
            print(f"{name}: {last} has made its {plan['updates']} updates; decoding only", flush=True)
        else:  # fresh, or resumes an interrupted run from checkpoint_last.pt with the same plan
            run([*train_cmd, *schedule(plan["updates"]), "--save-dir", save,
                 "--stop-time-hours", str(plan["train_seconds"] / 3600)], log_path=save + ".train.log")
        train_minutes = training_minutes(last, fallback_seconds=time.time() - start)
        with open(save + ".train.log", encoding="utf-8") as f:
            train_log = f.read()
        params = int(re.search(r"num\. shared model params: ([\d,]+)", train_log).group(1).replace(",", ""))
        updates = trained_updates(last)
        note = too_few_updates(name, updates, train_minutes, opts.minutes)
        if note:
            print(note, flush=True)
            notes.append(note)
        for label, gen_flags in [(name, [])] + extra_rows:
            tag = re.sub(r"\W+", "_", label).strip("_")
            hyp_path = os.path.join(opts.out, tag + ".test.hyp")
            cmd = translate_command(bin_dir, raw_dir, spm_model, last, hyp_path, gen_flags)
            run(cmd, log_path=os.path.join(opts.out, tag + ".test.log"), echo=False)
            hyps = read_lines(hyp_path)
            if len(hyps) != len(refs):
                sys.exit(f"fairseq_ctx: error: {label} produced {len(hyps)} translations for {len(refs)} test "
                         f"sentences; see {hyp_path}")
            metric = sacrebleu.BLEU()
            bleu = metric.corpus_score(hyps, [refs])
            rows.append({"arch": label, "params": params, "train_minutes": round(train_minutes, 1),
                         "updates": updates, "bleu": round(bleu.score, 2), "checkpoint": last,
                         "translate": " ".join(cmd[2:]), "signature": str(metric.get_signature())})
            print(f"{label}: {bleu}", flush=True)

    with open(os.path.join(opts.out, "results.json"), "w") as f:
        json.dump(rows, f, indent=2)
    print(f"\n{'arch':<40}{'params':>10}{'train min':>11}{'updates':>9}{'BLEU':>7}")
    for r in rows:
        print(f"{r['arch']:<40}{r['params'] / 1e6:>9.2f}M{r['train_minutes']:>11.1f}{r['updates']:>9}{r['bleu']:>7.2f}")
    print(f"detokenized sacreBLEU on the test set ({len(refs)} sentences) of {CHECKPOINT}, translated as "
          f"`fairseq-ctx-translate ... {' '.join(DECODE_FLAGS)}`; {time.time() - run_start:.0f} s in all; "
          f"{rows[0]['signature']}")
    for note in notes:  # again under the table, where the numbers are read
        print(note)


if __name__ == "__main__":
    main()
