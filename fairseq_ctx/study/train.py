"""Training one study run, an epoch per fairseq invocation.

Each invocation resumes from ``checkpoint_last.pt`` with ``--max-epoch``
raised by one and writes its own log ``logs/epoch-NNN.log``; the validation
history is read back from those logs, so a run killed at any point continues
with the same command and loses at most the updates since its last
checkpoint (one every budget/20 updates and at each epoch's end).  ``train.done``
marks a finished run, which is never trained again.
"""
import contextlib
import fcntl
import json
import os
import re
import resource
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

from fairseq_ctx.allocator import child_env  # every training entry point's children (jemalloc)
from fairseq_ctx.study.runs import STUDY, Run, Settings


def write_whole(path: str, text: str):
    """Write ``path`` whole or not at all: a run's files are read while it
    trains (``--stage status``, the other core's process) and after a kill,
    and must never be seen half-written."""
    from pathlib import Path

    from fairseq_ctx_prep.files import write_text_atomic

    write_text_atomic(Path(path), text)

# fairseq's validation summary, e.g.
# "| valid | epoch 003 | valid on 'valid' subset | loss 6.91 | nll_loss 5.6 | ... | num_updates 822 | ..."
_VALID_RE = re.compile(r"\| valid \| epoch (\d+) \| valid on 'valid' subset \| loss ([\d.]+) \| nll_loss ([\d.]+)"
                       r".*?\| num_updates (\d+)")
# printed once an epoch's batches are done (or the update budget is reached)
_END_RE = re.compile(r"end of epoch (\d+) \(average epoch stats below\)")
# the epoch's training summary after it, e.g. "| train | epoch 013 | loss 3.958 | ... | train_wall 176 | wall 182"
_TRAIN_WALL_RE = re.compile(r"\| train \| epoch (\d+) \|.*\| train_wall ([\d.]+)")
_PARAMS_RE = re.compile(r"num\. shared model params: ([\d,]+)")


class StudyError(Exception):
    """One line for the user, no traceback."""


def run_dir(out: str, run: Run) -> str:
    return os.path.join(out, run.name)


