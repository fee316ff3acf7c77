"""``python3 -m fairseq_ctx.study``: train and evaluate the converged study.

    OMP_NUM_THREADS=1 taskset -c 1 python3 -m fairseq_ctx.study --data data/bible --out runs/study

Re-running the same command continues where it stopped: finished runs are
skipped, an interrupted run resumes from its last checkpoint, and every
evaluation step whose output exists is skipped.  ``--stage train`` only
trains (a run whose record is in ``--results`` already, committed by an
earlier session, is not trained again); ``--stage evaluate`` only evaluates what has finished training (so it
can run on another core while training goes on); ``--stage status`` prints
where every run stands and the training left, without touching anything;
``--stage table`` prints the per-family table of ``--results`` and the
verdict per paper claim (fairseq_ctx/study/verdict.py), the two in
docs/study.md, without touching anything either.  Results:
``benchmarks/study-bible-budget.json`` (one record per run) and figures in
``benchmarks/study-bible-budget/``.

``--runs RUN@N ...`` repeats runs of the study at a budget of N updates
(directories ``RUN-N``): the sensitivity check of the ranking, paired with
the baselines at N and kept beside the study in a results file of its own,
``benchmarks/study-bible-budget-N.json`` unless ``--results`` names one.
"""
import argparse
import json
import os
import shutil
import sys
import time
from dataclasses import replace
from typing import Optional

from fairseq_ctx.study import runs as study_runs
from fairseq_ctx.study.report import family
from fairseq_ctx.study.train import (StudyError, history, is_trained, params_from_logs, read_done, to_train, train,
                                     trained_again)
