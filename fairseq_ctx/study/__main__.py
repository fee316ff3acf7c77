"""``python3 -m fairseq_ctx.study``: train and evaluate the converged study.

    OMP_NUM_THREADS=1 taskset -c 1 python3 -m fairseq_ctx.study --data data/bible --out runs/study

Re-running the same command continues where it stopped: finished runs are
skipped, an interrupted run resumes from its last finished epoch, and every
evaluation step whose output exists is skipped.  ``--stage train`` only
trains; ``--stage evaluate`` only evaluates what has finished training (so it
can run on another core while training goes on).  Results:
``benchmarks/study-bible.json`` (one record per run) and figures in
``benchmarks/study-bible/``.
"""
import argparse
import json
import os
import shutil
import sys
from dataclasses import replace

from fairseq_ctx.study import runs as study_runs
from fairseq_ctx.study.train import StudyError, done_marker, history, is_trained, params_from_logs, train
from fairseq_ctx_prep.files import ERROR_PREFIX  # every tool's (docs/errors.md)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m fairseq_ctx.study", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=os.path.join(REPO, "data", "bible"),
                   help="Bible corpus from scripts/prepare-bible.sh (raw/, spm/ and bin/ inside)")
    p.add_argument("--out", default=os.path.join(REPO, "runs", "study"), help="checkpoints and logs")
    p.add_argument("--results", default=os.path.join(REPO, "benchmarks", "study-bible-budget.json"),
                   help="results JSON; figures go to the directory of the same name without .json")
    p.add_argument("--runs", nargs="+", help="only these runs (default: all, in order): "
                   + ", ".join(r.name for r in study_runs.RUNS))
    p.add_argument("--stage", choices=["train", "evaluate", "all"], default="all")
    p.add_argument("--threads", type=int, default=1, help="OMP threads of every child process (default 1)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="where fairseq trains and decodes (cuda: the same recipe on the GPU; each record says "
                        "which device trained it)")
    p.add_argument("--jobs", type=int, default=1,
                   help="runs trained at once, each in a process of its own (e.g. several on one GPU; the "
                        "run locks keep two processes off one run)")
    p.add_argument("--pilot", action="store_true",
                   help="train the pilot that chooses the budget: the baseline at 1000, 2000, 4000, ... updates, "
                        "shortest first, until doubling a budget improves the final validation loss by less than "
                        "1%%; prints the runs and the choice (runs pilot-N; with --runs, just those)")
    p.add_argument("--smoke", action="store_true",
                   help="toy size and a two-epoch budget: checks the pipeline end to end (numbers mean nothing)")
    return p.parse_args(argv)


def echo(line: str):
    print(line, flush=True)


def train_all(opts, selected, bin_dir, user_dir):
    waiting = [run for run in selected if not train(run, bin_dir, user_dir, opts.out, echo, opts.settings)]
    for run in waiting:  # warm starts whose source finished later in this pass
        train(run, bin_dir, user_dir, opts.out, echo, opts.settings)


def run_pilot(opts, selected, bin_dir, user_dir):
    """Train pilot runs in order until the pilot has its answer; print it."""
    from fairseq_ctx.study.train import pilot_choice

    for run in selected:
        if pilot_choice(opts.out)[0] is not None:
            break
        train(run, bin_dir, user_dir, opts.out, echo, opts.settings)
    choice, rows = pilot_choice(opts.out)
    for row in rows:
        gain = f", its double {row['gain_of_double']:.2%} better" if "gain_of_double" in row else ""
        echo(f"[pilot] {row['budget']} updates: final valid loss {row['final_valid_loss']:.3f} "
             f"({row['cpu_minutes']} CPU min, {row['device']}){gain}")
    echo(f"[pilot] budget: {choice} updates" if choice else "[pilot] no budget yet: no finished pair of budgets B, "
         "2B where 2B improves the final validation loss by less than 1%")
    if rows:
        path = os.path.splitext(opts.results)[0] + "-pilot.json"
        with open(path + ".part", "w") as f:
            json.dump({"rule": f"the shortest budget B whose double improves the final validation loss by less "
                               f"than {study_runs.PILOT_GAIN:.0%} (relative)",
                       "schedule": " ".join(opts.settings.with_budget(rows[0]["budget"]).schedule()),
                       "size": list(opts.settings.size), "recipe": list(opts.settings.recipe),
                       "runs": rows, "budget": choice}, f, indent=1)
        os.replace(path + ".part", path)
        echo(f"[pilot] written: {path}")


def train_in_parallel(argv, jobs: int):
    """``jobs`` training processes of this same command (one job each):
    each walks the run list in order and skips a run another one holds, so
    the first ``jobs`` runs train at once and the next start as they end."""
    import subprocess

    argv = [a for i, a in enumerate(argv) if a != "--jobs" and (i == 0 or argv[i - 1] != "--jobs")]
    argv = [a for a in argv if not a.startswith("--jobs=")]
    cmd = [sys.executable, "-m", "fairseq_ctx.study", *argv, "--stage", "train", "--jobs", "1"]
    procs = [subprocess.Popen(cmd) for _ in range(jobs)]
    codes = [p.wait() for p in procs]
    if any(codes):
        raise StudyError(f"a training process failed (exit codes {codes})")


def base_record(opts, run) -> dict:
    hist = history(opts.out, run)
    rec = {"name": run.name, "label": run.label, "arch": run.arch, "seed": run.seed, "flags": run.flags,
           "warm_start": run.warm_start, "control": run.control,
           "params": params_from_logs(opts.out, run), "epochs": len(hist),
           "updates": hist[-1]["updates"] if hist else 0,
           "valid_loss": min(h["valid_loss"] for h in hist) if hist else None,
           "train_minutes": round(hist[-1]["train_seconds"] / 60, 1) if hist else 0.0, "history": hist,
           "status": "trained" if is_trained(opts.out, run, opts.settings) else "training" if hist else "not started"}
    if is_trained(opts.out, run, opts.settings):
        done = json.load(open(done_marker(opts.out, run)))
        rec.update(stop_reason=done["reason"], best_epoch=done["best_epoch"],
                   final_valid_loss=done.get("final_valid_loss"), device=done.get("device", "cpu"))
    return rec


def evaluate_all(opts, selected, bin_dir, user_dir):
    import logging

    from fairseq_ctx.study import evaluate, report

    # importing fairseq leaves the root logger at DEBUG; matplotlib would list every font it tries
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    from fairseq_ctx.study.pronouns import build as build_pronouns

    raw = os.path.join(opts.data, "raw")
    with open(os.path.join(raw, "test.en"), encoding="utf-8") as f:
        refs = [line.rstrip("\n") for line in f]
    set_dir = os.path.join(opts.out, "pronouns")
    counts_path = os.path.join(set_dir, "counts.json")
    if not os.path.exists(counts_path):
        counts = build_pronouns(raw, set_dir)
        json.dump(counts, open(counts_path, "w"))
    counts = json.load(open(counts_path))
    spm_model = os.path.join(opts.data, "spm", "spm.model")
    fig_dir = os.path.splitext(opts.results)[0]
    os.makedirs(fig_dir, exist_ok=True)

    records, hyps, carried = [], {}, []
    previous_extra, previous_runs = report.read(opts.results)
    # --runs chooses what is evaluated now; the results keep every run
    # evaluated before, rebuilt from its outputs where they are on this
    # machine, else carried over from the results file as it was (a fresh
    # machine has the committed JSON but no checkpoints), so evaluating one run
    # never drops the others from the JSON, the paired tests and the figures
    for run in study_runs.RUNS:
        evaluated = evaluate.is_evaluated(opts.out, run)
        if not (run in selected or evaluated or run.name in previous_runs):
            continue
        if not evaluated and not history(opts.out, run) and run.name in previous_runs:
            records.append(previous_runs[run.name])
            kept = report.read_hyps(fig_dir, run.name)
            if kept is not None:  # its committed translations: it is paired like the others
                hyps[run.name] = kept
            elif previous_runs[run.name].get("status") == "trained":
                carried.append(run)
            continue
        rec = base_record(opts, run)
        records.append(rec)
        if rec["status"] != "trained":
            continue
        echo(f"[study] {run.name}: evaluating")
        count = opts.settings  # the averaging window is the settings' (evaluate.final_checkpoints)
        dec = evaluate.decode(opts.out, run, bin_dir, user_dir, len(refs), count, device=opts.device)
        from fairseq_ctx.evaluation.bleu import detok_bleu

        rec["bleu"], rec["signature"] = detok_bleu(dec["hyps"], refs)
        rec["bleu"] = round(rec["bleu"], 2)
        rec["decode_seconds"] = dec["seconds"]
        rec["decode_cpu_seconds"] = dec["cpu_seconds"]
        hyps[run.name] = dec["hyps"]
        report.keep_hyps(fig_dir, run.name, dec["path"])
        con = evaluate.contrastive(opts.out, run, bin_dir, spm_model, set_dir, count, device=opts.device)
        rec["contrastive_accuracy"] = round(con["accuracy"], 4)
        rec["contrastive_by_class"] = con["by_class"]
        if run.uses_context:
            shuf = evaluate.decode(opts.out, run, bin_dir, user_dir, len(refs), count, shuffled=True,
                                   device=opts.device)
            rec["shuffled_bleu"] = round(detok_bleu(shuf["hyps"], refs)[0], 2)
            report.shuffled_drop(rec, dec["hyps"], shuf["hyps"], refs)
            con = evaluate.contrastive(opts.out, run, bin_dir, spm_model, set_dir, count, shuffled=True,
                                       device=opts.device)
            rec["shuffled_contrastive_accuracy"] = round(con["accuracy"], 4)
            rec["shuffled_contrastive_by_class"] = con["by_class"]
        target = evaluate.analysis(opts.out, run, bin_dir, count, device=opts.device)
        if target:
            dest = os.path.join(fig_dir, f"{run.name}-{os.path.basename(target)}")
            if os.path.isdir(target):
                shutil.copytree(target, dest, dirs_exist_ok=True)
            else:
                shutil.copy(target, dest)
            rec["analysis"] = os.path.relpath(dest, os.path.dirname(opts.results))
        echo(f"[study] {run.name}: BLEU {rec['bleu']:.2f}, pronouns {rec['contrastive_accuracy']:.3f}"
             + (f", shuffled context BLEU {rec['shuffled_bleu']:.2f}" if "shuffled_bleu" in rec else ""))

    extra = {"setup": report.setup_record(counts, opts.settings)}
    extra["seed_spread"] = report.seed_spread(records)
    carried_seeds = {run.seed for run in carried}
    if carried:
        # a carried run's translations are not here (results from before
        # they were kept beside the figures): the paired tests of its seed
        # and (seed 1) the length buckets stay as the results file has them,
        # and the figure drawn from translations is left alone
        echo("[study] carried over from " + opts.results + " without translations (outputs not on this "
             "machine): " + ", ".join(run.name for run in carried) + "; their seeds' paired tests kept as they were")
        for key in ("bootstrap_signature", "bleu_by_length"):
            if key in previous_extra:
                extra[key] = previous_extra[key]
    signature = report.paired_by_seed(records, hyps, refs, carried_seeds, previous_runs)
    if signature:
        extra["bootstrap_signature"] = signature
    seed_of = {rec["name"]: rec["seed"] for rec in records}
    # BLEU by length: the seed-1 runs
    hyps = {} if 1 in carried_seeds else {name: h for name, h in hyps.items() if seed_of[name] == 1}
    if hyps:
        from fairseq_ctx.evaluation.length_buckets import bleu_by_length, plot_length_buckets

        with open(os.path.join(opts.data, "spm", "test.es"), encoding="utf-8") as f:
            srcs = [line.rstrip("\n") for line in f]
        buckets = bleu_by_length(srcs, hyps, refs)
        buckets["unit"] = "sentencepiece source tokens"
        extra["bleu_by_length"] = buckets
        plot_length_buckets(buckets, os.path.join(fig_dir, "bleu-by-length.png"),
                            baseline="transformer" if "transformer" in hyps else None,
                            title="Bible es-en test: BLEU by source length (subword tokens)")
    report.plot_curves(records, os.path.join(fig_dir, "valid-loss.png"))
    report.write(opts.results, records, extra)
    echo(report.markdown_table([r for r in records if r["status"] == "trained"]))
    echo(f"[study] results: {opts.results}, figures: {fig_dir}")


def main(argv=None):
    opts = parse_args(argv)
    bin_dir = os.path.join(opts.data, "bin")
    for needed in (os.path.join(bin_dir, "dict.es.txt"), os.path.join(opts.data, "spm", "spm.model")):
        if not os.path.exists(needed):
            sys.exit(f"{ERROR_PREFIX}--data {opts.data}: missing {needed} "
                     f"(run: bash scripts/prepare-bible.sh --dest {opts.data})")
    os.environ["OMP_NUM_THREADS"] = str(opts.threads)
    user_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    selected = study_runs.by_name(opts.runs) if (opts.runs or not opts.pilot) else study_runs.pilot_ladder()
    opts.settings = replace(study_runs.SMOKE if opts.smoke else study_runs.STUDY, device=opts.device)
    if opts.jobs < 1:
        sys.exit(f"{ERROR_PREFIX}--jobs must be at least 1")
    try:
        if opts.pilot:  # the pilot chose the budget on the whole training split
            return run_pilot(opts, selected, bin_dir, user_dir)
        # every other run trains without the balanced context test's chapters
        from fairseq_ctx.study import data as study_data

        try:
            opts.study_data = study_data.prepare(opts.data, os.path.join(opts.data, "study"),
                                                 opts.settings.context_per_class)
        except study_data.StudyDataError as e:
            raise StudyError(str(e)) from None
        bin_dir = study_data.bin_dir(os.path.join(opts.data, "study"))
        if opts.stage in ("train", "all"):
            if opts.jobs > 1:
                train_in_parallel(argv if argv is not None else sys.argv[1:], opts.jobs)
            else:
                train_all(opts, selected, bin_dir, user_dir)
        if opts.stage in ("evaluate", "all"):
            evaluate_all(opts, selected, bin_dir, user_dir)
    except StudyError as e:
        sys.exit(f"{ERROR_PREFIX}{e}")


if __name__ == "__main__":
    main()
