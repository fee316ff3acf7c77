"""Evaluating one trained study run: the averaged checkpoint (the same
window of updates for every run), beam search on the test set (and again
with shuffled context for context models), the averaged model's validation
loss, ``fairseq-ctx-context-usage`` (CXMI, and the balanced context test of
``fairseq_ctx.study.context_set`` under the four conditions of
:mod:`fairseq_ctx.evaluation.conditions`, per class), and the paper's analysis of its architecture.  Every step writes its output under ``RUN/eval/`` and is
skipped when that output exists, so evaluation resumes like training.
One process at a time writes a run's outputs (:func:`evaluating`).
"""
import json
import os
import re
import subprocess
import sys
import time
from typing import Dict, List, Optional

from fairseq_ctx.study.runs import Run, Settings
from fairseq_ctx.study.train import (StudyError, children_cpu_seconds, history, read_done, run_dir, run_lock,
                                     settings_of, write_whole)

BEAM = 4
# --scoring sacrebleu: the study scores the D- lines itself (fairseq_ctx.evaluation.bleu); the
# BLEU line fairseq-generate prints is not read, and its default scorer needs fairseq's compiled
# libbleu, which a fairseq built without it (the GPU kit's) lacks
GENERATE = ["--gen-subset", "test", "--beam", str(BEAM), "--max-len-a", "1.5", "--max-len-b", "10",
            "--batch-size", "64", "--required-batch-size-multiple", "1", "--remove-bpe", "sentencepiece",
            "--scoring", "sacrebleu"]


def device_flags(device: str) -> List[str]:
    """fairseq's flags for ``device`` ("cpu" or "cuda": fairseq's default device)."""
    return ["--cpu"] if device == "cpu" else []


def eval_dir(out: str, run: Run) -> str:
    return os.path.join(run_dir(out, run), "eval")


def evaluating(out: str, run: Run, wait: bool = True, echo=None):
    """Hold ``run``'s evaluation lock (``eval.lock``, :func:`run_lock`) while
    its outputs are written: the children of ``--jobs`` each evaluate the
    trained runs they come across, and two evaluating one run would decode
    it twice and write one ``average.pt.part`` at once.  Yields True once
    the lock is held, or False at once when another process holds it and
    ``wait`` is False; with ``wait``, says so through ``echo`` first."""
    said = None if echo is None else (
        lambda: echo(f"[study] {run.name}: another study process is evaluating it; waiting for it"))
    return run_lock(out, run, "eval.lock", wait, on_wait=said)


def _call(cmd: List[str], log: str, what: str):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with open(log, "w") as f:
        code = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
    if code != 0:
        raise StudyError(f"{what} failed (exit {code}); see {log}")


def final_checkpoints(out: str, run: Run, settings: Settings) -> List[str]:
    """The checkpoints averaged for decoding: exactly those at updates
    ``budget - k * budget / saves`` for k = ``average`` - 1, ..., 0 (the
    same window for every run, oldest first), whichever file holds each: an
    interval checkpoint ``checkpoint_EPOCH_UPDATES.pt``, or the epoch
    checkpoint ``checkpointEPOCH.pt`` of an epoch that ended at that update
    (fairseq saves an update that ends an epoch only as the latter; its
    update count is the epoch's in the logs; the budget is the one the run
    trained to, from its ``train.done``).  Raises StudyError naming the
    updates no file holds."""
    done = read_done(out, run)
    settings = settings.with_budget(done["budget"]) if done else settings_of(run, settings, out)
    wanted = [settings.budget - k * settings.save_every for k in reversed(range(settings.average))]
    updates_of_epoch = {h["epoch"]: h["updates"] for h in history(out, run)}
    found = {}
    for name in sorted(os.listdir(run_dir(out, run))):
        interval = re.fullmatch(r"checkpoint_(\d+)_(\d+)\.pt", name)
        epoch = re.fullmatch(r"checkpoint(\d+)\.pt", name)
        if interval:
            found[int(interval.group(2))] = os.path.join(run_dir(out, run), name)
        elif epoch and int(epoch.group(1)) in updates_of_epoch:
            found.setdefault(updates_of_epoch[int(epoch.group(1))], os.path.join(run_dir(out, run), name))
    missing = [u for u in wanted if u not in found]
    if missing:
        raise StudyError(f"{run.name}: no checkpoint of update(s) {', '.join(map(str, missing))} in "
                         f"{run_dir(out, run)}; the average is over updates {', '.join(map(str, wanted))}")
    return [found[u] for u in wanted]