@contextlib.contextmanager
def run_lock(out: str, run: Run, name: str, wait: bool = False, on_wait=None):
    """Hold the lock file ``name`` in ``run``'s directory (``train.lock``
    while it trains, ``eval.lock`` while its evaluation outputs are written)
    for the with-body: two study processes (one per core, or the jobs of
    ``--jobs``) never train or evaluate one run at once.  Yields True once
    the lock is held, or False at once when another process holds it and
    ``wait`` is False; with ``wait``, calls ``on_wait()`` before waiting (a
    process that hangs would otherwise hold this one silently).  The file is
    opened for appending, never written, so taking the lock changes nothing
    of the run; closing it releases the lock, also when the process dies
    (``--stage status`` names the holder, :func:`fairseq_ctx.study.status.lock_holder`)."""
    os.makedirs(run_dir(out, run), exist_ok=True)
    with open(os.path.join(run_dir(out, run), name), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            ours = True
        except BlockingIOError:
            ours = False
        if not ours and wait:
            if on_wait is not None:
                on_wait()
            fcntl.flock(lock, fcntl.LOCK_EX)
            ours = True
        yield ours  # outside the except: an error of the with-body keeps its own context


def log_path(out: str, run: Run, epoch: int) -> str:
    return os.path.join(run_dir(out, run), "logs", f"epoch-{epoch:03d}.log")


def history(out: str, run: Run) -> List[Dict]:
    """Validation results per finished epoch, from the epoch logs (in order).

    An epoch counts as finished where fairseq logged "end of epoch N"; its
    result is the last validation of epoch N before that line (interval
    checkpoints validate mid-epoch too). An invocation resumed from a
    mid-epoch ``checkpoint_last.pt`` finishes that epoch in its own log, so
    an epoch's result may sit in a later file; each file's time counts
    towards the last epoch it finished."""
    logs = os.path.join(run_dir(out, run), "logs")
    rows: Dict[int, Dict] = {}
    if not os.path.isdir(logs):
        return []
    names = sorted((int(m.group(1)), name) for name in os.listdir(logs)
                   if (m := re.fullmatch(r"epoch-(\d+)\.log", name)))
    for number, name in names:
        last: Dict[int, Dict] = {}
        finished = []
        with open(os.path.join(logs, name), encoding="utf-8", errors="replace") as f:
            for line in f:
                v = _VALID_RE.search(line)
                if v:
                    epoch = int(v.group(1))
                    last[epoch] = {"epoch": epoch, "updates": int(v.group(4)), "valid_loss": float(v.group(2)),
                                   "valid_nll_loss": float(v.group(3))}
                e = _END_RE.search(line)
                if e and int(e.group(1)) in last:
                    rows[int(e.group(1))] = last[int(e.group(1))]
                    finished.append(int(e.group(1)))
        for kind in ("seconds", "cpu"):
            path = os.path.join(logs, f"epoch-{number:03d}.{kind}")
            if finished and os.path.exists(path):
                rows[finished[-1]][kind] = float(open(path).read())
        path = os.path.join(logs, f"epoch-{number:03d}.machine")
        if finished and os.path.exists(path):
            with open(path) as f:
                rows[finished[-1]]["machine"] = json.load(f)
    out_rows, total = [], 0.0
    for epoch in sorted(rows):
        if epoch != len(out_rows) + 1:
            break  # a gap: epochs after it are not trusted
        # CPU seconds of the fairseq process (one thread): unlike wall time,
        # not inflated when the machine is shared or the job is paused.
        # Epochs recorded before CPU time was kept fall back to wall time,
        # an upper bound (equal on a core of its own, more on a shared one).
        total += rows[epoch].get("cpu", rows[epoch].get("seconds", 0.0))
        out_rows.append(dict(rows[epoch], train_seconds=round(total, 1)))
    return out_rows


def train_walls(out: str, run: Run) -> Dict[int, Dict]:
    """By finished epoch, fairseq's own seconds in its training steps (its
    ``train_wall``: whole seconds, reset every epoch; validations and
    checkpoint saves left out) and whether the epoch was the first its
    process finished (``first_of_process``: its shapes were new to that
    process; one resumed mid-epoch also counts the time its killed process
    saved in the checkpoint), from the epoch logs.  On a GPU one process
    trains every epoch until a deadline stops it, and the run's time files
    hold the process's whole time: these split it by epoch."""
    logs = os.path.join(run_dir(out, run), "logs")
    walls: Dict[int, Dict] = {}
    if not os.path.isdir(logs):
        return walls
    for name in sorted(n for n in os.listdir(logs) if re.fullmatch(r"epoch-\d+\.log", n)):
        first = True
        with open(os.path.join(logs, name), encoding="utf-8", errors="replace") as f:
            for line in f:
                m = _TRAIN_WALL_RE.search(line)
                if m:
                    walls[int(m.group(1))] = {"train_wall": float(m.group(2)), "first_of_process": first}
                    first = False
    return walls


def settings_of(run: Run, settings: Settings = STUDY, out: Optional[str] = None,
                landed: Optional[Dict[str, Dict]] = None) -> Settings:
    """The settings ``run`` trains with: the study's, at its own budget if it
    has one (the pilot's, ``RUN@N``), or at the budget that gives it as many
    sentence pairs as the run it is matched to (``budget_from``, read from
    the first epochs of the two runs under ``out``, or of their records in
    ``landed`` where a run landed and is not on this machine; StudyError
    while one of them has not finished its first epoch)."""
    if run.budget:
        return settings.with_budget(run.budget)
    if run.budget_from:
        same_batches, reference = run.budget_from
        lengths = []
        for name in (same_batches, reference):
            hist = history(out, Run(name, "")) if out else []
            hist = hist or (landed or {}).get(name, {}).get("history", [])
            if not hist:
                raise StudyError(f"{run.name}: its budget is the study's scaled by the epoch lengths of {same_batches} "
                                 f"and {reference}; {name} has not finished an epoch yet")
            lengths.append(hist[0]["updates"])
        # a multiple of ``saves``: the averaged window's updates are then saved
        budget = round(settings.budget * lengths[0] / lengths[1] / settings.saves) * settings.saves
        return settings.with_budget(budget)
    return settings


def should_stop(hist: List[Dict], settings: Settings = STUDY) -> str:
    """'' to go on, else the reason: the run has made its ``budget`` updates."""
    if hist and hist[-1]["updates"] >= settings.budget:
        return f"made its budget of {settings.budget} updates"
    return ""




def device_name(device: str) -> str:
    """What trained a run: "cpu", or the GPU's name."""
    if device == "cpu":
        return "cpu"
    import torch

    return torch.cuda.get_device_name(0)


def machine() -> Dict:
    """Where an epoch trains on CPU, beyond :func:`device_name`: the
    processor's model (``/proc/cpuinfo``; ``platform.processor()``
    elsewhere) and the threads fairseq-train is given (``OMP_NUM_THREADS``,
    which the driver sets from ``--threads``; None when unset, torch's
    default). Kept per epoch (``logs/epoch-NNN.machine``), since a run can
    resume on another machine, and runs on different CPUs are compared only
    where one run trained on both agrees within seed noise."""
    import platform

    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    threads = os.environ.get("OMP_NUM_THREADS", "")
    return {"cpu_model": model or platform.processor() or platform.machine(),
            "threads": int(threads) if threads.isdigit() else None}


def machines(hist: List[Dict]) -> List[Dict]:
    """The CPUs a run's epochs trained on (``machine`` of each history row),
    in order of first use, each with its epochs; epochs written before
    machines were kept are not listed."""
    out: List[Dict] = []
    for h in hist:
        if "machine" not in h:
            continue
        same = next((m for m in out if all(m[k] == v for k, v in h["machine"].items())), None)
        if same is None:
            same = dict(h["machine"], epochs=[])
            out.append(same)
        same["epochs"].append(h["epoch"])
    return out


def done_marker(out: str, run: Run) -> str:
    return os.path.join(run_dir(out, run), "train.done")


def read_done(out: str, run: Run) -> Optional[Dict]:
    """``run``'s ``train.done`` record, None while it has not finished
    (ValueError for a file caught while it is being written)."""
    if not os.path.exists(done_marker(out, run)):
        return None
    with open(done_marker(out, run)) as f:
        return json.load(f)


def is_trained(out: str, run: Run, settings: Optional[Settings] = None,
               landed: Optional[Dict[str, Dict]] = None, done: Optional[Dict] = None) -> bool:
    """Whether ``run`` has finished; with ``settings``, a finished run of
    another budget than the one ``run`` has under them is refused (a changed
    budget must never silently reuse old runs; ``landed`` as for
    :func:`settings_of`).  ``done``: its train.done already read, if it was
    (status reads it once)."""
    done = done if done is not None else read_done(out, run)
    if done is None:
        return False
    if settings is not None:
        want = settings_of(run, settings, out, landed).budget
        got = done.get("budget")
        if got != want:
            raise StudyError(f"{run_dir(out, run)} holds {run.name} trained to a budget of {got} updates, not "
                             f"{want}: move it away (or choose its budget with --runs {run.name}@{got})")
    return True


def has_landed(run: Run, landed: Dict[str, Dict], settings: Settings, out: Optional[str] = None) -> bool:
    """Whether ``run``'s record is among ``landed`` (report.landed) at the
    budget ``run`` has under ``settings``: a record of another budget is not
    this run, which then trains."""
    rec = landed.get(run.name)
    if rec is None or rec.get("budget") is None:
        return False
    try:
        return rec["budget"] == settings_of(run, settings, out, landed).budget
    except StudyError:
        return False


# scripts/ship_model.py's folders: a landed run's averaged weights with its record
SHIPPED = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "models")
# the record's fields that make a shipped model the landed run itself
SHIPPED_IDENTITY = ("name", "seed", "budget", "commit", "bleu", "chrf", "valid_loss")


