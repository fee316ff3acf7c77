"""Whether a study run trained again elsewhere agrees with its landed record
within seed noise: ``python3 -m fairseq_ctx.study.agreement``.

    python3 -m fairseq_ctx.study.agreement --out benchmarks/gpu/study/runs \\
        --here benchmarks/gpu/study/study-gpu.json --json benchmarks/gpu/study-agreement.json

Runs trained on other hardware are pooled with the landed ones only after
one run trained on both agrees within seed noise (docs/study.md): vector
kernels round differently on another CPU or on a GPU, so a run does not
repeat bit for bit, and what matters is whether the hardware moves it more
than a seed does.  For each run trained again (its epoch logs under
``--out``, as the study writes them and as a GPU call copies them to
``OUT/study/runs``):

* per finished epoch, its validation loss against the landed record's, beside
  the validation losses of the family's landed seeds at the same epoch
  (their sample standard deviation and range);
* where it was evaluated (its record in ``--here``), its BLEU against the
  landed record's, beside the 95% prediction interval of one more seed from
  the family's landed seeds (mean ± t(0.975, n-1) · sd · sqrt(1 + 1/n)).

It agrees when its mean absolute validation-loss difference over the epochs
compared is at most the upper end of the 95% prediction interval of one more
pair of seeds' mean absolute difference over those epochs, from the pairs of
the family's landed seeds (the machine moves it no more than another seed
would), and, where it was evaluated, its BLEU lies in the prediction
interval above (it could be one more seed of its family).  Two seeds' runs
are farther apart than one seed's standard deviation (E|X - Y| = 1.13 sd
for two draws): 11 of the 15 pairs of the study's landed seeds would fail a
bound of the seeds' standard deviation.  The pairs share seeds, so the
interval is approximate, and loose with three seeds (t(0.975, 2) = 4.30):
it asks whether the machine moves a run far more than seeds do.  With fewer
than three landed seeds (one pair) the validation losses have nothing to
compare with, and there is no verdict, whatever the BLEU.
"""
import argparse
import datetime
import json
import math
import os
import statistics
import sys
from typing import Dict, List, Optional

from fairseq_ctx.errors import ERROR_PREFIX
from fairseq_ctx.study.report import family
from fairseq_ctx.study.runs import run_of
from fairseq_ctx.study.train import StudyError, code_commit, history, machines, train_walls

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LANDED = os.path.join(REPO, "benchmarks", "study-bible-budget.json")

# two-sided 95% quantiles of Student's t by degrees of freedom (the study has
# three seeds a family; scipy is not a dependency)
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}


def seeds_of(name: str, landed: Dict[str, Dict]) -> List[Dict]:
    """The landed records of ``name``'s family at its budget, in the results'
    order (the family's seeds, ``name`` itself among them)."""
    budget = landed[name].get("budget")
    return [rec for rec in landed.values() if family(rec["name"]) == family(name) and rec.get("budget") == budget]


def prediction_interval(values: List[float], digits: int = 2) -> Optional[List[float]]:
    """The 95% prediction interval of one more draw from ``values``' normal
    population (None under two values or beyond the t table)."""
    n = len(values)
    if n < 2 or n - 1 not in _T975:
        return None
    half = _T975[n - 1] * statistics.stdev(values) * math.sqrt(1 + 1 / n)
    mean = statistics.fmean(values)
    return [round(mean - half, digits), round(mean + half, digits)]


def seed_pairs(seeds: List[Dict], epochs: List[int]) -> List[Dict]:
    """Each pair of ``seeds`` that both reach the last of ``epochs``: their
    mean absolute validation-loss difference over those epochs."""
    whole = [rec for rec in seeds if len(rec.get("history", [])) >= max(epochs)]
    return [{"seeds": [a["name"], b["name"]],
             "mean_abs_difference": round(statistics.fmean(
                 abs(a["history"][e - 1]["valid_loss"] - b["history"][e - 1]["valid_loss"]) for e in epochs), 4)}
            for i, a in enumerate(whole) for b in whole[i + 1:]]


def train_wall_rates(rows: List[Dict]) -> Dict[str, Optional[float]]:
    """fairseq's seconds a training update, over the epochs each process
    finished first (shapes new to it: on a GPU, kernels choose and plan
    per shape) and over the others; summed over epochs, since one epoch's
    whole seconds are too coarse on a GPU (a few seconds an epoch)."""
    rates = {}
    for key, first in (("first_epochs_of_processes", True), ("other_epochs", False)):
        timed = [r for r in rows if r["train_wall_here"] is not None and r["first_of_process_here"] is first]
        updates = sum(r["epoch_updates"] for r in timed)
        rates[key] = round(sum(r["train_wall_here"] for r in timed) / updates, 4) if updates else None
    return rates


