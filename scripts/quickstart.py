#!/usr/bin/env python3
"""Quickstart: prepare the Bible corpus, train small models on CPU for a
fixed number of updates, translate the test set as the README's
fairseq-ctx-translate line does and print detokenized sacreBLEU.

    bash scripts/quickstart.sh                      # plain transformer, 840 updates
    bash scripts/quickstart.sh --archs transformer transformer_ctxenc

Choices, and why:

* **A fixed number of updates** (``--updates``, default ``UPDATES``), the
  same for every architecture and every machine: with a time budget the
  result would be the machine's speed (a slower machine makes fewer updates
  and gets a worse model), and equal time is not equal training. A machine's speed
  changes only how long the run takes.
* **The time, estimated before training.** A short calibration run of each
  architecture (``--calibration-updates``, timed from a third of them on)
  measures its seconds per update on this machine; the quickstart prints
  each model's and the total training time it expects before it trains, and
  the time each took after.
* **The study's model** (``fairseq_ctx/study/runs.py``: 3+3 layers, d=128,
  its recipe) trained to the end of a learning-rate schedule: the rate warms
  up over a quarter of the updates (at most the study's 400) and decays
  linearly to zero at the last one (a model whose rate has not decayed is
  markedly worse at the same number of updates). The schedule is kept beside
  the model (``PLAN``), so an interrupted run resumes it, and a run with
  another ``--updates`` stops with one line instead of mixing two schedules.
* **Everything checked before training**: every ``--archs`` name (a
  variant of ``fairseq_ctx/architectures.py``, a control below, or an
  ``--arch`` fairseq knows) and the corpus directory (``--data`` that does
  not exist is prepared there with ``scripts/prepare-bible.sh``; one that
  exists must hold its outputs), each with one ``fairseq_ctx: error:`` line.
* **The translate line**: each model is translated from its
  ``checkpoint_last.pt`` with exactly the command the README shows (printed
  before it runs: the same file, the same BLEU).
* **Threads** (``--threads``): by default the cores that are idle when the
  quickstart starts (:func:`fairseq_ctx.cli.idle_cores`), not every core: a
  run whose threads share a core with another process waits for that core at
  every step. Training children preload jemalloc where it is installed
  (:mod:`fairseq_ctx.allocator`).

With fewer than ``MIN_UPDATES`` updates, one line says that the BLEU means
nothing. Training shows fairseq's progress log; the last lines are a table:
arch, parameters, train time, updates, BLEU.
"""
import argparse
import difflib
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

from fairseq_ctx.allocator import child_env  # noqa: E402  (torch-free)
from fairseq_ctx.cli import idle_cores  # noqa: E402  (torch-free)
from fairseq_ctx.errors import ERROR_PREFIX  # noqa: E402
from fairseq_ctx.study.runs import RECIPE, SIZE  # noqa: E402  (torch-free)

# Updates of every model unless --updates says otherwise: the study's baseline
# made 840 updates in this schedule and scored 13.1 BLEU on the test set
# (2026-11-26, the README), past its first descent and about 11 minutes at
# the 0.8 s an update of 2 quiet cores.
UPDATES = 840
# Below this many updates the model is still in its first, steep descent (the
# study's baseline under a 2,000-update schedule: validation loss 6.78 at 400
# updates, 5.67 at 800, 4.83 at 2,000), so its BLEU says nothing.
MIN_UPDATES = 400
# The study's warm-up; shorter schedules warm up over a quarter of their updates.
WARMUP_UPDATES = 400
# The calibration run: updates made, and the first one timed (the first ones
# include start-up work: data loading, allocator growth).
CALIBRATION_UPDATES = 30  # --calibration-updates; timed from a third of them on
# The README's translate line (README.md, "Quickstart"; docs/translate.md): the
# quickstart decodes with exactly these flags, so its BLEU is the one a reader
# gets by running that line on the same checkpoint.
DECODE_FLAGS = ["--beam", "4", "--max-len-a", "1.5", "--max-len-b", "10"]
CHECKPOINT = "checkpoint_last.pt"
# The plan of a model (its updates, its calibrated speed), kept beside it so
# that a resumed run keeps its schedule.
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
        # unbuffered (or fairseq's progress arrives in 8 KB chunks through the
        # pipe), jemalloc where installed: every training entry point's children
        env = child_env()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO, env=env)
        for line in proc.stdout:
            log.write(line)
            # fairseq's progress (train_inner/train/valid lines) and errors; the rest goes to the log.
            if echo and re.search(r"\| (train_inner|train|valid) \||done training|Error|error:", line):
                sys.stdout.write(line)
                sys.stdout.flush()
        if proc.wait() != 0:
            sys.exit(f"{ERROR_PREFIX}command failed (exit {proc.returncode}); see {log_path}")


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