_DIGESTS: Dict[Tuple[str, int, int], str] = {}  # (path, size, mtime) -> sha256: status and each epoch ask


def _sha256(path: str) -> str:
    from fairseq_ctx_prep.files import sha256_file

    st = os.stat(path)
    key = (path, st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        _DIGESTS[key] = sha256_file(path)
    return _DIGESTS[key]


def shipped_average(name: str, landed: Optional[Dict[str, Dict]], settings: Settings,
                    shipped: Optional[str] = None) -> Optional[str]:
    """The shipped averaged checkpoint of the run ``name``, landed at its
    budget under ``settings`` (:func:`has_landed`): the ``X.pt`` beside an
    ``X.json`` under ``shipped``'s folders whose record is that landed one
    (every SHIPPED_IDENTITY field present and equal), checked against its
    folder's SHA256SUMS (a StudyError naming the file otherwise); None when
    the run has not landed at this budget (the smoke study, another budget)
    or no shipped record is its.  ``shipped``: the folder of model folders,
    SHIPPED (the checkout's models/) if None."""
    import glob

    from fairseq_ctx.study.runs import by_name

    rec = (landed or {}).get(name)
    if not rec or not has_landed(by_name([name])[0], landed, settings):
        return None
    for path in sorted(glob.glob(os.path.join(shipped or SHIPPED, "*", "*.json"))):
        try:
            with open(path, encoding="utf-8") as f:
                ship = json.load(f)
        except (OSError, ValueError):
            continue
        if not isinstance(ship, dict) or any(ship.get(k) is None or ship.get(k) != rec.get(k)
                                             for k in SHIPPED_IDENTITY):
            continue
        weights = path[:-len(".json")] + ".pt"
        listed = {}
        sums = os.path.join(os.path.dirname(path), "SHA256SUMS")
        if os.path.exists(sums):
            with open(sums) as f:  # sha256sum's lines: "HASH  NAME" (text) or "HASH *NAME" (binary)
                listed = {line.split(None, 1)[1].strip().lstrip("*"): line.split()[0] for line in f
                          if len(line.split(None, 1)) == 2}
        want = listed.get(os.path.basename(weights))
        got = _sha256(weights) if os.path.exists(weights) else None
        if want is None or got != want:
            raise StudyError(f"{weights}: the shipped average of {name} " + (
                "is missing" if got is None else "is not listed in SHA256SUMS" if want is None
                else "does not match its SHA256SUMS (a Git LFS pointer or a damaged copy?)"))
        return weights
    return None


def warm_start_checkpoint(run: Run, out: str, settings: Settings = STUDY,
                          landed: Optional[Dict[str, Dict]] = None) -> str:
    """The weights ``run`` starts from: the one its first epoch recorded
    (``logs/warm_start``) once it has started, so that every epoch and its
    record name the same start; before that, its warm start's shipped
    average where one is shipped (the averaged model whose scores the study
    reports, rounded to fp16, the same file on every machine), else the
    checkpoint_best.pt that run trained to here."""
    recorded = os.path.join(run_dir(out, run), "logs", "warm_start")
    if os.path.exists(recorded):
        with open(recorded) as f:
            start = f.read().strip()
        if not start:
            raise StudyError(f"{recorded} is empty: write there the weights its first epoch loaded "
                             f"(named in logs/epoch-001.log)")
        return start
    return (shipped_average(run.warm_start, landed, settings)
            or os.path.join(out, run.warm_start, "checkpoint_best.pt"))


def _repo_relative(path: str) -> str:
    """``path`` relative to the checkout when inside it (a shipped model), else absolute."""
    repo = os.path.dirname(SHIPPED)
    path = os.path.abspath(path)
    return os.path.relpath(path, repo) if path.startswith(repo + os.sep) else path


def warm_starts_wanted(runs: List[Run], out: str, landed: Dict[str, Dict],
                       settings: Settings) -> Dict[str, List[str]]:
    """Per run that others start from (their warm start) and whose average
    is not shipped (:func:`shipped_average`), the names of those among
    ``runs`` still to train, in order: neither trained here nor landed.
    Training trains a landed source again for the first of them; status
    says it waits to be.  A shipped average that fails its check is not
    trained around: the run that starts from it stops on that line."""
    wanted: Dict[str, List[str]] = {}
    for run in runs:
        if run.warm_start and not is_trained(out, run) and not has_landed(run, landed, settings, out):
            try:
                shipped = shipped_average(run.warm_start, landed, settings)
            except StudyError:  # named when the run itself trains: nothing to train again for it
                shipped = "damaged"
            if not shipped:
                wanted.setdefault(run.warm_start, []).append(run.name)
    return wanted


def to_train(selected: List[Run], out: str, landed: Dict[str, Dict],
             settings: Settings) -> Tuple[List[Run], List[str], List[str]]:
    """The runs to train, in order, one line per run skipped or added, and
    the names of the landed runs trained again.

    A run that landed (``has_landed``) and has not trained on this machine
    is skipped: its record and translations are committed, so a fresh
    machine never trains it again.  The exception is a warm start whose
    average is not shipped (:func:`warm_starts_wanted`): a run that starts
    from a landed run's checkpoint (GRET and its control) then needs that
    checkpoint on this machine, so the landed run is trained again, just
    before the first run that needs it (same recipe and seed; its record
    stays the landed one)."""
    from fairseq_ctx.study.runs import by_name

    def away(run):
        return has_landed(run, landed, settings, out) and not is_trained(out, run)

    # the first run that starts from each landed run not on this machine
    needed = {source: names[0] for source, names in warm_starts_wanted(selected, out, landed, settings).items()
              if away(by_name([source])[0])}
    order, lines = [], []
    for run in selected:
        if away(run):
            if run.name not in needed:
                lines.append(f"[study] {run.name}: landed (its record is in the results); not trained again")
            continue
        if run.warm_start in needed and needed[run.warm_start] == run.name:
            lines.append(f"[study] {run.warm_start}: landed, but its checkpoint is not on this machine: trained "
                         f"again, the warm start of {run.name}")
            order.append(by_name([run.warm_start])[0])
        order.append(run)
    return order, lines, list(needed)


def trained_again(out: str, run: Run, landed: Dict[str, Dict], settings: Settings) -> bool:
    """Whether ``run`` landed and what trained here is another training of
    it (a warm start's, on a fresh machine): its history differs from the
    one its record was built from.  Its landed record is kept."""
    hist = history(out, run)
    return bool(hist) and has_landed(run, landed, settings, out) and hist != landed[run.name].get("history")


def compare_with_landed(hist: List[Dict], rec: Dict) -> str:
    """How a run trained again compares with its landed record: the
    validation loss after every epoch (fairseq logs three decimals)."""
    for mine, theirs in zip(hist, rec.get("history", [])):
        if (mine["updates"], mine["valid_loss"]) != (theirs["updates"], theirs["valid_loss"]):
            return (f"differs from its landed record from epoch {mine['epoch']} on (valid loss {mine['valid_loss']} "
                    f"at {mine['updates']} updates, landed {theirs['valid_loss']} at {theirs['updates']})")
    if len(hist) != len(rec.get("history", [])):
        return f"has {len(hist)} epochs, its landed record {len(rec.get('history', []))}"
    return f"equals its landed record: the same validation loss after each of its {len(hist)} epochs"


COMMIT_ENV = "FAIRSEQ_CTX_COMMIT"


def code_commit() -> str:
    """The commit of the code that runs (``+dirty`` when it differs from it):
    the study runs from a checkout pinned at one commit, and every record
    names it. A copy without git's directory (what a GPU machine is sent)
    names it through ``FAIRSEQ_CTX_COMMIT`` (scripts/gpu-call.sh sets it)."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        head = subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        named = os.environ.get(COMMIT_ENV, "").strip()
        return f"{named} (from {COMMIT_ENV}: not a git checkout)" if named else "unknown (not a git checkout)"
    return head + ("+dirty" if dirty else "")


def precision(settings: Settings) -> str:
    """The training precision fairseq uses under ``settings``."""
    flags = set(settings.recipe)
    return "fp16" if "--fp16" in flags else "bf16" if "--bf16" in flags else "fp32"


def params_from_logs(out: str, run: Run) -> int:
    path = log_path(out, run, 1)
    if os.path.exists(path):
        m = _PARAMS_RE.search(open(path, encoding="utf-8", errors="replace").read())
        if m:
            return int(m.group(1).replace(",", ""))
    return 0


def recipe_on(settings: Settings) -> List[str]:
    """The recipe's flags on ``settings.device``: on a GPU Adam is
    ``adam_foreach`` (fairseq_ctx.foreach_optim: fairseq's Adam, clipping and
    masters as a few foreach kernels, equal to ``adam`` within 1e-6, where
    fairseq's per-parameter loops would make the study's small model
    launch-bound); on CPU fairseq's own ``adam`` (the same numbers, and the
    runs begun under it resume: fairseq refuses a checkpoint's optimizer
    state under another optimizer name)."""
    recipe = list(settings.recipe)
    if settings.device != "cpu" and "--optimizer" in recipe:
        k = recipe.index("--optimizer") + 1
        if recipe[k] == "adam":
            recipe[k] = "adam_foreach"
    return recipe


def train_command(bin_dir: str, user_dir: str, out: str, run: Run, epoch: int,
                  settings: Settings = STUDY, landed: Optional[Dict[str, Dict]] = None) -> List[str]:
    cmd = [sys.executable, "-m", "fairseq_cli.train", bin_dir, "--user-dir", user_dir, "--arch", run.arch,
           *settings.size, *recipe_on(settings), *settings.schedule(), *run.task_flags, *run.model_flags,
           "--seed", str(run.seed),
           *(["--cpu"] if settings.device == "cpu" else []),
           "--save-dir", run_dir(out, run), "--max-epoch", str(epoch)]  # 0: no epoch limit (fairseq)
    if run.warm_start:
        # GRET builds its new modules around the source's weights; a run of the
        # source's own architecture starts from them with fairseq's fine-tuning
        # (fresh optimizer, schedule and meters). Both apply only to the first
        # epoch: later ones resume from the run's own checkpoint_last.pt.
        flag = "--gret-warm-start" if run.arch.startswith("transformer_gret") else "--finetune-from-model"
        cmd += [flag, warm_start_checkpoint(run, out, settings, landed)]
    return cmd


class DeadlineReached(StudyError):
    """The study's --deadline passed: the run in training was stopped (it
    resumes with the same command) and no run is started after it."""


def train(run: Run, bin_dir: str, user_dir: str, out: str, echo=print, settings: Settings = STUDY,
          deadline: Optional[float] = None, landed: Optional[Dict[str, Dict]] = None) -> bool:
    """Train ``run`` until the stopping rule holds.  Returns False when it
    cannot start yet (its warm start is not trained) or another study process
    is training it: two processes (one per core, e.g. with ``--runs`` in
    different orders) share the work without training a run twice.
    ``landed`` as for :func:`settings_of`."""
    if is_trained(out, run, settings, landed):
        return True
    with run_lock(out, run, "train.lock") as ours:
        if not ours:
            echo(f"[study] {run.name}: another study process is training it; skipped")
            return False
        try:
            own = settings_of(run, settings, out, landed)
        except StudyError as e:  # matched to runs that have not trained yet
            echo(f"[study] {e}: waits")
            return False
        return _train_locked(run, bin_dir, user_dir, out, echo, own, deadline, landed)


def children_cpu_seconds() -> float:
    """User + system CPU seconds of this process's ended and waited-for
    children so far: a child's own CPU is the difference around its run
    (wall time on a machine whose cores also train says little)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run_until(cmd: List[str], log, deadline: Optional[float]) -> int:
    """Run ``cmd`` to its end, or stop it at ``deadline`` (time.time()) and
    raise DeadlineReached; fairseq's last checkpoint stays, so the run
    resumes from it with the same command."""
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=child_env())
    try:
        return proc.wait(timeout=None if deadline is None else max(0.0, deadline - time.time()))
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise DeadlineReached("the deadline passed") from None


