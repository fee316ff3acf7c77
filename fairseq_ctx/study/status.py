"""``python3 -m fairseq_ctx.study --stage status``: where the study stands.

Read from the study's output directory and its results file: no process is
started, no file written and no lock taken, so it can run at any time beside
the training processes without one of them ever seeing it (taking a run's
lock, even for an instant, could make a training process skip that run).
A run whose record is in the results (it landed, in this session or an
earlier one) but which has not trained on this machine counts as trained and
evaluated, since training skips it; where a run to train warm-starts from
it and its average is not shipped (train.shipped_average), it is trained
again first and counted in the training left.

Per run: its state (evaluated, trained, landed and not on this machine,
landed and trained again first as a warm start, trained again (its landed
record kept), training and by which process, stopped part-way, waiting for
its warm start, not started, refused: trained to another budget), the updates made (the last ``num_updates`` of its newest
log that has one), the update an interrupted run resumes from (the last
checkpoint fairseq logged saving or loading: ``checkpoint_last.pt`` is
written before that line), and the CPU minutes of its finished epochs. Then
what training remains in CPU hours: each run's remaining updates times the
CPU seconds an update took in its own finished epochs, else the mean over
the runs of its kind (architecture, model and task flags), else of its
architecture, else of every run. A run whose budget (concatenation at equal
data, before both epoch lengths are known) or rate is not known yet is named,
not guessed.
"""
import os
import re
from typing import Dict, List, Optional, Sequence, Tuple

from fairseq_ctx.study.runs import Run, Settings
from fairseq_ctx.study.train import (StudyError, done_marker, has_landed, history, is_trained, read_done, run_dir,
                                     settings_of, shipped_average, trained_again, warm_starts_wanted)

# fairseq's progress lines ("num_updates=2680") and epoch summaries ("| num_updates 2630")
_UPDATES_RE = re.compile(r"num_updates[= ](\d+)")
# checkpoint_utils logs these after checkpoint_last.pt is written / once it is loaded
_CHECKPOINT_RE = re.compile(r"(?:Saved|Loaded) checkpoint \S+ \(epoch \d+ @ (\d+) updates")
# lock_holder's answer when the lock table cannot be read
UNKNOWN = -1
# the state of a run that landed and has not trained on this machine
LANDED = "landed (its record is in the results; not on this machine)"
# a landed run trained again here as a warm start (fairseq_ctx.study.train.trained_again)
AGAIN = "trained again for a warm start (its landed record is kept)"
# a trained run whose evaluation another process is writing (its eval.lock), "... (pid N)"
EVALUATING = "trained, being evaluated"
# the states of a run whose training is over
FINISHED = ("evaluated", "trained", LANDED, AGAIN)


def finished(state: str) -> bool:
    return state in FINISHED or state.startswith(EVALUATING)


def read_logs(out: str, run: Run) -> Tuple[int, int]:
    """(the last update count of the newest epoch log that has one, the
    updates of the last checkpoint saved or loaded in any log): 0 where
    there is none."""
    logs = os.path.join(run_dir(out, run), "logs")
    names = sorted(name for name in os.listdir(logs) if re.fullmatch(r"epoch-\d+\.log", name)) \
        if os.path.isdir(logs) else []
    updates, checkpoint = 0, 0
    for name in names:  # oldest first: a resumed epoch's log is written anew
        with open(os.path.join(logs, name), encoding="utf-8", errors="replace") as f:
            text = f.read()
        found = _UPDATES_RE.findall(text)
        updates = int(found[-1]) if found else updates
        saved = _CHECKPOINT_RE.findall(text)
        checkpoint = int(saved[-1]) if saved else checkpoint
    return updates, checkpoint


