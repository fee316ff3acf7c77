#!/usr/bin/env python3
"""Run the README's first command (``bash scripts/first-model.sh``) on the
shipped models and write what it measured to ``benchmarks/first-model.json``:
each model's scores as printed and as fairseq-ctx-score's JSON holds them,
its translation's and checkpoint's sha256, its translation time, the
context encoder's CXMI, the command's wall time and its own CPU time
(children included: the wall time on a loaded machine says little), the
folder's size, and the study's own scores of each run beside them.

    python3 scripts/record_first_model.py --machine "2-core CPU, quiet"

``--machine`` says what else the machine was doing (it is written as given).
Entries of the previous record that this run does not measure (the fp16
against fp32 comparison of a model whose checkpoint is unchanged) are
carried over, marked with the date they were measured.
"""
import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(REPO, "models", "bible")
RECORD = os.path.join(REPO, "benchmarks", "first-model.json")
if REPO not in sys.path:  # this checkout's package, whether or not it is installed
    sys.path.insert(0, REPO)
from fairseq_ctx.evaluation.score import parse_table  # noqa: E402  (torch-free): reads the score table
from fairseq_ctx_prep.files import sha256_file  # noqa: E402  (what models/bible/SHA256SUMS holds)

NAMES = ("baseline", "ctxenc")
PRINTED = {"bleu": "BLEU", "chrf": "chrF", "ter": "TER", "dbleu": "d-BLEU"}  # record key: the table's title


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--machine", required=True, help="the machine and what else it ran meanwhile")
    p.add_argument("--out", help="the command's output folder (default: a temporary one)")
    args = p.parse_args(argv)
    for name in NAMES:
        if not os.path.isfile(os.path.join(MODEL, f"{name}.pt")):
            sys.exit(f"fairseq_ctx: error: {MODEL}/{name}.pt is missing (scripts/ship_model.py writes it)")
    out = args.out or tempfile.mkdtemp(prefix="first-model-")
    # the code that runs: HEAD now, and whether the tree differs from it (a record measured before its
    # commit lands)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                                capture_output=True, text=True).stdout.strip())
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    start, before = time.time(), resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(["bash", os.path.join(REPO, "scripts", "first-model.sh"), out], cwd=REPO, env=env,
                          capture_output=True, text=True)
    wall, after = time.time() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    printed = proc.stdout + proc.stderr
    if proc.returncode != 0:
        sys.exit(f"fairseq_ctx: error: scripts/first-model.sh failed (exit {proc.returncode}):\n{printed[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    with open(os.path.join(out, "scores.json")) as f:
        systems = {s["name"]: s for s in json.load(f)["systems"]}
    with open(os.path.join(out, "usage.json")) as f:
        usage = json.load(f)
    previous = {}
    if os.path.isfile(RECORD):
        with open(RECORD) as f:
            previous = json.load(f)
    table = parse_table(printed)  # the score table as the user saw it (its rounding is what the README quotes)
    models = {}
    for name in NAMES:
        ckpt = os.path.join(MODEL, f"{name}.pt")
        with open(os.path.join(MODEL, f"{name}.json")) as f:
            run = json.load(f)
        with open(os.path.join(out, f"translate.{name}.log")) as f:
            seconds = re.search(r"translated in ([\d.]+) s", f.read())
        models[name] = {
            "checkpoint": f"models/bible/{name}.pt: study run {run['name']}, seed {run['seed']}, "
                          f"{run['updates']} updates, commit {run.get('commit')}, fp16 weights",
            "checkpoint_sha256": sha256_file(ckpt),
            "checkpoint_bytes": os.path.getsize(ckpt),
            "scores": {k: round(systems[name][k], 4) for k in ("bleu", "chrf", "ter", "dbleu")},
            "printed": ({key: table[name][title] for key, title in PRINTED.items()}
                        if name in table else None),
            "translations_sha256": sha256_file(os.path.join(out, f"test.{name}.en")),
            "translate_seconds_printed": float(seconds.group(1)) if seconds else None,
            "study_record": {"bleu": run.get("bleu"), "chrf": run.get("chrf"),
                             "source": f"benchmarks/study-bible-budget.json, run {run['name']} "
                                       "(fairseq-generate on the binarized test split, fp32 weights)"},
        }
        old = (previous.get("models") or {}).get(name) or (previous if name == "baseline" else {})
        if old.get("checkpoint_sha256") == models[name]["checkpoint_sha256"] and "fp16_vs_fp32" in old:
            models[name]["fp16_vs_fp32"] = dict(old["fp16_vs_fp32"], measured=old.get("fp16_vs_fp32_date",
                                                                                     previous.get("date")))
    cxmi = {c: round(r["cxmi_bits"], 5) for c, r in usage["cxmi"].items() if isinstance(r, dict) and "cxmi_bits" in r}
    printed_cxmi = re.search(r"against none\s+([+-][\d.]+) ", printed)
    folder = sum(os.path.getsize(os.path.join(MODEL, n)) for n in os.listdir(MODEL))
    record = {
        "what": "bash scripts/first-model.sh: fairseq-ctx-translate (both models, one per core), fairseq-ctx-score "
                "and fairseq-ctx-context-usage (the context encoder) on the shipped models/bible/ (the Bible "
                "test split, 553 verses in 21 chapters)",
        "date": time.strftime("%Y-%m-%d"),
        "command": "bash scripts/first-model.sh",
        "commit": head,
        "tree_differs_from_commit": dirty,
        "models": models,
        "cxmi_bits": cxmi,
        "printed_cxmi_bits_against_none": printed_cxmi.group(1) if printed_cxmi else None,
        "wall_seconds": round(wall),
        "cpu_seconds": round(cpu, 1),
        "threads": f"OMP_NUM_THREADS={env['OMP_NUM_THREADS']}",
        "machine": args.machine,
        "size_bytes": {"folder": folder},
    }
    with open(RECORD, "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    print(json.dumps({k: record[k] for k in ("wall_seconds", "cpu_seconds", "cxmi_bits")}),
          {n: m["scores"] for n, m in models.items()})


if __name__ == "__main__":
    main()
