#!/usr/bin/env python3
"""Per-update time of fairseq-train's update under each attention-kernel policy.

Why: torch runs one of several SDPA kernels per attention call (flash,
memory-efficient, cuDNN, math), and NMT batches bring a new shape
(sentences x source length x target length) nearly every update. A kernel
that prepares itself per shape (cuDNN builds an execution plan) pays that
on every new shape, so its cost on variable-shape batches is not what a
benchmark on a repeated shape shows. This script measures it directly.

What: for each cell (size, model, precision, policy), in priority order
(``cells_of``):

* sizes ``base`` (each architecture's Base preset) and ``study`` (the
  study's d=128 size, ``fairseq_ctx.study.runs.SIZE``); ``toy`` (d=16, for
  a CPU rehearsal);
* models ``transformer`` (fairseq's, all its attention through torch's
  ``F.multi_head_attention_forward``), ``ctxsan`` and ``dc`` (the variants
  of ``fairseq_ctx/architectures.py``, their own attention through
  ``fairseq_ctx/modules/fused_attention.py``), the default; ``ctxenc``
  (the document task's context encoder) where asked for;
* precisions ``bf16`` and ``fp16`` as fairseq-train runs them (``--bf16``,
  ``--fp16``: FP16Optimizer, loss scaling for fp16), ``fp32``;
* policies (``fused_attention.POLICIES``): ``torch`` (torch's own choice),
  ``cudnn-last``, ``no-cudnn``, and each kernel forced (math the fallback).

one untimed update, then ``--updates`` updates on batches this process has
not run before (``fresh_ms``: new shapes, as in the first epoch), then the
same batches again (``seen_ms``: shapes seen, as in later epochs), timed
with the GPU synchronized, each a whole ``Trainer.train_step`` (forward,
backward, optimizer, as fairseq-train); then one more update under the
profiler records which kernels actually ran (``kernels``: forward calls
per kernel, ``<kernel>_backward``, ``calls`` = every SDPA call) and
``sdpa_state`` the switches and priority order in effect (``sdpa_state_after``:
after the updates; ``torch_cudnn_sdpa_env``: the variables torch read at
its first attention call, which decide whether it installs its cuDNN-first
order; this process settles that order before the first cell, so each
cell's order is the policy's). A ``ctxenc`` cell also runs its batches
without length groups (``one_pass_*``), as a paired comparison: where
real context tokens fill less than ``CONTEXT_MIN_FILL`` of the padded
context batch, ctxenc encodes the contexts in length groups
(``CtxEncEncoder._context_chunks``), which saves the padding's FLOPs at
the cost of more, smaller calls (docs/distributed-and-precision.md has
the CPU's numbers); on a GPU, where small calls are launch-bound, one
pass may be faster. Without groups the contexts go through the shared
layers in one batch, or together with the sources where that joint batch
wastes little (``JOINT_BATCH_MAX_WASTE``), as the model does for batches
it does not group. ``one_pass_fresh_ms``: the first run without groups,
after ``fresh_ms`` on the same batches (so only the context encoder's
shapes are new to it: this pair favours one pass); then each batch runs
in groups (``seen_ms``) and without (``one_pass_seen_ms``) in turn, the
fair pair. ``one_pass_kernels``: one profiled update without groups.
With ``--profile-steps`` each cell profiles one more update (``profile``;
a ctxenc cell also one without its groups, ``one_pass_profile``;
scripts/step_profile.py: the share of its wall time the GPU was busy, and
the host's time between operations and waiting for the GPU), a line each
below the table.
Every cell's JSON is written to ``--out`` the moment it is done
(``SIZE-MODEL-PRECISION-POLICY.json``): a run killed at a time limit keeps every finished cell. Cells already in
``--out`` are skipped (``--redo`` measures them again), so a second run
continues where the first stopped.

How: one child process runs the cells in order, keeping one model and
Trainer per (size, model, precision) and one batch iterator per (size,
precision, task) so that no batch is run twice except as ``seen`` (and
the ctxenc cells' ``one_pass_*``). torch settles
its priority order at its first SDPA call (on sm90/sm100 it may put cuDNN
first), so the child runs one tiny attention first and saves that state as
the ``torch`` policy. A child that dies (a CUDA error takes the process
with it) has its cell recorded as failed with the end of its stderr, and a
new child goes on with the next cell. ``--deadline-s``: no cell starts
unless the longest cell so far still fits before it.

Examples::

    # the 2-minute diagnosis on a GPU
    python3 scripts/speed_diagnosis.py data/bible/bin --out benchmarks/gpu/diagnosis --deadline-s 120
    # the CPU rehearsal of the same code at toy size
    python3 scripts/speed_diagnosis.py data/bible/bin --out /tmp/diag --device cpu --sizes toy \\
        --precisions fp32 --policies torch math --updates 2
    # the table of a directory of cells
    python3 scripts/speed_diagnosis.py --summary-of benchmarks/gpu/diagnosis
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
for path in (REPO, HERE):
    if path not in sys.path:
        sys.path.insert(0, path)
import benchmark  # noqa: E402  (this directory's; torch-free at import)
from fairseq_ctx import architectures  # noqa: E402  (torch-free)

SIZES = ("base", "study", "toy")
# updates in an epoch of the study's training data at its 4,096-token batches, one sentence an input (the
# landed runs' first epoch, benchmarks/study-bible-budget.json; tests/test_gpu_runbook.py checks it)
STUDY_EPOCH_UPDATES = 263
MODELS = ("transformer", "ctxsan", "dc", "ctxenc")
DEFAULT_MODELS = MODELS[:3]
PRECISIONS = ("bf16", "fp16", "fp32")
POLICY_NAMES = ("torch", "cudnn-last", "no-cudnn", "flash", "efficient", "cudnn", "math")  # fused_attention.POLICIES


def size_flags(size):
    if size == "base":
        return []
    if size == "toy":
        return list(architectures.TINY_FLAGS)
    from fairseq_ctx.study.runs import SIZE  # torch-free

    return list(SIZE)


def cells_of(opts):
    """Every cell, most informative first. First the two questions a first
    call must answer: the first size's transformer (Base: what every
    fairseq user runs) in the first precision under every policy (which
    kernel choice is fastest), then each other size's models in that
    precision under torch's own choice (the first policy given where torch
    is not among them: the study's time per update, which sizes a study
    call; with one size, its context models). Then the rest by size, the
    transformer before the context models, each precision and policy in
    the order given."""
    out = []
    for size in opts.sizes:
        for models in ([m for m in opts.models if m == "transformer"], [m for m in opts.models if m != "transformer"]):
            for model in models:
                for precision in opts.precisions:
                    for policy in opts.policies:
                        out.append({"size": size, "model": model, "precision": precision, "policy": policy})

    lead = "torch" if "torch" in opts.policies else opts.policies[0]

    def tier(cell):
        if cell["precision"] != opts.precisions[0]:
            return 2
        if cell["size"] == opts.sizes[0] and cell["model"] == "transformer":
            return 0
        # the other sizes' models under torch's choice (the only size's, where one is given)
        other = cell["size"] != opts.sizes[0] or len(opts.sizes) == 1
        return 1 if other and cell["policy"] == lead else 2
    return sorted(out, key=tier)  # stable: the order above within a tier


def cell_name(cell):
    return f"{cell['size']}-{cell['model']}-{cell['precision']}-{cell['policy']}.json"


# ---------------------------------------------------------------- the child
def run_cells(opts, cells):
    """In the child: each cell in turn, its JSON written when it is done."""
    import torch
    import torch.nn.functional as F
    from fairseq import utils

    import step_profile  # this directory's

    from fairseq_ctx.models.transformer_ctxenc import contexts_in_one_pass
    from fairseq_ctx.modules import fused_attention

    torch.manual_seed(1)
    if opts.threads:
        torch.set_num_threads(opts.threads)
    device = torch.device(opts.device)
    # torch settles its default priority order at its first SDPA call on the device
    x = torch.zeros(1, 1, 8, 8, device=device)
    F.scaled_dot_product_attention(x, x, x)
    torch_default = fused_attention.sdpa_state()
    # as torch read them at that first call (the cudnn-last policy sets them later, for runs of its own)
    cudnn_env = {var: os.environ.get(var) for var in fused_attention.CUDNN_DEPRIORITIZED_ENV}

    trainers, iterators = {}, {}

    def trainer_of(cell):
        key = (cell["size"], cell["model"], cell["precision"])
        if key not in trainers:
            variant = architectures.BY_NAME[cell["model"]]
            cli = benchmark.fairseq_cli_args(opts.data, variant.arch, size_flags(cell["size"]),
                                             [*variant.flags, *variant.task], opts.device, cell["precision"],
                                             opts.max_tokens)
            cfg = benchmark.parse_train_args(cli, opts.device)
            trainers[key] = benchmark.build_trainer(cfg)
        return trainers[key]

    def next_batch(cell, task, model):
        # the document task's batches carry contexts: an iterator per task
        key = (cell["size"], cell["precision"], architectures.BY_NAME[cell["model"]].task)
        while True:
            if key not in iterators:
                task.load_dataset("train")
                iterators[key] = task.get_batch_iterator(
                    dataset=task.dataset("train"), max_tokens=opts.max_tokens,
                    max_positions=utils.resolve_max_positions(task.max_positions(), model.max_positions()),
                    ignore_invalid_inputs=True, required_batch_size_multiple=1, seed=1, num_workers=0,
                ).next_epoch_itr(shuffle=True)
            try:
                return next(iterators[key])
            except StopIteration:  # a new epoch: its batches repeat shapes already seen
                del iterators[key]

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    steps = [0]  # train_step calls: a cell's calls less the updates they made are those fp16 skipped

    def step(trainer, sample):
        steps[0] += 1
        trainer.train_step([sample])

    def timed(trainer, sample):
        sync()
        start = time.perf_counter()
        step(trainer, sample)
        sync()
        return (time.perf_counter() - start) * 1000

    deadline = opts.deadline_at or float("inf")
    longest = 0.0
    for cell in cells:
        if time.time() + longest > deadline:
            print(f"speed_diagnosis: deadline reached before {cell_name(cell)}", file=sys.stderr, flush=True)
            return
        print(f"CELL_START {cell_name(cell)}", flush=True)
        t0 = time.time()
        task, model, _, trainer = trainer_of(cell)
        if cell["policy"] == "torch":
            fused_attention.restore_sdpa_state(torch_default)
        else:
            fused_attention.restore_sdpa_state(torch_default)
            fused_attention.apply_policy(cell["policy"])
        state = fused_attention.sdpa_state()
        updates_before, steps_before = trainer.get_num_updates(), steps[0]
        step(trainer, next_batch(cell, task, model))  # untimed: allocations, first-call set-up
        samples = [next_batch(cell, task, model) for _ in range(opts.updates)]
        fresh = [timed(trainer, s) for s in samples]
        extra = {}  # the cell's one-pass timings (ctxenc) and step profiles
        if cell["model"] == "ctxenc":
            with contexts_in_one_pass():
                extra["one_pass_fresh_ms"] = [timed(trainer, s) for s in samples]
            seen, extra["one_pass_seen_ms"] = [], []
            for s in samples:
                seen.append(timed(trainer, s))
                with contexts_in_one_pass():
                    extra["one_pass_seen_ms"].append(timed(trainer, s))
            with contexts_in_one_pass(), fused_attention.recorded_kernels() as one_pass_kernels:
                step(trainer, samples[0])
            sync()
            extra.update({k.replace("_ms", "_median_ms"): statistics.median(v) for k, v in extra.items()},
                          one_pass_kernels=dict(one_pass_kernels))
        else:
            seen = [timed(trainer, s) for s in samples]
        with fused_attention.recorded_kernels() as kernels:
            step(trainer, samples[0])
        sync()
        if opts.profile_steps:
            cuda = device.type == "cuda"
            extra["profile"] = step_profile.profile_or_error(lambda: step(trainer, samples[0]), cuda)
            if cell["model"] == "ctxenc":
                with contexts_in_one_pass():
                    extra["one_pass_profile"] = step_profile.profile_or_error(
                        lambda: step(trainer, samples[0]), cuda)
        state_after = fused_attention.sdpa_state()  # what the updates left: torch may reorder at a call
        result = dict(cell, fresh_ms=fresh, seen_ms=seen, fresh_median_ms=statistics.median(fresh),
                      seen_median_ms=statistics.median(seen),
                      tokens_per_update=statistics.mean(int(s["ntokens"]) for s in samples),
                      shapes=[[int(s["net_input"]["src_tokens"].size(0)), int(s["net_input"]["src_tokens"].size(1)),
                               int(s["target"].size(1))] for s in samples],
                      skipped_updates=steps[0] - steps_before - (trainer.get_num_updates() - updates_before),
                      **extra,
                      kernels=dict(kernels), sdpa_state=state, sdpa_state_after=state_after,
                      torch_default_state=torch_default,
                      params=sum(p.numel() for p in model.parameters()),
                      **benchmark.optimizer_record(trainer), device_name=(
                          torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"),
                      torch=torch.__version__, cuda=torch.version.cuda,
                      cudnn=torch.backends.cudnn.version() if device.type == "cuda" else None,
                      torch_cudnn_sdpa_env=cudnn_env,
                      seconds=time.time() - t0, max_tokens=opts.max_tokens, device=opts.device)
        benchmark.write_json_atomically(os.path.join(opts.out, cell_name(cell)), result)
        longest = max(longest, time.time() - t0)
        print(f"CELL_DONE {cell_name(cell)} fresh {result['fresh_median_ms']:.1f} ms seen "
              f"{result['seen_median_ms']:.1f} ms kernels {benchmark.kernel_summary(kernels)}", flush=True)


# ---------------------------------------------------------------- the parent
def summary(out_dir) -> str:
    """The Markdown table of every cell in ``out_dir``; below it, per
    study-size cell measured, the seconds a study run's updates take there
    (what a study call's deadline must hold, before start-up, validations,
    checkpoint saves and evaluation), per ctxenc cell its paired
    one-pass times, and per cell profiled (``--profile-steps``) a line of
    its profile."""
    from fairseq_ctx.study.runs import STUDY  # torch-free

    import step_profile  # this directory's

    rows, study, paired, profiles = [], [], [], []
    for name in sorted(os.listdir(out_dir)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(out_dir, name)) as f:
            c = json.load(f)
        order = {m: i for i, m in enumerate(SIZES + MODELS + PRECISIONS + POLICY_NAMES)}
        key = tuple(order.get(c[k], 99) for k in ("size", "model", "precision", "policy"))
        if "failed" in c:
            rows.append((key, f"| {c['size']} | {c['model']} | {c['precision']} | {c['policy']} | failed: "
                              f"{c['failed']} | | | |"))
            continue
        rows.append((key, f"| {c['size']} | {c['model']} | {c['precision']} | {c['policy']} "
                          f"| {c['fresh_median_ms']:.1f} | {c['seen_median_ms']:.1f} "
                          f"| {benchmark.kernel_summary(c['kernels'])} | {c['device_name']} |"))
        if "profile" in c:
            which = [("", c["profile"])] + ([("without length groups ", c["one_pass_profile"])]
                                            if "one_pass_profile" in c else [])
            profiles.append((key, "; ".join(f"{c['size']} {c['model']}, {c['precision']}, {c['policy']}, {label}"
                                            f"{step_profile.line(p)}" for label, p in which)))
        if "one_pass_seen_median_ms" in c:
            paired.append((key, f"{c['size']} {c['model']}, {c['precision']}, {c['policy']}: without length "
                                f"groups {c['one_pass_seen_median_ms']:.1f} ms per update against "
                                f"{c['seen_median_ms']:.1f} ms with them (seen shapes, the same batches in turn; "
                                f"its first run without them {c['one_pass_fresh_median_ms']:.1f} ms); SDPA calls "
                                f"in a profiled update {c['one_pass_kernels']['calls']} against "
                                f"{c['kernels']['calls']}"))
        if c["size"] == "study":
            # the first epoch's batches bring shapes new to the process, the later ones shapes it has seen
            first = min(STUDY_EPOCH_UPDATES, STUDY.budget)
            seconds = (first * c["fresh_median_ms"] + (STUDY.budget - first) * c["seen_median_ms"]) / 1000
            study.append((key, f"a study run ({STUDY.budget:,} updates), {c['model']}, {c['precision']}, "
                               f"{c['policy']}: about {seconds:.0f} s of updates ({first} at "
                               f"{c['fresh_median_ms']:.1f} ms, new shapes; the rest at {c['seen_median_ms']:.1f} ms)"))
    head = ["| size | model | precision | SDPA policy | ms per update, new shapes | ms per update, seen shapes "
            "| attention kernels that ran (forward + backward calls) | device |", "|---|---|---|---|---|---|---|---|"]
    plan = ["", *(line for _, line in sorted(study))] if study else []
    chunks = ["", *(line for _, line in sorted(paired))] if paired else []
    steps = ["", *(line for _, line in sorted(profiles))] if profiles else []
    return "\n".join(head + [row for _, row in sorted(rows)] + plan + chunks + steps) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", nargs="?", help="binarized data directory (fairseq-preprocess output, joined dictionary)")
    p.add_argument("--out", help="directory of the cells' JSON files (created)")
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu (a rehearsal)")
    p.add_argument("--sizes", nargs="+", choices=SIZES, default=["base", "study"])
    p.add_argument("--models", nargs="+", choices=MODELS, default=list(DEFAULT_MODELS))
    p.add_argument("--precisions", nargs="+", choices=PRECISIONS, default=["bf16", "fp16"])
    p.add_argument("--policies", nargs="+", choices=POLICY_NAMES, default=list(POLICY_NAMES))
    p.add_argument("--updates", type=int, default=6, help="timed updates on new shapes (then again on seen ones)")
    p.add_argument("--profile-steps", action="store_true",
                   help="profile one more update of each cell, and of a ctxenc cell one without length groups "
                        "(scripts/step_profile.py; below the table)")
    p.add_argument("--max-tokens", type=int, default=4096)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--deadline-s", type=float, default=0.0,
                   help="start no cell after this many seconds from now, nor one that would end after them by "
                        "the longest cell so far (0: none)")
    p.add_argument("--redo", action="store_true", help="measure the cells already in --out again")
    p.add_argument("--summary-of", metavar="DIR", help="print the table of the cells in DIR, and run nothing")
    # internal: the child
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--deadline-at", type=float, default=0.0, help=argparse.SUPPRESS)
    opts = p.parse_args()

    if opts.summary_of:
        if not os.path.isdir(opts.summary_of):
            p.error(f"--summary-of {opts.summary_of}: no such directory")
        print(summary(opts.summary_of), end="")
        return
    if opts.data is None or not os.path.isdir(opts.data):
        p.error(f"data directory not found: {opts.data}")
    if not opts.out:
        p.error("--out DIR is required (each cell's JSON goes there)")
    if opts.updates < 1:
        p.error("--updates must be at least 1")
    if opts.child:
        with open(opts.child) as f:
            run_cells(opts, json.load(f))
        return
    os.makedirs(opts.out, exist_ok=True)
    deadline_at = time.time() + opts.deadline_s if opts.deadline_s else 0.0
    todo = [c for c in cells_of(opts) if opts.redo or not os.path.exists(os.path.join(opts.out, cell_name(c)))]
    skipped = len(cells_of(opts)) - len(todo)
    if skipped:
        print(f"speed_diagnosis: {skipped} cells already in {opts.out}, skipped", file=sys.stderr)
    # every policy is set per cell, from torch's own state: the child registers the plugin
    # under "torch", which touches nothing (the plugin's default would disable cuDNN first)
    env = {**os.environ, "FAIRSEQ_CTX_SDPA": "torch"}
    run_id = benchmark.new_run_id()
    while todo and not (deadline_at and time.time() >= deadline_at):
        cells_file = os.path.join(opts.out, f".cells-{os.getpid()}.todo")  # not a cell: no .json
        with open(cells_file, "w") as f:
            json.dump(todo, f)
        cmd = [sys.executable, os.path.abspath(__file__), os.path.abspath(opts.data), "--out",
               os.path.abspath(opts.out), "--device", opts.device, "--max-tokens", str(opts.max_tokens),
               "--updates", str(opts.updates), "--threads", str(opts.threads), "--child", cells_file,
               "--deadline-at", str(deadline_at)] + (["--profile-steps"] if opts.profile_steps else [])
        # the child's log to a file (a pipe nobody reads until the end would fill and stall it), one
        # per run: --out is carried back from calls on several machines into one directory
        log_path = os.path.join(opts.out, f"child-{run_id}.log")
        with open(log_path, "a") as log:
            start = log.tell()
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, cwd=REPO, env=env)
            current = None
            for line in proc.stdout:
                if line.startswith("CELL_START "):
                    current = line.split()[1]
                elif line.startswith("CELL_DONE "):
                    print(line.rstrip(), flush=True)
                    current = None
            proc.wait()
        with open(log_path) as log:
            log.seek(start)
            err = log.read()
        os.remove(cells_file)
        done = {c for c in os.listdir(opts.out)}
        if proc.returncode != 0 and current is not None:
            # the cell that was running when the child died: recorded, and the next child starts after it
            cell = next(c for c in todo if cell_name(c) == current)
            benchmark.write_json_atomically(os.path.join(opts.out, current), dict(
                cell, failed=f"child exited with {proc.returncode}", stderr_tail=err[-3000:]))
            print(f"speed_diagnosis: {current} failed (exit {proc.returncode}):\n{err[-1500:]}", file=sys.stderr)
            done.add(current)
        elif proc.returncode != 0:
            sys.exit(f"speed_diagnosis: the child failed before its first cell:\n{err[-3000:]}")
        todo = [c for c in todo if cell_name(c) not in done]
        if proc.returncode == 0:
            break  # the child stopped at the deadline, or did everything
    if todo:
        print(f"speed_diagnosis: {len(todo)} cells not run (deadline); run again to continue", file=sys.stderr)
    print("\n" + summary(opts.out), end="")


if __name__ == "__main__":
    main()
