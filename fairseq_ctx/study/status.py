"""``python3 -m fairseq_ctx.study --stage status``: where the study stands.

Read from the study's output directory alone: no process is started, no file
written and no lock taken, so it can run at any time beside the training
processes without one of them ever seeing it (taking a run's lock, even for
an instant, could make a training process skip that run).

Per run: its state (evaluated, trained, training and by which process,
stopped part-way, waiting for its warm start, not started), the updates
made (the last ``num_updates`` its newest log shows), the update an
interrupted run resumes from (its newest checkpoint), and the CPU minutes of
its finished epochs. Then what training remains in CPU hours: each run's
remaining updates times the CPU seconds an update took in its own finished
epochs, or, for a run not yet started, in the finished epochs of the runs of
its architecture and model flags (of all runs when none has trained yet). A
run whose budget or rate is not known yet is counted, not guessed.
"""
import os
import re
from typing import Dict, List, Optional, Sequence

from fairseq_ctx.study.runs import Run, Settings
from fairseq_ctx.study.train import StudyError, done_marker, history, is_trained, run_dir, settings_of

# fairseq's progress lines ("num_updates=2680") and epoch summaries ("| num_updates 2630")
_UPDATES_RE = re.compile(r"num_updates[= ](\d+)")
_CHECKPOINT_RE = re.compile(r"checkpoint_\d+_(\d+)\.pt")


def logged_updates(out: str, run: Run) -> int:
    """The last update count in the run's newest epoch log that has one (a
    log just started shows none yet); 0 without logs."""
    logs = os.path.join(run_dir(out, run), "logs")
    names = sorted((name for name in os.listdir(logs) if re.fullmatch(r"epoch-\d+\.log", name)),
                   reverse=True) if os.path.isdir(logs) else []
    for name in names:
        with open(os.path.join(logs, name), encoding="utf-8", errors="replace") as f:
            found = _UPDATES_RE.findall(f.read())
        if found:
            return int(found[-1])
    return 0


def resume_point(out: str, run: Run, hist: List[Dict]) -> int:
    """The update an interrupted run continues from: its newest interval
    checkpoint or the end of its last finished epoch, whichever is later."""
    path = run_dir(out, run)
    names = os.listdir(path) if os.path.isdir(path) else []
    interval = [int(m.group(1)) for name in names if (m := _CHECKPOINT_RE.fullmatch(name))]
    return max(interval + [hist[-1]["updates"] if hist else 0])


def lock_holder(path: str, locks: str = "/proc/locks") -> Optional[int]:
    """The pid holding a ``flock`` on ``path``, read from Linux's lock table
    (which lists the lock's device and inode), so asking takes no lock;
    None when no process holds one or the table cannot be read."""
    try:
        st = os.stat(path)
        with open(locks) as f:
            table = f.read().splitlines()
    except OSError:
        return None
    for line in table:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 29969 fe:00:5457222 0 EOF"
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[4].isdigit():
            major, minor, inode = fields[5].split(":")
            if (int(major, 16), int(minor, 16), int(inode)) == (os.major(st.st_dev), os.minor(st.st_dev),
                                                                st.st_ino):
                return int(fields[4])
    return None