def too_few_updates(updates):
    """The one line printed when ``--updates`` is too few to train a model, else None."""
    if updates >= MIN_UPDATES:
        return None
    return (f"quickstart: {updates} update{'' if updates == 1 else 's'} (--updates) are fewer than {MIN_UPDATES}: "
            f"the models are still in their first descent, so their BLEU means nothing (default: {UPDATES})")


TABLE_HEAD = f"{'arch':<40}{'params':>10}{'train min':>11}{'updates':>9}{'BLEU':>7}"
_ROW = re.compile(r"^(\S+) +([\d.]+)M +([\d.]+) +(\d+) +([\d.]+)$", re.M)


def format_row(r):
    """A row of the closing table (under :data:`TABLE_HEAD`)."""
    return f"{r['arch']:<40}{r['params'] / 1e6:>9.2f}M{r['train_minutes']:>11.1f}{r['updates']:>9}{r['bleu']:>7.2f}"


def read_table(text):
    """The closing table's rows as printed in ``text`` (``scripts/newcomer.py``
    records them), the inverse of :func:`format_row` to its rounding."""
    return [dict(arch=a, params_m=float(p), train_minutes=float(t), updates=int(u), bleu=float(b))
            for a, p, t, u, b in _ROW.findall(text)]


def estimate(name, seconds_per_update, updates):
    """The line printed before training: a model's measured speed and the time its updates take."""
    return (f"{name}: {seconds_per_update:.2f} s per update here, so its {updates} updates take about "
            f"{minutes(seconds_per_update * updates)}")


def minutes(seconds):
    return f"{seconds / 60:.1f} minutes" if seconds < 5940 else f"{seconds / 3600:.1f} hours"