def lock_holder(path: str, locks: str = "/proc/locks") -> Optional[int]:
    """The pid holding a ``flock`` on ``path``, read from Linux's lock table
    (which lists the lock's device and inode), so asking takes no lock;
    None when no process holds one, UNKNOWN when the table cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    try:
        with open(locks) as f:
            table = f.read().splitlines()
    except OSError:
        return UNKNOWN
    want = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    for line in table:
        # "1: FLOCK  ADVISORY  WRITE 29969 fe:00:5457222 0 EOF"; a waiter's line has "->" after the number
        fields = line.split()
        if len(fields) < 6 or fields[1] != "FLOCK" or not fields[4].isdigit():
            continue
        try:
            major, minor, inode = fields[5].split(":")
            if (int(major, 16), int(minor, 16), int(inode)) == want:
                return int(fields[4])
        except ValueError:
            continue
    return None


def run_status(out: str, run: Run, settings: Settings, landed: Optional[Dict[str, Dict]] = None,
               warm_start_of: Sequence[str] = ()) -> Dict:
    """One run's row: name, state, updates, budget (None: not known yet),
    resumes_from, cpu_seconds and rate (CPU seconds an update, both of its
    finished epochs; rate None before the first) and pid (the process
    training it, if any).  ``landed``: the results' finished records by
    name (report.landed); ``warm_start_of``: the unfinished runs that start
    from this one's checkpoint."""
    landed = landed or {}
    from fairseq_ctx.study.evaluate import is_evaluated

    try:
        hist = history(out, run)
        logged, checkpoint = read_logs(out, run)
        done = read_done(out, run)
    except ValueError:  # a .cpu file or train.done caught while being written
        return {"name": run.name, "budget": None, "updates": 0, "resumes_from": 0, "cpu_seconds": 0.0,
                "rate": None, "pid": None, "state": "being written: ask again"}
    try:
        budget = settings_of(run, settings, out, landed).budget
    except StudyError:
        budget = None  # scaled by epoch lengths that are not all known yet
    resumes = max(checkpoint, hist[-1]["updates"] if hist else 0)
    row = {"name": run.name, "budget": budget, "updates": max(logged, resumes), "resumes_from": resumes,
           "cpu_seconds": hist[-1]["train_seconds"] if hist else 0.0,
           "rate": hist[-1]["train_seconds"] / hist[-1]["updates"] if hist and hist[-1]["train_seconds"] > 0
           else None,
           "pid": lock_holder(os.path.join(run_dir(out, run), "train.lock"))}
    row["landed"] = has_landed(run, landed, settings, out)
    try:
        trained = done is not None and is_trained(out, run, settings if budget is not None else None, landed, done)
    except StudyError:  # training refuses it until it is moved away; then it trains from the start
        return dict(row, resumes_from=0, state=f"refused: trained to a budget of {done.get('budget')}")
    logs = os.path.join(run_dir(out, run), "logs")
    if trained:
        row.update(updates=done["updates"], resumes_from=done["updates"], cpu_seconds=done["train_seconds"])
        evaluator = lock_holder(os.path.join(run_dir(out, run), "eval.lock"))
        row["state"] = AGAIN if trained_again(out, run, landed, settings) else \
            "evaluated" if is_evaluated(out, run) else \
            f"{EVALUATING} (pid {evaluator})" if evaluator not in (None, UNKNOWN) else "trained"
    elif row["pid"] == UNKNOWN:
        row["state"] = "unknown: the lock table (/proc/locks) cannot be read"
    elif row["pid"] is not None:
        row["state"] = f"training (pid {row['pid']})"
    elif row["landed"] and not warm_start_of:  # training skips it, even part-way trained here
        row.update(_from_record(landed[run.name]), resumes_from=landed[run.name]["updates"], state=LANDED)
    elif os.path.isdir(logs) and os.listdir(logs):
        row["state"] = "stopped (resumes with the same command)"
    elif row["landed"]:
        row.update(_from_record(landed[run.name]), state=f"landed, not on this machine: trained again first, the "
                                                         f"warm start of {', '.join(warm_start_of)}")
    elif run.warm_start and not os.path.exists(done_marker(out, Run(run.warm_start, ""))) and \
            not _shipped(run.warm_start, landed, settings, row):
        row["state"] = row.get("state") or f"waits for {run.warm_start}"
    else:
        row["state"] = "not started"
    return row