def compare(name: str, hist: List[Dict], landed: Dict[str, Dict], here: Optional[Dict] = None,
            walls: Optional[Dict[int, Dict]] = None) -> Dict:
    """One run trained again (``hist``: its :func:`history`; ``here``: its
    record where it was evaluated; ``walls``: its :func:`train_walls`)
    against its landed record and seeds."""
    land, seeds = landed[name], seeds_of(name, landed)
    if here is not None and here.get("budget") not in (None, land.get("budget")):
        raise StudyError(f"{name}: trained here to a budget of {here['budget']} updates, landed at "
                         f"{land.get('budget')}: not the same run")
    rows, wall, walls, before = [], 0.0, walls or {}, 0
    for h in hist:
        if h["epoch"] > len(land.get("history", [])):
            break  # trained past its landed record: nothing to compare with
        theirs = land["history"][h["epoch"] - 1]
        if h["updates"] != theirs["updates"]:  # another batching or budget: epochs are not the same work
            raise StudyError(f"{name}: epoch {h['epoch']} ended at {h['updates']} updates here, at "
                             f"{theirs['updates']} in its landed record: not the same recipe")
        at = [rec["history"][h["epoch"] - 1]["valid_loss"] for rec in seeds
              if len(rec.get("history", [])) >= h["epoch"]]
        # an epoch's times are kept under the last epoch its fairseq process
        # finished (on a GPU one process trains the whole run): the time per
        # update is known at those epochs only
        wall += h.get("seconds", 0.0)
        timed = "cpu" in h or "seconds" in h
        rows.append({"epoch": h["epoch"], "updates": h["updates"], "valid_loss_here": h["valid_loss"],
                     "valid_loss_landed": theirs["valid_loss"],
                     "difference": round(h["valid_loss"] - theirs["valid_loss"], 3),
                     "seeds_valid_loss": at, "seeds_sd": round(statistics.stdev(at), 4) if len(at) > 1 else None,
                     "seeds_range": round(max(at) - min(at), 3),
                     "cpu_seconds_per_update_here": round(h["train_seconds"] / h["updates"], 3) if timed else None,
                     "seconds_per_update_here": round(wall / h["updates"], 3) if "seconds" in h else None,
                     # fairseq's own time in the epoch's training steps (whole seconds), its updates, and
                     # whether it was its process's first epoch (shapes new to it)
                     "train_wall_here": walls.get(h["epoch"], {}).get("train_wall"),
                     "epoch_updates": h["updates"] - before,
                     "first_of_process_here": walls.get(h["epoch"], {}).get("first_of_process")})
        before = h["updates"]
    # where it trained: its record says once it finished (--here); the CPU of each epoch is in its logs
    out = {"name": name, "device_here": (here or {}).get("device"), "precision_here": (here or {}).get("precision"),
           "train_wall_seconds_per_update_here": train_wall_rates(rows),
           "machines_here": machines(hist), "landed_device": land.get("device"),
           "landed_precision": land.get("precision"), "landed_train_minutes": land.get("train_minutes"),
           "landed_commit": land.get("commit"), "seeds": [rec["name"] for rec in seeds], "epochs": rows}
    if not rows:
        return dict(out, agrees=None, reading=f"{name}: no finished epoch to compare")
    diffs = [abs(r["difference"]) for r in rows]
    sds = [r["seeds_sd"] for r in rows]
    pairs = seed_pairs(seeds, [r["epoch"] for r in rows])
    bound = prediction_interval([p["mean_abs_difference"] for p in pairs], digits=4)
    out.update(max_abs_difference=max(diffs), mean_abs_difference=round(statistics.fmean(diffs), 4),
               mean_seeds_sd=round(statistics.fmean(sds), 4) if None not in sds else None,
               seed_pairs=pairs, seed_pairs_bound=bound[1] if bound else None)
    epochs = f"{len(rows)} epoch{'s' * (len(rows) != 1)}"
    checks, reading = [], [f"{name}: {epochs}, validation loss {out['mean_abs_difference']:.4f} from its landed "
                           f"record on average (at most {out['max_abs_difference']:.3f})"]
    if bound is None:
        reading.append(f"{len(pairs)} pair{'s' * (len(pairs) != 1)} of landed seeds: no spread of seed pairs to "
                       f"compare with")
    else:
        checks.append(out["mean_abs_difference"] <= out["seed_pairs_bound"])
        spread = [p["mean_abs_difference"] for p in pairs]
        reading.append(f"two seeds {min(spread):.4f} to {max(spread):.4f} apart, one more pair at most "
                       f"{out['seed_pairs_bound']:.4f} (95%)")
    if here is not None and here.get("bleu") is not None and land.get("bleu") is not None:
        values = [rec["bleu"] for rec in seeds if rec.get("bleu") is not None]
        interval = prediction_interval(values)
        out.update(bleu_here=here["bleu"], bleu_landed=land["bleu"],
                   bleu_difference=round(here["bleu"] - land["bleu"], 2),
                   seeds_bleu=values, seeds_bleu_interval=interval)
        reading.append(f"BLEU {here['bleu']:.2f} against {land['bleu']:.2f} landed"
                       + (f", one more seed's 95% interval {interval[0]:.2f} to {interval[1]:.2f}" if interval else ""))
        if interval is not None:
            checks.append(interval[0] <= here["bleu"] <= interval[1])
    # the losses are the check every run has (a cut run has no BLEU): without them, no verdict
    out["agrees"] = all(checks) if bound is not None else None
    verdict = {True: "agrees within seed noise", False: "does NOT agree within seed noise", None: "no verdict"}
    out["reading"] = "; ".join(reading) + f": {verdict[out['agrees']]}"
    return out


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m fairseq_ctx.study.agreement", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="the runs trained again: RUN/logs/epoch-NNN.log under it (the study's "
                                                "--out, or a GPU call's OUT/study/runs)")
    p.add_argument("--runs", nargs="+", help="these runs (default: every run under --out that has landed)")
    p.add_argument("--landed", default=LANDED, help="results with the landed records and their seeds "
                                                    "(default: benchmarks/study-bible-budget.json)")
    p.add_argument("--here", help="results of the runs trained again, for their BLEU, device and precision "
                                  "(the GPU study call's results file)")
    p.add_argument("--json", help="write the comparison here")
    return p.parse_args(argv)


