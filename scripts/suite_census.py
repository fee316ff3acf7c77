#!/usr/bin/env python3
"""Where the test suite's time goes: the README's test command run once with
every Python process it starts recorded (``scripts/suite_census_site``:
its wall and CPU seconds, the test it ran for, its command), then per test
file the tests' time (pytest's JUnit XML), the processes the file started
and their CPU, and which commands those were.

    python3 scripts/suite_census.py --out /tmp/census --machine "2 cores, quiet"
    python3 scripts/suite_census.py --out /tmp/census --aggregate-only   # re-read a finished run

Writes OUT/junit.xml, OUT/processes.tsv and OUT/census.json, and prints the
files with the most CPU in new processes. A new interpreter that imports
torch and fairseq costs seconds of CPU before it does anything, so the
census says how much of the suite is starting processes and where.
``--machine`` says what else the machine was doing (the tests' wall times
depend on it; their processes' CPU much less).
"""
import argparse
import collections
import json
import os
import re
import shlex
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SITE = os.path.join(REPO, "scripts", "suite_census_site")


def readme_test_command() -> list:
    """The README's test command, as .ci/run runs it."""
    with open(os.path.join(REPO, ".ci", "run")) as f:
        lines = [line.strip() for line in f if line.startswith("python3 -m pytest")]
    if len(lines) != 1:
        sys.exit("scripts/suite_census.py: error: .ci/run has no single `python3 -m pytest` line")
    return shlex.split(lines[0])


def command_kind(argv: str) -> str:
    """What a process ran, in a word: its script or module file as the last
    two parts of its path (``python -m fairseq_cli.train`` has
    ``fairseq_cli/train.py`` as ``sys.argv[0]``), or ``python -c``."""
    words = argv.split()
    if not words or words[0] in ("-c", ""):
        return "python -c"
    return "/".join(words[0].split("/")[-2:])


def _empty_file() -> dict:
    return {"tests": 0, "test_seconds": 0.0, "processes": 0, "process_cpu_s": 0.0, "process_wall_s": 0.0,
            "by_command": {}}


def aggregate(junit_xml: str, processes_tsv: str) -> dict:
    """Per test file: tests, their summed time, and the processes started on
    their behalf (every recorded process whose test is in that file, except
    pytest's own): count, CPU and wall seconds, by command kind."""
    files = collections.OrderedDict()
    for case in ET.parse(junit_xml).iter("testcase"):
        name = case.get("classname", "").split(".")[-1] + ".py"
        f = files.setdefault(name, _empty_file())
        f["tests"] += 1
        f["test_seconds"] += float(case.get("time") or 0)
    unattributed = {"processes": 0, "process_cpu_s": 0.0}
    with open(processes_tsv, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 6:
                continue
            _, _, wall, cpu, test, argv = parts
            if "pytest" in argv.split(" ", 1)[0]:
                continue  # the test runner itself
            m = re.match(r"(?:.*/)?(test_\w+\.py)::", test)
            if not m:
                unattributed["processes"] += 1
                unattributed["process_cpu_s"] += float(cpu)
                continue
            f = files.setdefault(m.group(1), _empty_file())
            f["processes"] += 1
            f["process_cpu_s"] += float(cpu)
            f["process_wall_s"] += float(wall)
            kind = f["by_command"].setdefault(command_kind(argv), {"processes": 0, "cpu_s": 0.0})
            kind["processes"] += 1
            kind["cpu_s"] += float(cpu)
    for f in files.values():
        for key in ("test_seconds", "process_cpu_s", "process_wall_s"):
            f[key] = round(f[key], 1)
        f["by_command"] = {k: {"processes": v["processes"], "cpu_s": round(v["cpu_s"], 1)}
                           for k, v in sorted(f["by_command"].items(), key=lambda kv: -kv[1]["cpu_s"])}
    unattributed["process_cpu_s"] = round(unattributed["process_cpu_s"], 1)
    ordered = dict(sorted(files.items(), key=lambda kv: -kv[1]["process_cpu_s"]))
    totals = {"tests": sum(f["tests"] for f in files.values()),
              "test_seconds": round(sum(f["test_seconds"] for f in files.values()), 1),
              "processes": sum(f["processes"] for f in files.values()),
              "process_cpu_s": round(sum(f["process_cpu_s"] for f in files.values()), 1)}
    return {"totals": totals, "unattributed": unattributed, "files": ordered}


def table(census: dict, rows: int = 25) -> str:
    lines = [f"{'file':<40}{'tests':>6}{'test s':>9}{'procs':>7}{'proc CPU s':>12}  top commands (processes, CPU s)"]
    for name, f in list(census["files"].items())[:rows]:
        top = ", ".join(f"{k} ({v['processes']}, {v['cpu_s']:.0f})" for k, v in list(f["by_command"].items())[:3])
        lines.append(f"{name:<40}{f['tests']:>6}{f['test_seconds']:>9.1f}{f['processes']:>7}{f['process_cpu_s']:>12.1f}  "
                     f"{top}")
    t = census["totals"]
    lines.append(f"{'all':<40}{t['tests']:>6}{t['test_seconds']:>9.1f}{t['processes']:>7}{t['process_cpu_s']:>12.1f}")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="folder for junit.xml, processes.tsv and census.json")
    p.add_argument("--machine", default="", help="what else the machine was doing (written as given)")
    p.add_argument("--aggregate-only", action="store_true", help="read a finished run in --out; run nothing")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    junit, tsv, record = (os.path.join(args.out, n) for n in ("junit.xml", "processes.tsv", "census.json"))
    run = {}
    if not args.aggregate_only:
        if os.path.exists(tsv):
            os.remove(tsv)
        cmd = readme_test_command()
        env = dict(os.environ, SUITE_CENSUS_LOG=tsv,
                   PYTHONPATH=os.pathsep.join(filter(None, [SITE, os.environ.get("PYTHONPATH")])))
        start = time.time()
        before = os.times()
        proc = subprocess.run(cmd + [f"--junitxml={junit}"], cwd=REPO, env=env)
        after = os.times()
        run = {"command": " ".join(cmd), "returncode": proc.returncode, "wall_s": round(time.time() - start, 1),
               "cpu_s": round(after.children_user + after.children_system
                              - before.children_user - before.children_system, 1),
               "date": time.strftime("%Y-%m-%d"), "machine": args.machine,
               "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                        text=True).stdout.strip()}
    elif os.path.exists(record):
        with open(record) as f:
            run = json.load(f).get("run", {})
    census = {"run": run, **aggregate(junit, tsv)}
    with open(record, "w") as f:
        json.dump(census, f, indent=1)
    print(table(census))
    if run:
        print(f"README test command: exit {run['returncode']}, {run['wall_s']:.0f} s wall, {run['cpu_s']:.0f} s CPU "
              f"(all processes); record {record}")
    return run.get("returncode", 0)


if __name__ == "__main__":
    sys.exit(main())