def _shipped(name: str, landed: Dict[str, Dict], settings: Settings, row: Dict) -> bool:
    """Whether ``name``'s average is shipped; a damaged one becomes ``row``'s
    state (status never stops on it; training stops on that line)."""
    try:
        return shipped_average(name, landed, settings) is not None
    except StudyError as e:
        row["state"] = f"refused: {e}"
        return False


def _from_record(rec: Dict) -> Dict:
    """A landed run's updates, CPU seconds and rate, from its record."""
    last = rec["history"][-1] if rec.get("history") else {"train_seconds": 0.0}
    return {"updates": rec["updates"], "cpu_seconds": last["train_seconds"],
            "rate": last["train_seconds"] / last["updates"] if last["train_seconds"] else None}


def remaining_cpu_seconds(rows: Sequence[Dict], runs: Sequence[Run]):
    """(CPU seconds of training left over the unfinished runs whose budget
    and rate are known, the names of those whose are not)."""
    keys = (lambda run: (run.arch, tuple(run.model_flags), tuple(run.flags)), lambda run: run.arch)
    rates: List[Dict] = [{} for _ in keys]
    for row, run in zip(rows, runs):
        if row["rate"] is not None:
            for by, key in zip(rates, keys):
                by.setdefault(key(run), []).append(row["rate"])
    every = [rate for values in rates[0].values() for rate in values]
    left, unknown = 0.0, []
    for row, run in zip(rows, runs):
        if finished(row["state"]):
            continue
        alike = next((by[key(run)] for by, key in zip(rates, keys) if key(run) in by), every)
        rate = row["rate"] if row["rate"] is not None else (sum(alike) / len(alike) if alike else None)
        if row["budget"] is None or rate is None:
            unknown.append(run.name)
            continue
        left += max(0, row["budget"] - row["resumes_from"]) * rate
    return left, unknown


def report(out: str, runs: Sequence[Run], settings: Settings, landed: Optional[Dict[str, Dict]] = None) -> str:
    """The table and its summary lines, as ``--stage status`` prints them
    (``landed``: report.landed of the results file)."""
    landed = landed or {}
    wanted = warm_starts_wanted(list(runs), out, landed, settings)
    rows = [run_status(out, run, settings, landed, wanted.get(run.name, [])) for run in runs]
    width = max([len("run")] + [len(r["name"]) for r in rows])
    lines = [f"{'run':<{width}}  {'updates':>11}  {'resumes at':>10}  {'CPU min':>7}  state"]
    for r in rows:
        budget = "?" if r["budget"] is None else str(r["budget"])
        lines.append(f"{r['name']:<{width}}  {str(r['updates']) + '/' + budget:>11}  {r['resumes_from']:>10}  "
                     f"{r['cpu_seconds'] / 60:>7.1f}  {r['state']}")
    # a landed run counts as trained and evaluated wherever it stands here
    away = sum(r["state"] == LANDED or r["state"].startswith("landed, not on this machine") for r in rows)
    trained = sum(r.get("landed", False) or finished(r["state"]) for r in rows)
    evaluated = sum(r.get("landed", False) or r["state"] == "evaluated" for r in rows)
    training = sum(r["state"].startswith("training") for r in rows)
    lines.append(f"{trained} of {len(rows)} run{'s' * (len(rows) != 1)} trained ({evaluated} evaluated"
                 + (f"; {away} landed earlier, not on this machine" if away else "")
                 + f"), {training} training now")
    left, unknown = remaining_cpu_seconds(rows, runs)
    again = [r["name"] for r in rows if r.get("landed") and not finished(r["state"])]
    counted = sum(not finished(r["state"]) for r in rows) - len(unknown)
    if counted:
        lines.append(f"training left: about {left / 3600:.1f} CPU hours for {counted} run{'s' * (counted > 1)}"
                     + (f" ({', '.join(again)} trained again for a warm start)" if again else "")
                     + " at the rates measured so far" + (f"; not counted, budget or rate not known yet: {', '.join(unknown)}" if unknown else ""))
    elif unknown:
        lines.append(f"training left: not known yet (no finished epoch gives a rate, or no budget): {', '.join(unknown)}")
    return "\n".join(lines)