from fairseq_ctx.errors import ERROR_PREFIX  # every tool's (docs/errors.md)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(REPO, "benchmarks", "study-bible-budget.json")


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m fairseq_ctx.study", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=os.path.join(REPO, "data", "bible"),
                   help="Bible corpus from scripts/prepare-bible.sh (raw/, spm/ and bin/ inside)")
    p.add_argument("--out", default=os.path.join(REPO, "runs", "study"), help="checkpoints and logs")
    p.add_argument("--results", help="results JSON; figures go to the directory of the same name without .json "
                                      "(default: benchmarks/study-bible-budget.json; for runs at a budget of "
                                      "their own, RUN@N, benchmarks/study-bible-budget-N.json)")
    p.add_argument("--runs", nargs="+", help="only these runs (default: all, in order): "
                   + ", ".join(r.name for r in study_runs.RUNS)
                   + "; RUN@N: that run at a budget of N updates, apart from the study (its results file "
                     "holds such runs only, of one budget)")
    p.add_argument("--stage", choices=["train", "evaluate", "all", "status", "table"], default="all",
                   help="status: print each run's state, updates and CPU minutes and the training left, read "
                        "from --out and --results (nothing is started, written or locked); table: print the per-family "
                        "table (mean ± sd over seeds, paired deltas) of --results and the verdict per paper claim")
    p.add_argument("--threads", type=int, default=1, help="OMP threads of every child process (default 1)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="where fairseq trains and decodes (cuda: the same recipe on the GPU; each record says "
                        "which device trained it)")
    p.add_argument("--jobs", type=int, default=1,
                   help="runs trained at once, each in a process of its own (e.g. several on one GPU; the "
                        "run locks keep two processes off one run)")
    p.add_argument("--deadline", type=float, metavar="SECONDS",
                   help="stop training this many seconds from now: the run in training is stopped (it resumes "
                        "with the same command), none is started after it, and what finished is evaluated")
    p.add_argument("--evaluate-each", action="store_true", help=argparse.SUPPRESS)  # set for --jobs' children
    # --jobs' children: the parent's deadline as a time (each child's --deadline would count from its own
    # start, seconds after the parent's, importing torch and fairseq)
    p.add_argument("--deadline-at", type=float, help=argparse.SUPPRESS)
    p.add_argument("--pilot", action="store_true",
                   help="train the pilot that chooses the budget: the baseline at 1000, 2000, 4000, ... updates, "
                        "shortest first, until doubling a budget improves the final validation loss by less than "
                        "1%%; prints the runs and the choice (runs pilot-N; with --runs, just those)")
    p.add_argument("--smoke", action="store_true",
                   help="toy size and a two-epoch budget: checks the pipeline end to end (numbers mean nothing)")
    return p.parse_args(argv)


def echo(line: str):
    # one write, newline included: --jobs' children share one stdout, and with
    # PYTHONUNBUFFERED (the GPU runbook's) print's two writes interleave
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def train_all(opts, selected, bin_dir, user_dir):
    """Train ``selected`` in order; with ``--evaluate-each``, evaluate each
    run as soon as it has trained (its outputs only: the results file is
    written once, by the process that started the jobs).  Stops at the
    deadline: the run in training resumes with the same command later."""
    from fairseq_ctx.study.train import DeadlineReached, compare_with_landed

    landed = opts.landed
    order, lines, again = to_train(selected, opts.out, landed, opts.settings)
    for line in lines:
        echo(line)

    def one(run):
        ok = train(run, bin_dir, user_dir, opts.out, echo, opts.settings, opts.deadline_at, landed)
        if ok and run.name in again:  # trained again for a warm start: its record stays the landed one
            echo(f"[study] {run.name}: trained again; {compare_with_landed(history(opts.out, run), landed[run.name])}")
        elif ok and opts.evaluate_each:
            evaluate_now(opts, run, bin_dir, user_dir)
        return ok

    try:
        waiting = [run for run in order if not one(run)]
        for run in waiting:  # warm starts whose source finished later in this pass
            one(run)
    except DeadlineReached as e:
        echo(f"[study] deadline: {e}")


def evaluate_now(opts, run, bin_dir, user_dir):
    """``--evaluate-each``: write a trained run's evaluation outputs now,
    unless they are all there or another process is writing them (it holds
    the run's evaluation lock); the results file is the parent's, written
    once every job has ended."""
    from fairseq_ctx.study import evaluate

    with evaluate.evaluating(opts.out, run, wait=False) as ours:
        if not ours:
            echo(f"[study] {run.name}: another study process is evaluating it; skipped")
        elif not evaluate.is_evaluated(opts.out, run):
            echo(f"[study] {run.name}: evaluating")
            evaluate_run(opts, run, {}, bin_dir, user_dir, read_refs(opts), fig_dir_of(opts))


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


def train_in_parallel(argv, jobs: int, evaluate_each: bool, deadline_at: Optional[float] = None) -> list:
    """``jobs`` training processes of this same command (one job each):
    each walks the run list in order and skips a run another one holds, so
    the first ``jobs`` runs train at once and the next start as they end;
    all stop at ``deadline_at`` (time.time()).  Returns their exit codes."""
    import subprocess

    for flag in ("--jobs", "--stage", "--deadline"):
        argv = [a for i, a in enumerate(argv) if a != flag and (i == 0 or argv[i - 1] != flag)]
        argv = [a for a in argv if not a.startswith(flag + "=")]
    # each job evaluates its runs as they finish when the whole study was asked for
    cmd = [sys.executable, "-m", "fairseq_ctx.study", *argv, "--stage", "train", "--jobs", "1",
           *(["--evaluate-each"] if evaluate_each else []),
           *(["--deadline-at", repr(deadline_at)] if deadline_at is not None else [])]
    procs = [subprocess.Popen(cmd) for _ in range(jobs)]
    return [p.wait() for p in procs]


def base_record(opts, run) -> dict:
    hist = history(opts.out, run)
    rec = {"name": run.name, "family": family(run.name), "label": run.label, "arch": run.arch,
           "seed": run.seed, "flags": run.flags, "model_flags": run.model_flags,
           "warm_start": run.warm_start, "control": run.control, **({"rung_of": run.rung_of} if run.rung_of else {}),
           "params": params_from_logs(opts.out, run), "epochs": len(hist),
           "updates": hist[-1]["updates"] if hist else 0,
           "best_valid_loss": min(h["valid_loss"] for h in hist) if hist else None,
           "train_minutes": round(hist[-1]["train_seconds"] / 60, 1) if hist else 0.0, "history": hist,
           "status": "trained" if is_trained(opts.out, run, opts.settings, opts.landed) else "training" if hist else "not started"}
    if rec["status"] == "trained":
        done = read_done(opts.out, run)
        rec.update(budget=done["budget"], final_valid_loss=done.get("final_valid_loss"),
                   device=done.get("device", "cpu"), precision=done.get("precision", "fp32"),
                   commit=done.get("commit"), train_data=done.get("train_data"))
        rec.update({k: done[k] for k in ("machines", "warm_start_from") if done.get(k)})
    return rec


def evaluate_run(opts, run, rec, bin_dir, user_dir, refs, fig_dir) -> list:
    """Evaluate one trained run into ``rec`` (every step resumable: see
    fairseq_ctx.study.evaluate); returns its test translations."""
    from fairseq_ctx.evaluation.bleu import chrf, detok_bleu
    from fairseq_ctx.study import evaluate, report
    from fairseq_ctx.study.data import set_dir

    settings, device = opts.settings, opts.device
    # every step first, then the copies into the figure directory (translations, usage report,
    # attribution page, analysis), which are committed with the results: a step that fails leaves
    # the copies of the run's earlier evaluation as they were, beside the record it keeps
    dec = evaluate.decode(opts.out, run, bin_dir, user_dir, len(refs), settings, device=device)
    bleu, rec["signature"] = detok_bleu(dec["hyps"], refs)
    chrf_score, rec["chrf_signature"] = chrf(dec["hyps"], refs)
    rec["bleu"], rec["chrf"] = round(bleu, 2), round(chrf_score, 2)
    rec["decode_seconds"], rec["decode_cpu_seconds"] = dec["seconds"], dec["cpu_seconds"]
    valid = evaluate.validate(opts.out, run, bin_dir, user_dir, settings, device=device)
    spm_model = os.path.join(opts.data, "spm", "spm.model")
    full = evaluate.usage(opts.out, run, bin_dir, spm_model, set_dir(opts.study_dir), settings, device=device)
    if run.uses_context:
        attribution = evaluate.gender_cues(opts.out, run, os.path.join(opts.data, "raw"))
        shuf = evaluate.decode(opts.out, run, bin_dir, user_dir, len(refs), settings, shuffled=True, device=device)
    target = evaluate.analysis(opts.out, run, bin_dir, settings, device=device)

    report.keep_hyps(fig_dir, run.name, dec["path"])
    rec["valid_loss"], rec["valid_nll_loss"] = valid["valid_loss"], valid["valid_nll_loss"]
    rec["usage"] = evaluate.usage_summary(full)
    rec["usage_report"] = report.keep_usage(fig_dir, run.name, os.path.join(evaluate.eval_dir(opts.out, run),
                                                                           "usage.json"), opts.results)
    if run.uses_context:
        rec["usage"]["attribution"] = attribution
        page = os.path.join(fig_dir, f"{run.name}-attribution.html")
        shutil.copy(evaluate.attribution_path(opts.out, run, "html"), page)
        rec["attribution_page"] = os.path.relpath(page, os.path.dirname(opts.results))
        rec["shuffled_bleu"] = round(detok_bleu(shuf["hyps"], refs)[0], 2)
        report.shuffled_drop(rec, dec["hyps"], shuf["hyps"], refs)
    if target:
        dest = os.path.join(fig_dir, f"{run.name}-{os.path.basename(target)}")
        if os.path.isdir(target):
            shutil.copytree(target, dest, dirs_exist_ok=True)
        else:
            shutil.copy(target, dest)
        rec["analysis"] = os.path.relpath(dest, os.path.dirname(opts.results))
    test = rec["usage"]["context_test"].get("true", {})
    echo(f"[study] {run.name}: BLEU {rec['bleu']:.2f}, chrF {rec['chrf']:.2f}, averaged valid loss "
         f"{rec['valid_loss']:.3f}, context test {test.get('accuracy', float('nan')):.3f}"
         + (f", CXMI {rec['usage']['cxmi']['none']['bits']:+.4f} bits" if run.uses_context else "")
         + (f", shuffled context BLEU {rec['shuffled_bleu']:.2f}" if "shuffled_bleu" in rec else ""))
    return dec["hyps"]


def read_refs(opts) -> list:
    with open(os.path.join(opts.data, "raw", "test.en"), encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def figures_dir(results: str) -> str:
    """Where the figures, kept translations and usage reports of a results
    file go: its name without .json."""
    return os.path.splitext(results)[0]


def fig_dir_of(opts) -> str:
    path = figures_dir(opts.results)
    os.makedirs(path, exist_ok=True)
    return path


def runs_of_results(results: str, selected, previous_runs) -> list:
    """The runs a results file holds: the study's, or runs at a budget of
    their own (``RUN@N``) of one budget, never both, so that neither kind
    is tabled, paired or summed up with the other.  For the latter: those
    of ``selected`` and those the file holds already."""
    rungs = list({run.name: run for run in selected if run.rung_of}.values())   # a name given twice is one run
    held = [rec for rec in previous_runs.values() if rec.get("rung_of")]
    if rungs and any(not run.rung_of for run in selected):
        raise StudyError(f"--runs: {', '.join(r.name for r in selected if not r.rung_of)} are the study's runs and "
                         f"{', '.join(r.name for r in rungs)} runs at a budget of their own: evaluate them apart, "
                         "each kind with a results file of its own")
    if not rungs:
        if held:
            raise StudyError(f"--results {results}: it holds runs at a budget of their own "
                             f"({', '.join(rec['name'] for rec in held)}), not the study's; the study's runs go to "
                             f"{os.path.relpath(RESULTS)}")
        return list(study_runs.RUNS)
    if len({run.budget for run in rungs}) > 1:
        raise StudyError(f"--runs: one budget per results file, not {', '.join(map(str, sorted({r.budget for r in rungs})))}"
                         f" ({', '.join(run.name for run in rungs)}): evaluate each budget apart")
    if len(held) < len(previous_runs):
        raise StudyError(f"--results {results}: it holds the study's runs; runs at a budget of their own go to a "
                         f"file of their own (by default {os.path.relpath(rung_results(rungs[0].budget))})")
    names = {run.name for run in rungs}
    universe = rungs + [study_runs.run_of(rec) for rec in held if rec["name"] not in names]
    order = {run.name: i for i, run in enumerate(study_runs.RUNS)}   # the study's order, whatever --runs says
    universe.sort(key=lambda run: order[run.rung_of])
    budgets = sorted({run.budget for run in universe})
    if len(budgets) > 1:
        raise StudyError(f"--results {results}: one budget per results file, not {', '.join(map(str, budgets))} "
                         f"({', '.join(run.name for run in universe)})")
    return universe


def rung_results(budget: int) -> str:
    """Where runs at a budget of their own go unless ``--results`` says."""
    return f"{os.path.splitext(RESULTS)[0]}-{budget}.json"


def selected_runs(opts) -> list:
    """The runs a command names: ``--runs``, else the study's (the pilot's
    ladder with ``--pilot``)."""
    return study_runs.by_name(opts.runs) if (opts.runs or not opts.pilot) else study_runs.pilot_ladder()


def default_results(selected) -> str:
    """``--results`` when the command does not give it: runs at a budget of
    their own, all of one budget, go to their file; any other selection
    (a mixed one is refused later, with the reason) to the study's."""
    budgets = {run.budget for run in selected if run.rung_of}
    if len(budgets) == 1 and all(run.rung_of for run in selected):
        return rung_results(budgets.pop())
    return RESULTS


def results_path(argv) -> str:
    """The results file the driver writes for these arguments, for scripts
    that collect it afterwards (scripts/gpu-study.sh): the driver's own
    rule, never a copy of it.  Empty when the arguments are wrong (argparse's
    usage, help and errors are held back: the driver itself says why)."""
    import contextlib
    import io

    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            opts = parse_args(argv)
            return opts.results or default_results(selected_runs(opts))
    except (SystemExit, StudyError):
        return ""


def evaluate_all(opts, selected, bin_dir, user_dir):
    import logging

    from fairseq_ctx.evaluation.bleu import EvaluationError
    from fairseq_ctx.study import evaluate, report

    # importing fairseq leaves the root logger at DEBUG; matplotlib would list every font it tries
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    refs, fig_dir = read_refs(opts), fig_dir_of(opts)

    records, hyps, failed = [], {}, []
    previous_extra, previous_runs = report.read(opts.results)
    universe = runs_of_results(opts.results, selected, previous_runs)
    settings = opts.settings.with_budget(universe[0].budget) if universe[0].rung_of else opts.settings
    # --runs chooses what is evaluated now; the results keep every run
    # evaluated before, rebuilt from its outputs where they are on this
    # machine, else carried over from the results file as it was (a fresh
    # machine has the committed JSON and translations but no checkpoints),
    # so evaluating one run never drops the others from the JSON, the paired
    # tests and the summary
    for run in universe:
        evaluated = evaluate.is_evaluated(opts.out, run)
        if not (run in selected or evaluated or run.name in previous_runs):
            continue
        kept = report.read_hyps(fig_dir, run.name)
        # a landed run trained again here for a warm start keeps its landed
        # record unless --runs names it
        again = trained_again(opts.out, run, opts.landed, opts.settings) and not (opts.runs and run.name in opts.runs)
        if not evaluated and (again or not history(opts.out, run)) and run.name in previous_runs:
            records.append(previous_runs[run.name])
            if kept is not None:  # its committed translations: it is paired like the others
                hyps[run.name] = kept
            continue
        rec = base_record(opts, run)
        records.append(rec)
        if rec["status"] != "trained":
            continue
        if run in selected or evaluated:
            echo(f"[study] {run.name}: evaluating")
            try:
                with evaluate.evaluating(opts.out, run, echo=echo):  # waits for a process writing its outputs
                    hyps[run.name] = evaluate_run(opts, run, rec, bin_dir, user_dir, refs, fig_dir)
            except (StudyError, EvaluationError) as e:
                # the other runs' records are still written (one failed fairseq-generate, as on a
                # machine short of something, would otherwise cost every record of the call); this
                # run keeps the record the results file had, if any, and the command fails after
                echo(f"[study] {run.name}: evaluation failed: {e}")
                failed.append(run.name)
                if run.name in previous_runs:
                    records[records.index(rec)] = previous_runs[run.name]
                    if kept is not None:
                        hyps[run.name] = kept
                else:
                    records.remove(rec)

    extra = {"setup": report.setup_record(opts.study_data, settings)}
    signature = report.pair_all(records, hyps, refs, previous_runs)
    extra["bootstrap_signature"] = signature or previous_extra.get("bootstrap_signature", "")
    extra["summary"] = report.summary(records)
    seed1 = [rec["name"] for rec in records if rec["seed"] == 1 and rec.get("bleu") is not None]
    base1 = study_runs.baseline_of(1) + (f"-{settings.budget}" if universe[0].rung_of else "")
    hyps1 = {name: hyps[name] for name in seed1 if name in hyps}
    # BLEU by length: the seed-1 runs, all of them or (translations missing) as before
    if hyps1 and (len(hyps1) == len(seed1) or "bleu_by_length" not in previous_extra):
        from fairseq_ctx.evaluation.length_buckets import bleu_by_length, plot_length_buckets

        with open(os.path.join(opts.data, "spm", "test.es"), encoding="utf-8") as f:
            srcs = [line.rstrip("\n") for line in f]
        buckets = bleu_by_length(srcs, hyps1, refs)
        buckets["unit"] = "sentencepiece source tokens"
        extra["bleu_by_length"] = buckets
        plot_length_buckets(buckets, os.path.join(fig_dir, "bleu-by-length.png"),
                            baseline=base1 if base1 in hyps1 else None,
                            title="Bible es-en test: BLEU by source length (subword tokens)")
    elif "bleu_by_length" in previous_extra:
        extra["bleu_by_length"] = previous_extra["bleu_by_length"]
    report.plot_curves(records, os.path.join(fig_dir, "valid-loss.png"))
    report.write(opts.results, records, extra)
    echo(report.markdown_table(records, extra["summary"]))
    echo(f"[study] results: {opts.results}, figures: {fig_dir}")
    if failed:
        raise StudyError(f"the evaluation of {', '.join(failed)} failed (above); the results file holds the others")


def main(argv=None):
    opts = parse_args(argv)
    from fairseq_ctx.study.report import landed

    selected = selected_runs(opts)
    if opts.results is None:
        opts.results = default_results(selected)
    # what has landed: training skips it, status counts it (fairseq_ctx.study.train.to_train)
    opts.landed = landed(opts.results)
    if opts.stage == "status":
        from fairseq_ctx.study.status import report

        if not os.path.isdir(opts.out):
            sys.exit(f"{ERROR_PREFIX}--out {opts.out}: no such directory (no study has run there)")
        return echo(report(opts.out, selected, study_runs.SMOKE if opts.smoke else study_runs.STUDY, opts.landed))
    if opts.stage == "table":
        from fairseq_ctx.study import report

        if not os.path.exists(opts.results):
            sys.exit(f"{ERROR_PREFIX}--results {opts.results}: no such file")
        records = report.read(opts.results)[1]
        if not records:
            sys.exit(f"{ERROR_PREFIX}--results {opts.results}: no runs recorded there")
        from fairseq_ctx.study.verdict import markdown as verdicts

        records = list(records.values())
        table = report.markdown_table(records, report.summary(records))
        if any(rec.get("rung_of") for rec in records):  # the sensitivity check: the paper claims are the study's
            return echo(table)
        return echo(table + "\n\n" + verdicts(records))
    bin_dir = os.path.join(opts.data, "bin")
    for needed in (os.path.join(bin_dir, "dict.es.txt"), os.path.join(opts.data, "spm", "spm.model")):
        if not os.path.exists(needed):
            sys.exit(f"{ERROR_PREFIX}--data {opts.data}: missing {needed} "
                     f"(run: bash scripts/prepare-bible.sh --dest {opts.data})")
    os.environ["OMP_NUM_THREADS"] = str(opts.threads)
    user_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    opts.settings = replace(study_runs.SMOKE if opts.smoke else study_runs.STUDY, device=opts.device)
    if opts.jobs < 1:
        sys.exit(f"{ERROR_PREFIX}--jobs must be at least 1")
    if opts.device == "cuda":
        import torch

        if not torch.cuda.is_available():  # never train silently on the CPU instead
            sys.exit(f"{ERROR_PREFIX}--device cuda: no CUDA device is visible to torch {torch.__version__}")
    if opts.deadline_at is None and opts.deadline is not None:
        opts.deadline_at = time.time() + opts.deadline
    try:
        if opts.pilot:  # the pilot chose the budget on the whole training split
            return run_pilot(opts, selected, bin_dir, user_dir)
        # every other run trains without the balanced context test's chapters
        from fairseq_ctx.study import data as study_data

        opts.study_dir = os.path.join(opts.data, "study")
        try:
            opts.study_data = study_data.prepare(opts.data, opts.study_dir, opts.settings.context_per_class)
        except study_data.StudyDataError as e:
            raise StudyError(str(e)) from None
        bin_dir = study_data.bin_dir(opts.study_dir)
        from fairseq_ctx.study.report import read

        runs_of_results(opts.results, selected, read(opts.results)[1])  # before any training: the kinds never mix
        codes = []
        if opts.stage in ("train", "all"):
            # a job more than runs to train would start, find nothing and end
            jobs = min(opts.jobs, len(to_train(selected, opts.out, opts.landed, opts.settings)[0]))
            if jobs > 1:
                codes = train_in_parallel(argv if argv is not None else sys.argv[1:], jobs, opts.stage == "all",
                                          opts.deadline_at)
            else:
                train_all(opts, selected, bin_dir, user_dir)
        failed = f"a training process failed (exit codes {codes}); what finished is evaluated" if any(codes) else ""
        if opts.stage in ("evaluate", "all"):
            # what finished is evaluated even when a training process failed
            try:
                evaluate_all(opts, selected, bin_dir, user_dir)
            except StudyError as e:
                raise StudyError(f"{failed}; {e}" if failed else str(e)) from None
        if failed:
            raise StudyError(failed)
    except StudyError as e:
        sys.exit(f"{ERROR_PREFIX}{e}")


if __name__ == "__main__":
    main()