def run_status(out: str, run: Run, settings: Settings) -> Dict:
    """One run's row: name, state, updates, budget (None: not known yet),
    resumes_from, cpu_seconds and rate (CPU seconds an update, both of its
    finished epochs; rate None before the first) and pid (the process
    training it, if any)."""
    from fairseq_ctx.study.evaluate import is_evaluated

    hist = history(out, run)
    try:
        budget = settings_of(run, settings, out).budget
    except StudyError:
        budget = None  # scaled by epoch lengths that are not all known yet
    row = {"name": run.name, "budget": budget, "updates": max(logged_updates(out, run),
                                                              hist[-1]["updates"] if hist else 0),
           "resumes_from": resume_point(out, run, hist), "cpu_seconds": hist[-1]["train_seconds"] if hist else 0.0,
           "pid": lock_holder(os.path.join(run_dir(out, run), "train.lock")),
           # CPU seconds an update took in its finished epochs
           "rate": hist[-1]["train_seconds"] / hist[-1]["updates"] if hist and hist[-1]["train_seconds"] > 0 else None}
    try:
        trained = is_trained(out, run, settings if budget is not None else None)
    except StudyError as e:  # trained to another budget
        return dict(row, state=f"refused: {e}")
    if trained:
        import json

        with open(done_marker(out, run)) as f:
            done = json.load(f)
        row.update(updates=done["updates"], resumes_from=done["updates"], cpu_seconds=done["train_seconds"])
        row["state"] = "evaluated" if is_evaluated(out, run) else "trained"
    elif row["pid"] is not None:
        row["state"] = f"training (pid {row['pid']})"
    elif os.path.isdir(os.path.join(run_dir(out, run), "logs")) and os.listdir(os.path.join(run_dir(out, run), "logs")):
        row["state"] = "stopped (resumes with the same command)"
    elif run.warm_start and not os.path.exists(done_marker(out, Run(run.warm_start, ""))):
        row["state"] = f"waits for {run.warm_start}"
    else:
        row["state"] = "not started"
    return row


def remaining_cpu_seconds(rows: Sequence[Dict], runs: Sequence[Run]):
    """(CPU seconds of training left over the unfinished runs whose budget
    and rate are known, the names of those whose are not)."""
    def kind(run):
        return run.arch, tuple(run.model_flags), tuple(run.flags)

    rates: Dict[tuple, List[float]] = {}
    for row, run in zip(rows, runs):
        if row["rate"] is not None:
            rates.setdefault(kind(run), []).append(row["rate"])
    every = [rate for values in rates.values() for rate in values]
    left, unknown = 0.0, []
    for row, run in zip(rows, runs):
        if row["state"] in ("evaluated", "trained"):
            continue
        alike = rates.get(kind(run)) or every
        rate = row["rate"] if row["rate"] is not None else (sum(alike) / len(alike) if alike else None)
        if row["budget"] is None or rate is None:
            unknown.append(run.name)
            continue
        left += max(0, row["budget"] - row["resumes_from"]) * rate
    return left, unknown


def report(out: str, runs: Sequence[Run], settings: Settings) -> str:
    """The table and its summary lines, as ``--stage status`` prints them."""
    rows = [run_status(out, run, settings) for run in runs]
    width = max([len("run")] + [len(r["name"]) for r in rows])
    lines = [f"{'run':<{width}}  {'updates':>11}  {'resumes at':>10}  {'CPU min':>7}  state"]
    for r in rows:
        budget = "?" if r["budget"] is None else str(r["budget"])
        lines.append(f"{r['name']:<{width}}  {str(r['updates']) + '/' + budget:>11}  {r['resumes_from']:>10}  "
                     f"{r['cpu_seconds'] / 60:>7.1f}  {r['state']}")
    trained = sum(r["state"] in ("evaluated", "trained") for r in rows)
    evaluated = sum(r["state"] == "evaluated" for r in rows)
    training = sum(r["state"].startswith("training") for r in rows)
    lines.append(f"{trained} of {len(rows)} runs trained ({evaluated} evaluated), {training} training now")
    left, unknown = remaining_cpu_seconds(rows, runs)
    counted = len(rows) - trained - len(unknown)
    if counted:
        lines.append(f"training left: about {left / 3600:.1f} CPU hours for {counted} runs at the rates measured so "
                     f"far" + (f"; not counted, budget or rate not known yet: {', '.join(unknown)}" if unknown else ""))
    elif unknown:
        lines.append(f"training left: not known yet (no finished epoch gives a rate, or no budget): {', '.join(unknown)}")
    return "\n".join(lines)