def read_plan(save):
    path = os.path.join(save, PLAN)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def calibrate(name, train_cmd, save, updates, calibration_updates=CALIBRATION_UPDATES):
    """The plan of one model: ``updates`` and the seconds per update a short
    run measures; written beside the model, so that a resumed run keeps it.
    A plan of another number of updates stops with one line."""
    plan = read_plan(save)
    if plan is not None:
        if plan["updates"] != updates:
            sys.exit(f"{ERROR_PREFIX}--updates {updates}: {save} holds {name} trained to a schedule of "
                     f"{plan['updates']} updates; move it away (or pass --updates {plan['updates']})")
        return plan
    cal_dir = save + ".calibration"
    log = cal_dir + ".log"
    run([*train_cmd, "--save-dir", cal_dir, "--no-save", "--max-update", str(calibration_updates),
         "--lr-scheduler", "inverse_sqrt", "--warmup-updates", str(WARMUP_UPDATES),
         "--log-interval", str(calibration_updates // 3)], log_path=log, echo=False)
    with open(log, encoding="utf-8") as f:
        per_update = seconds_per_update(f.read(), calibration_updates // 3)
    if per_update is None:
        sys.exit(f"{ERROR_PREFIX}the calibration run of {name} logged no timing; see {log}")
    plan = {"seconds_per_update": round(per_update, 3), "updates": updates}
    os.makedirs(save, exist_ok=True)
    with open(os.path.join(save, PLAN), "w") as f:
        json.dump(plan, f)
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


def fairseq_archs():
    """Every ``--arch`` fairseq knows with this plugin registered, read in a
    child process (importing fairseq here would keep it in memory beside
    every training child)."""
    code = ("import fairseq_ctx; fairseq_ctx.register(); from fairseq.models import ARCH_MODEL_REGISTRY; "
            "print(' '.join(sorted(ARCH_MODEL_REGISTRY)))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    if proc.returncode != 0:
        sys.exit(f"{ERROR_PREFIX}cannot list fairseq's architectures (is fairseq installed? "
                 f"bash scripts/install.sh): {proc.stderr.strip().splitlines()[-1:]}")
    return proc.stdout.split()


def check_archs(names, known_archs):
    """One line for the first ``--archs`` name that is neither a variant, a
    control nor an ``--arch`` of ``known_archs``, else None."""
    variants = [*architectures.names(), *CONTROLS]
    for name in names:
        if name in variants or name in known_archs:
            continue
        close = difflib.get_close_matches(name, list(dict.fromkeys([*variants, *known_archs])), n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        return (f"--archs {name}: no such variant or architecture{hint}; variants: {', '.join(variants)}, "
                "or any --arch of fairseq-train")
    return None


# What scripts/prepare-bible.sh writes into its --dest; a --data directory with
# none of them is not a corpus directory (a typo, or bin/ itself).
BIBLE_OUTPUTS = ("bin", "raw", "spm", "source", "stats.json")


def check_data(data):
    """One line when ``--data`` exists but is not (or not yet) a corpus
    directory that prepare-bible.sh can finish, else None; a missing
    directory is prepared."""
    if not os.path.exists(data):
        return None
    if not os.path.isdir(data):
        return f"--data {data}: not a directory (the Bible corpus directory, e.g. data/bible)"
    if os.listdir(data) and not any(os.path.exists(os.path.join(data, name)) for name in BIBLE_OUTPUTS):
        return (f"--data {data}: no bin/, raw/ or spm/ in it: give the corpus directory that "
                "scripts/prepare-bible.sh writes (data/bible), or a new one to prepare it there")
    return None


def check_corpus(data):
    """One line naming the first file the quickstart reads that the prepared
    corpus lacks, else None."""
    for rel in ("bin/dict.es.txt", "bin/dict.en.txt", "raw/test.es", "raw/test.en", "raw/test.docids"):
        if not os.path.isfile(os.path.join(data, rel)):
            return f"--data {data}: missing {rel} (prepare it: bash scripts/prepare-bible.sh --dest {data})"
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--archs", nargs="+", default=["transformer"],
                   help="architectures or named variants to train (default: transformer); variants: "
                   + ", ".join([*architectures.names(), *CONTROLS]))
    p.add_argument("--updates", type=int, default=UPDATES,
                   help=f"updates of every model, the end of its learning-rate schedule (default {UPDATES})")
    p.add_argument("--data", default=os.path.join(REPO, "data", "bible"),
                   help="Bible corpus directory (prepared there when it does not exist)")
    p.add_argument("--out", default=os.path.join(REPO, "runs", "quickstart"), help="checkpoints, logs, results")
    p.add_argument("--calibration-updates", type=int, default=CALIBRATION_UPDATES,
                   help=f"updates of each architecture's speed calibration (default {CALIBRATION_UPDATES}; "
                        "timed from a third of them on)")
    p.add_argument("--threads", type=int,
                   help="threads for training and decoding (default: the cores idle when the quickstart starts)")
    opts = p.parse_args()
    if opts.calibration_updates < 3:
        p.error(f"--calibration-updates must be at least 3, got {opts.calibration_updates}")
    if opts.updates < 1:
        p.error(f"--updates must be at least 1, got {opts.updates}")
    if opts.threads is not None and opts.threads < 1:
        p.error(f"--threads must be at least 1, got {opts.threads}")
    # every name and path before anything is prepared or trained
    variants = {*architectures.names(), *CONTROLS}
    # fairseq's --arch list costs an import of fairseq: only for a name that is no variant
    known = fairseq_archs() if any(name not in variants for name in opts.archs) else []
    problem = check_archs(opts.archs, known) or check_data(opts.data)
    if problem:
        sys.exit(ERROR_PREFIX + problem)
    threads = opts.threads or idle_cores()

    bin_dir, raw_dir = os.path.join(opts.data, "bin"), os.path.join(opts.data, "raw")
    spm_model = os.path.join(opts.data, "spm", "spm.model")
    if not os.path.exists(os.path.join(bin_dir, "dict.es.txt")):
        run(["bash", os.path.join(REPO, "scripts", "prepare-bible.sh"), "--dest", opts.data])
    problem = check_corpus(opts.data)
    if problem:
        sys.exit(ERROR_PREFIX + problem)
    refs = read_lines(os.path.join(raw_dir, "test.en"))
    os.makedirs(opts.out, exist_ok=True)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    note = too_few_updates(opts.updates)
    if note:
        print(note, flush=True)

    import sacrebleu

    run_start = time.time()
    # calibrate every model first: the whole run's training time is printed before any training
    jobs = []
    for name in opts.archs:
        arch, model_flags, task_flags, extra_rows = resolve(name)
        save = os.path.join(opts.out, name)
        train_cmd = [sys.executable, "-m", "fairseq_cli.train", bin_dir, "--user-dir", USER_DIR, "--arch", arch,
                     *SIZE, *TRAIN_FLAGS, *model_flags, *task_flags]
        plan = calibrate(name, train_cmd, save, opts.updates, opts.calibration_updates)
        jobs.append((name, save, train_cmd, plan, extra_rows))
    left = 0.0
    for name, save, _, plan, _ in jobs:
        done = trained_updates(os.path.join(save, CHECKPOINT))
        print(estimate(name, plan["seconds_per_update"], plan["updates"])
              + (f" ({done} made already)" if done else ""), flush=True)
        left += plan["seconds_per_update"] * max(plan["updates"] - done, 0)
    print(f"quickstart: {len(jobs)} model(s) of {opts.updates} updates on {threads} thread(s): about "
          f"{minutes(left)} of training from now, then translating the test set with each", flush=True)

    rows = []
    for name, save, train_cmd, plan, extra_rows in jobs:
        start = time.time()
        last = os.path.join(save, CHECKPOINT)
        if trained_updates(last) >= plan["updates"]:
            print(f"{name}: {last} has made its {plan['updates']} updates; decoding only", flush=True)
        else:  # fresh, or resumes an interrupted run from checkpoint_last.pt with the same plan
            run([*train_cmd, *schedule(plan["updates"]), "--save-dir", save], log_path=save + ".train.log")
        train_minutes = training_minutes(last, fallback_seconds=time.time() - start)
        with open(save + ".train.log", encoding="utf-8") as f:
            train_log = f.read()
        params = int(re.search(r"num\. shared model params: ([\d,]+)", train_log).group(1).replace(",", ""))
        updates = trained_updates(last)
        for label, gen_flags in [(name, [])] + extra_rows:
            tag = re.sub(r"\W+", "_", label).strip("_")
            hyp_path = os.path.join(opts.out, tag + ".test.hyp")
            cmd = translate_command(bin_dir, raw_dir, spm_model, last, hyp_path, gen_flags)
            run(cmd, log_path=os.path.join(opts.out, tag + ".test.log"), echo=False)
            hyps = read_lines(hyp_path)
            if len(hyps) != len(refs):
                sys.exit(f"{ERROR_PREFIX}{label} produced {len(hyps)} translations for {len(refs)} test "
                         f"sentences; see {hyp_path}")
            metric = sacrebleu.BLEU()
            bleu = metric.corpus_score(hyps, [refs])
            rows.append({"arch": label, "params": params, "train_minutes": round(train_minutes, 1),
                         "updates": updates, "bleu": round(bleu.score, 2), "checkpoint": last,
                         "seconds_per_update_calibrated": plan["seconds_per_update"],
                         "translate": " ".join(cmd[2:]), "signature": str(metric.get_signature())})
            print(f"{label}: {bleu}", flush=True)

    with open(os.path.join(opts.out, "results.json"), "w") as f:
        json.dump(rows, f, indent=2)
    print("\n" + TABLE_HEAD)
    for r in rows:
        print(format_row(r))
    print(f"detokenized sacreBLEU on the test set ({len(refs)} sentences) of {CHECKPOINT}, translated as "
          f"`fairseq-ctx-translate ... {' '.join(DECODE_FLAGS)}`; {time.time() - run_start:.0f} s in all; "
          f"{rows[0]['signature']}")
    if note:  # again under the table, where the numbers are read
        print(note)


if __name__ == "__main__":
    main()