def average(out: str, run: Run, settings: Settings) -> str:
    """The mean of the checkpoints of :func:`final_checkpoints` (the last
    quarter of the decayed schedule)."""
    path = os.path.join(eval_dir(out, run), "average.pt")
    if os.path.exists(path):
        return path
    os.makedirs(eval_dir(out, run), exist_ok=True)
    inputs = final_checkpoints(out, run, settings)
    tmp = path + ".part"
    _call([sys.executable, "-m", "fairseq_ctx.average_checkpoints", "--inputs", *inputs, "--output", tmp],
          path + ".log", f"{run.name}: checkpoint averaging")
    os.replace(tmp, path)
    return path


def decode(out: str, run: Run, bin_dir: str, user_dir: str, n_refs: int, settings: Settings, shuffled: bool = False,
           device: str = "cpu") -> Dict:
    """Beam search on the test set; returns {"hyps": [...], "path": their file, "seconds": wall s,
    "cpu_seconds": the decoding process's CPU s (None if decoded before they were recorded)}."""
    from fairseq_ctx.evaluation.bleu import read_generate_log

    tag = "test.shuffled" if shuffled else "test"
    hyp_path = os.path.join(eval_dir(out, run), tag + ".hyp")
    meta_path = os.path.join(eval_dir(out, run), tag + ".json")
    if not (os.path.exists(hyp_path) and os.path.exists(meta_path)):
        ckpt = average(out, run, settings)
        log = os.path.join(eval_dir(out, run), tag + ".log")
        cmd = [sys.executable, "-m", "fairseq_cli.generate", bin_dir, "--user-dir", user_dir, "--path", ckpt,
               *run.task_flags, *GENERATE, *device_flags(device)] + (["--shuffle-context"] if shuffled else [])
        start, before = time.time(), children_cpu_seconds()
        _call(cmd, log, f"{run.name}: fairseq-generate")
        seconds, cpu = time.time() - start, children_cpu_seconds() - before
        hyps = read_generate_log(log, n_refs)
        write_whole(meta_path, json.dumps({"seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1)}))
        write_whole(hyp_path, "".join(h + "\n" for h in hyps))
    with open(hyp_path, encoding="utf-8") as f:
        hyps = [line.rstrip("\n") for line in f]
    with open(meta_path) as f:
        meta = json.load(f)
    return {"hyps": hyps, "path": hyp_path, "seconds": meta["seconds"], "cpu_seconds": meta.get("cpu_seconds")}


# fairseq-validate's summary: "| valid on 'valid' subset | loss 4.41 | nll_loss 2.9 | ..."
_VALIDATE_RE = re.compile(r"valid on 'valid' subset \| loss ([\d.]+) \| nll_loss ([\d.]+)")


def validate(out: str, run: Run, bin_dir: str, user_dir: str, settings: Settings, device: str = "cpu") -> Dict:
    """The averaged model's validation loss (label-smoothed, base 2, as
    training reports it) and nll: the model decoded is the model scored,
    not the best interval checkpoint."""
    path = os.path.join(eval_dir(out, run), "valid.json")
    if not os.path.exists(path):
        ckpt = average(out, run, settings)
        log = os.path.join(eval_dir(out, run), "valid.log")
        _call([sys.executable, "-m", "fairseq_cli.validate", bin_dir, "--user-dir", user_dir, "--path", ckpt,
               *run.task_flags, "--valid-subset", "valid", "--max-tokens", "4096",
               "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
               *device_flags(device)], log, f"{run.name}: fairseq-validate")
        with open(log, encoding="utf-8", errors="replace") as f:
            m = _VALIDATE_RE.search(f.read())
        if not m:
            raise StudyError(f"{run.name}: no validation summary in {log}")
        write_whole(path, json.dumps({"valid_loss": float(m.group(1)), "valid_nll_loss": float(m.group(2))}))
    with open(path) as f:
        return json.load(f)


def usage(out: str, run: Run, bin_dir: str, spm_model: str, set_dir: str, settings: Settings,
          device: str = "cpu") -> Dict:
    """``fairseq-ctx-context-usage`` on the averaged model: CXMI on the test
    set (true context against none, shuffled, random; bootstrap intervals)
    and the balanced context test under the four conditions (true; none;
    shuffled, a derangement of the items' contexts; random, another item's
    context drawn at random: another verse of the Bible, the random-context
    control's own kind of context), per class; for models
    that use context also generated accuracy (beam 4).  Sentence-level
    models get the same report without translating (their translation
    cannot depend on the context: CXMI 0 and every condition equal, which
    the report then shows).  For models that use context, the same call
    writes the attribution report (``attribution.json`` and its page
    ``attribution.html``) of the test's items, each with the model's
    verdicts under the four conditions."""
    path = os.path.join(eval_dir(out, run), "usage.json")
    # a context run evaluated before the attribution report existed is run again
    if not os.path.exists(path) or (run.uses_context and not os.path.exists(attribution_path(out, run))):
        ckpt = average(out, run, settings)
        concat = ["--concat-context"] if "--concat-context" in run.flags else []
        attribution = []
        if run.uses_context:
            attribution = ["--attribution", attribution_path(out, run) + ".part",
                           "--attribution-html", attribution_path(out, run, "html") + ".part",
                           "--attribution-groups", "all"]
        _call([sys.executable, "-m", "fairseq_ctx.evaluation.context_usage", bin_dir, "--path", ckpt,
               "--task", "document_translation", "--context-size", "1", *concat,
               "--format", "voita", "--src", os.path.join(set_dir, "pronouns.src"),
               "--dst", os.path.join(set_dir, "pronouns.dst"), "--json", os.path.join(set_dir, "pronouns.json"),
               "--bpe", "sentencepiece", "--sentencepiece-model", spm_model,
               "--beam", str(BEAM), "--max-len-a", "1.5", "--max-len-b", "10",
               *([] if run.uses_context else ["--no-generated"]), *attribution, *device_flags(device),
               "--results", path + ".part"],
              os.path.join(eval_dir(out, run), "usage.log"), f"{run.name}: fairseq-ctx-context-usage")
        if run.uses_context:
            for ext in ("json", "html"):
                os.replace(attribution_path(out, run, ext) + ".part", attribution_path(out, run, ext))
        os.replace(path + ".part", path)
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def attribution_path(out: str, run: Run, ext: str = "json") -> str:
    return os.path.join(eval_dir(out, run), "attribution." + ext)


def gender_cues(out: str, run: Run, raw_dir: str) -> Dict:
    """The share of the attribution report's context attribution on the
    previous verse's gender cues (:mod:`fairseq_ctx.study.gender_cues`),
    written to ``cues.json``."""
    path = os.path.join(eval_dir(out, run), "cues.json")
    if not os.path.exists(path):
        from fairseq_ctx.study.context_set import lexicon_of
        from fairseq_ctx.study.gender_cues import gender_cue_share

        with open(attribution_path(out, run), encoding="utf-8") as f:
            report = json.load(f)
        with open(os.path.join(eval_dir(out, run), "usage.json"), encoding="utf-8") as f:
            generated = json.load(f).get("generated", {}).get("per_item")
        share = gender_cue_share(report, lexicon_of(raw_dir), generated)
        share.update(sensitive_tokens_all=report["summary"]["sensitive_tokens"],
                     top_attribution_equals_top_erasure=report["summary"]["top_attribution_equals_top_erasure"],
                     with_context_tokens=report["summary"]["with_context_tokens"], items_from=report["items_from"])
        write_whole(path, json.dumps(share, indent=1))
    with open(path) as f:
        return json.load(f)


def usage_summary(report: Dict) -> Dict:
    """What the study's record keeps of a usage report: CXMI (bits, 95%
    interval) against each condition, and the context test's accuracy per
    condition and class."""
    out = {"cxmi": {cond: {"bits": round(r["cxmi_bits"], 5), "ci95_bits": [round(x, 5) for x in r["ci95_bits"]]}
                    for cond, r in report["cxmi"].items() if isinstance(r, dict) and "cxmi_bits" in r},
           "context_test": {}}
    for cond, r in report.get("contrastive", {}).items():
        by = r.get("by", {}).get("class", {})
        out["context_test"][cond] = {"accuracy": round(r["accuracy"], 4), "groups": r["groups"],
                                     "by_class": {c: {"accuracy": round(b["accuracy"], 4), "groups": b["groups"]}
                                                  for c, b in sorted(by.items())}}
    if "generated" in report and "conditions" in report["generated"]:
        out["generated"] = {cond: {k: v for k, v in r.items() if k in ("items", "right", "wrong", "both", "neither", "accuracy")}
                            for cond, r in report["generated"]["conditions"].items()}
        out["generated"]["qualified"] = report["generated"]["qualified"]
    return out


ANALYSES = {
    # arch -> (module, extra flags, output name): the figure each paper draws
    "transformer_ctxsan": ("fairseq_ctx.analysis.ctxsan_gates", ["--gen-subset", "valid"], "gates"),
    "transformer_dc": ("fairseq_ctx.analysis.dc_divergence", ["--gen-subset", "valid"], "divergence"),
    "transformer_ctxenc": ("fairseq_ctx.analysis.ctxenc_context_attention", ["--gen-subset", "test"],
                           "context_attention.json"),
    # not one of the paper's figures: whether the warm-started model uses its
    # global state at all (its gain over the baseline may be the restart's)
    "transformer_gret": ("fairseq_ctx.analysis.gret_global_state", ["--gen-subset", "valid"], "global_state"),
}


def has_analysis(run: Run) -> bool:
    """Whether ``run`` gets its paper's analysis: the architecture's own
    configuration only (not a task mode, nor a model without what the
    analysis reads: ctxsan without its gates has no λ to plot)."""
    return run.arch in ANALYSES and not run.flags and not run.model_flags


def is_evaluated(out: str, run: Run) -> bool:
    """Whether every evaluation output of ``run`` exists, so that its record
    can be rebuilt from them without decoding or scoring anything."""
    tags = ["test.hyp", "test.json", "valid.json", "usage.json"]
    if run.uses_context:
        tags += ["test.shuffled.hyp", "test.shuffled.json", "attribution.json", "attribution.html", "cues.json"]
    if has_analysis(run):
        tags.append(ANALYSES[run.arch][2])
    return all(os.path.exists(os.path.join(eval_dir(out, run), tag)) for tag in tags)


def analysis(out: str, run: Run, bin_dir: str, settings: Settings, device: str = "cpu") -> Optional[str]:
    """Run the paper's analysis for this architecture; returns its output path."""
    if not has_analysis(run):
        return None
    module, flags, name = ANALYSES[run.arch]
    target = os.path.join(eval_dir(out, run), name)
    if os.path.exists(target):
        return target
    ckpt = average(out, run, settings)
    # the analysis tools import fairseq_ctx themselves (no --user-dir)
    cmd = [sys.executable, "-m", module, bin_dir, "--path", ckpt, *flags,
           "--out", target + ".part", *device_flags(device)]
    if run.arch != "transformer_ctxsan":
        # built on fairseq-generate's parser: the task (and its <sep> symbol)
        # must be named, as for decoding; ctxsan_gates reads it from the checkpoint
        cmd += run.task_flags
    _call(cmd, os.path.join(eval_dir(out, run), name.split(".")[0] + ".log"), f"{run.name}: {module}")
    os.replace(target + ".part", target)
    return target
