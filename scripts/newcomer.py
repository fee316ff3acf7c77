#!/usr/bin/env python3
"""A newcomer's first hour, measured: clone the repository afresh, make a
new virtual environment, and run the README's commands in the README's order
(its "Set-up" and "Quickstart" blocks, comments dropped, continued lines
joined), each timed (wall and CPU seconds, children included) with the tail
of what it printed and the results it printed parsed out (tests passed and
skipped, BLEU and chrF, CXMI, the quickstart's table).

    python3 scripts/newcomer.py --work /tmp/newcomer --json benchmarks/newcomer-DATE.json \\
        --machine "2-core CPU, nothing else running"

The record is rewritten after every step, so a run stopped half-way keeps
the steps it finished; ``--steps 1 2`` runs only some (the clone and the
environment are steps 0 and 1 and are kept between calls). The README is
read from the clone, so the commands are the ones of the commit measured.
Nothing of the checkout this runs from is touched.
"""
import argparse
import json
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import time
from typing import Dict, List

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:  # this checkout's package, whether or not it is installed
    sys.path.insert(0, REPO)
import quickstart  # noqa: E402  (beside this file; torch-free): reads its own closing table
from fairseq_ctx.evaluation.score import parse_table  # noqa: E402  (torch-free): reads the score table

SECTIONS = ("Set-up", "Quickstart")
FIRST_MODEL = "bash scripts/first-model.sh"
FIRST_MODEL_RECORD = "benchmarks/first-model.json"


def readme_commands(text: str) -> List[str]:
    """The shell commands of the README's ``SECTIONS``, in order: every
    ```` ```bash ```` block's lines, continuations joined, comment-only and
    blank lines dropped."""
    commands = []
    for section in SECTIONS:
        m = re.search(rf"^## {re.escape(section)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
        if m is None:
            raise SystemExit(f"fairseq_ctx: error: README.md has no '## {section}' section")
        for block in re.findall(r"^```bash\n(.*?)^```", m.group(1), re.S | re.M):
            joined = re.sub(r"\\\n\s*", "", block)
            commands += [line.strip() for line in joined.splitlines()
                         if line.strip() and not line.strip().startswith("#")]
    return commands


def parse_results(command: str, out: str) -> Dict:
    """What a step printed that the README quotes."""
    res: Dict = {}
    # pytest's last summary line: "2 failed, 1300 passed, 130 skipped, 3 warnings in 605.12s (0:10:05)"
    summary = re.findall(r"^=*\s*((?:\d+ \w+(?:, )?)+) in [\d.]+s", out, re.M)
    if "pytest" in command and summary:
        res["tests"] = {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", summary[-1])}
    scores = parse_table(out)  # fairseq-ctx-score's table, read through its header
    if scores:
        res["scores"] = {name: {k: float(v) for k, v in row.items()} for name, row in scores.items()}
    cxmi = re.findall(r"against none\s+([+-]\d+\.\d+) ", out)
    if cxmi:
        res["cxmi_against_none"] = [float(x) for x in cxmi]
    table = quickstart.read_table(out)
    if table:
        res["quickstart"] = table
    return res


def run_step(command: str, cwd: str, env: Dict[str, str], log: str) -> Dict:
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.time()
    with open(log, "w") as f:
        proc = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT)
    wall, after = time.time() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(log, errors="replace") as f:
        out = f.read()
    return {"command": command, "returncode": proc.returncode, "wall_s": round(wall, 1),
            "cpu_s": round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 1),
            "results": parse_results(command, out), "tail": out[-1500:], "log": log}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", required=True, help="a new folder: the clone goes to WORK/fairseq_ctx, its venv beside")
    p.add_argument("--json", required=True, help="the record, rewritten after every step")
    p.add_argument("--machine", required=True, help="the machine and what else it ran meanwhile")
    p.add_argument("--source", default=REPO, help="the repository to clone (default: this one)")
    p.add_argument("--commit", default="HEAD", help="the commit to measure (default: HEAD)")
    p.add_argument("--steps", type=int, nargs="+", help="run only these steps (0: clone, 1: venv, 2..: README)")
    p.add_argument("--python", default=sys.executable, help="the interpreter the venv is made from")
    p.add_argument("--record-first-model", action="store_true",
                   help="run the README's first command through scripts/record_first_model.py (which runs exactly "
                        "it), its record written to WORK/first-model.json with --machine's words; the clone's own "
                        "record is restored for the later steps")
    args = p.parse_args(argv)

    work = os.path.abspath(args.work)
    clone, venv = os.path.join(work, "fairseq_ctx"), os.path.join(work, "venv")
    logs = os.path.join(work, "logs")
    commit = subprocess.run(["git", "rev-parse", args.commit], cwd=args.source, capture_output=True,
                            text=True, check=True).stdout.strip()
    record = {"commit": commit, "machine": args.machine, "cores": os.cpu_count(), "steps": {}}
    if os.path.exists(args.json):
        with open(args.json) as f:
            old = json.load(f)
        if old.get("commit") == commit:
            record["steps"] = old.get("steps", {})

    def save():
        with open(args.json, "w") as f:
            json.dump(record, f, indent=2)

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "OMP_NUM_THREADS")}
    env.update(PATH=f"{venv}/bin:{env['PATH']}", VIRTUAL_ENV=venv)
    setup = [("git clone", f"git clone -q {shlex.quote(args.source)} {shlex.quote(clone)} && "
                           f"git -C {shlex.quote(clone)} checkout -q --detach {commit}", work),
             ("venv", f"{shlex.quote(args.python)} -m venv {shlex.quote(venv)}", work)]
    wanted = set(args.steps) if args.steps else None
    os.makedirs(logs, exist_ok=True)
    for i, (name, command, cwd) in enumerate(setup):
        if wanted is None or i in wanted:
            record["steps"][str(i)] = dict(run_step(command, cwd, env, os.path.join(logs, f"{i}.log")), name=name)
            save()
            if record["steps"][str(i)]["returncode"]:
                sys.exit(f"newcomer: step {i} ({name}) failed; see {logs}/{i}.log")
    with open(os.path.join(clone, "README.md")) as f:
        commands = readme_commands(f.read())
    for i, command in enumerate(commands, start=len(setup)):
        if wanted is not None and i not in wanted:
            continue
        print(f"newcomer: step {i}: {command}", flush=True)
        run_as = command
        if args.record_first_model and command == FIRST_MODEL:
            run_as = f"python3 scripts/record_first_model.py --machine {shlex.quote(args.machine)}"
        step = run_step(run_as, clone, env, os.path.join(logs, f"{i}.log"))
        if run_as != command:
            # the record goes beside the clone, and the clone's committed one back in its place, so that
            # the later steps (the README's numbers test among them) see the commit as a newcomer does
            shutil.copy(os.path.join(clone, FIRST_MODEL_RECORD), os.path.join(work, "first-model.json"))
            subprocess.run(["git", "-C", clone, "checkout", "-q", "--", FIRST_MODEL_RECORD], check=True)
            step.update(command=command, run_as=run_as, record=os.path.join(work, "first-model.json"))
        record["steps"][str(i)] = step
        save()
        print(f"newcomer: step {i}: rc {step['returncode']}, {step['wall_s']} s wall, {step['cpu_s']} s CPU "
              f"{step['results']}", flush=True)
    failed = [k for k, s in record["steps"].items() if s["returncode"]]
    sys.exit(f"newcomer: steps {failed} failed" if failed else 0)


if __name__ == "__main__":
    main()