def _train_locked(run: Run, bin_dir: str, user_dir: str, out: str, echo, settings: Settings,
                  deadline: Optional[float] = None, landed: Optional[Dict[str, Dict]] = None) -> bool:
    if is_trained(out, run):  # finished by another process while we waited
        return True
    if run.warm_start:
        from fairseq_ctx.study.runs import by_name

        if (not shipped_average(run.warm_start, landed, settings)
                and not is_trained(out, by_name([run.warm_start])[0], settings)):
            echo(f"[study] {run.name}: waits for {run.warm_start} (its warm start)")
            return False
    os.makedirs(os.path.join(run_dir(out, run), "logs"), exist_ok=True)
    while True:
        hist = history(out, run)
        reason = should_stop(hist, settings)
        if reason:
            best = min(hist, key=lambda h: h["valid_loss"])
            record = {"reason": reason, "epochs": len(hist), "updates": hist[-1]["updates"],
                      "best_epoch": best["epoch"], "best_valid_loss": best["valid_loss"],
                      "final_valid_loss": hist[-1]["valid_loss"], "budget": settings.budget,
                      "device": device_name(settings.device), "precision": precision(settings),
                      "optimizer": recipe_on(settings)[recipe_on(settings).index("--optimizer") + 1],
                      "commit": code_commit(), "train_data": os.path.abspath(bin_dir),
                      "train_seconds": hist[-1]["train_seconds"], "params": params_from_logs(out, run)}
            if run.warm_start:
                record["warm_start_from"] = _repo_relative(warm_start_checkpoint(run, out, settings, landed))
            if machines(hist):
                record["machines"] = machines(hist)
            write_whole(done_marker(out, run), json.dumps(record, indent=1))
            echo(f"[study] {run.name}: trained, {reason}; {record['updates']} updates, best valid loss "
                 f"{record['best_valid_loss']:.3f}, {record['train_seconds'] / 60:.1f} CPU min")
            return True
        if deadline is not None and time.time() >= deadline:
            raise DeadlineReached(f"{run.name}: not continued, the deadline passed")
        epoch = len(hist) + 1
        # on CPU one fairseq process per epoch (each epoch's log its own); on
        # a GPU one process for the whole run: a restart costs seconds
        # there, as much as an epoch of the study's model
        cmd = train_command(bin_dir, user_dir, out, run, epoch if settings.device == "cpu" else 0, settings, landed)
        recorded = os.path.join(run_dir(out, run), "logs", "warm_start")
        if run.warm_start and not os.path.exists(recorded) and \
                not os.path.exists(os.path.join(run_dir(out, run), "checkpoint_last.pt")):
            # the start this run's later epochs and its record name, whatever lands meanwhile
            # (asked before the file is opened: an empty file would be read as the start)
            start_from = warm_start_checkpoint(run, out, settings, landed)
            write_whole(recorded, start_from + "\n")
        path = log_path(out, run, epoch)
        echo(f"[study] {run.name}: epoch {epoch}{'' if settings.device == 'cpu' else ' to the end'} (log {path})")
        if settings.device == "cpu":  # where this epoch trains (read with its log's result)
            write_whole(os.path.join(run_dir(out, run), "logs", f"epoch-{epoch:03d}.machine"), json.dumps(machine()))
        start, before = time.time(), children_cpu_seconds()
        with open(path, "w") as log:
            try:
                code = _run_until(cmd, log, deadline)
            except DeadlineReached:
                raise DeadlineReached(f"{run.name}: stopped at the deadline after "
                                      f"{(history(out, run) or [{'updates': 0}])[-1]['updates']} updates "
                                      f"(resumes with the same command)") from None
        cpu = children_cpu_seconds() - before
        if code != 0:
            raise StudyError(f"{run.name}: fairseq-train failed (exit {code}); see {path}")
        got = [h for h in history(out, run) if h["epoch"] == epoch]
        if not got:
            raise StudyError(f"{run.name}: epoch {epoch} ended without a validation result; see {path}")
        write_whole(os.path.join(run_dir(out, run), "logs", f"epoch-{epoch:03d}.cpu"), f"{cpu:.1f}")
        write_whole(os.path.join(run_dir(out, run), "logs", f"epoch-{epoch:03d}.seconds"), f"{time.time() - start:.1f}")
        h = history(out, run)[-1]
        done = h["updates"] - (hist[-1]["updates"] if hist else 0)
        echo(f"[study] {run.name}: epoch {h['epoch']}: {h['updates']} updates, valid loss {h['valid_loss']:.3f}, "
             f"{h['train_seconds'] / 60:.1f} CPU min so far, {done / max(time.time() - start, 1e-9):.2f} updates/s")


def pilot_choice(out: str) -> Tuple[Optional[int], List[Dict]]:
    """The pilot's answer from its finished runs: the shortest budget B whose
    double improves the final validation loss by less than PILOT_GAIN
    (relative), or None while no finished pair shows it; and one row per
    finished run (budget, final validation loss, gain of the double)."""
    from fairseq_ctx.study.runs import PILOT_GAIN, pilot_ladder

    final = {}
    for run in pilot_ladder():
        done = read_done(out, run)
        if done is not None:
            final[run.budget] = {"budget": run.budget, "final_valid_loss": done["final_valid_loss"],
                                 "cpu_minutes": round(done["train_seconds"] / 60, 1),
                                 "device": done.get("device", "cpu")}
    choice = None
    for b in sorted(final):
        if 2 * b in final:
            gain = (final[b]["final_valid_loss"] - final[2 * b]["final_valid_loss"]) / final[b]["final_valid_loss"]
            final[b]["gain_of_double"] = round(gain, 5)
            if choice is None and gain < PILOT_GAIN:
                choice = b
    return choice, [final[b] for b in sorted(final)]