def main(argv=None):
    from fairseq_ctx.study.report import landed as read_landed, read

    opts = parse_args(argv)
    for flag, path in (("--out", opts.out), ("--landed", opts.landed), ("--here", opts.here)):
        if path and not os.path.exists(path):
            sys.exit(f"{ERROR_PREFIX}{flag} {path}: no such file or directory")
    landed = read_landed(opts.landed)
    here = read(opts.here)[1] if opts.here else {}
    names = opts.runs or sorted(n for n in os.listdir(opts.out) if n in landed)
    if not names:
        sys.exit(f"{ERROR_PREFIX}--out {opts.out}: no run there has a landed record in {opts.landed}")
    missing = [n for n in names if n not in landed]
    if missing:
        sys.exit(f"{ERROR_PREFIX}--runs {' '.join(missing)}: no landed record in {opts.landed} to compare with")
    absent = [n for n in names if not os.path.isdir(os.path.join(opts.out, n, "logs"))]
    if absent:
        sys.exit(f"{ERROR_PREFIX}--out {opts.out}: no logs of {' '.join(absent)} there "
                 f"({os.path.join(opts.out, absent[0], 'logs', 'epoch-NNN.log')})")
    try:
        compared = [compare(n, history(opts.out, run_of(landed[n])), landed, here.get(n),
                            train_walls(opts.out, run_of(landed[n]))) for n in names]
    except StudyError as e:
        sys.exit(f"{ERROR_PREFIX}{e}")
    for rec in compared:
        print(rec["reading"])
    if opts.json:
        record = {"what": "study runs trained again, per finished epoch against their landed records and the "
                          "family's landed seeds (fairseq_ctx/study/agreement.py)",
                  "date": datetime.date.today().isoformat(), "commit": code_commit(),
                  "landed": os.path.relpath(opts.landed, REPO) if opts.landed.startswith(REPO) else opts.landed,
                  "runs": compared}
        os.makedirs(os.path.dirname(os.path.abspath(opts.json)), exist_ok=True)
        with open(opts.json, "w") as f:
            json.dump(record, f, indent=1)
            f.write("\n")
    return compared


if __name__ == "__main__":
    main()
