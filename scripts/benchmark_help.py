#!/usr/bin/env python3
"""Time ``--help`` of every console script of fairseq_ctx:
each should answer in under a second, torch and fairseq being imported only
by the commands themselves.

The console scripts are read from ``setup.py``'s ``entry_points``. Each one
runs as the installed script when it is on ``PATH``, else as the same call
the installed wrapper makes (``python3 -c 'from MODULE import FUNC; FUNC()'``),
in a fresh process, ``--repeats`` times; the median wall time is reported.

Example::

    python3 scripts/benchmark_help.py               # every console script, median of 3
    python3 scripts/benchmark_help.py --repeats 5 --json help_times.json fairseq-ctx-score
"""
import argparse
import ast
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from typing import Dict, List, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMIT_S = 1.0


def console_scripts(setup_py: str = os.path.join(REPO, "setup.py")) -> Dict[str, Tuple[str, str]]:
    """``{name: (module, function)}`` of ``setup.py``'s ``console_scripts``,
    read from its source (no installation needed)."""
    with open(setup_py, encoding="utf-8") as f:
        tree = ast.parse(f.read(), setup_py)
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "entry_points":
            entries = ast.literal_eval(node.value)["console_scripts"]
            break
    else:
        raise SystemExit(f"{setup_py}: no entry_points")
    scripts = {}
    for entry in entries:
        name, target = (part.strip() for part in entry.split("=", 1))
        module, function = target.split(":")
        scripts[name] = (module, function)
    return scripts


def help_command(name: str, module: str, function: str) -> Tuple[List[str], str]:
    """The command that prints ``name``'s help, and how it runs it."""
    found = shutil.which(name)
    if found:
        return [found, "--help"], "installed"
    code = f"import sys; sys.argv[0] = {name!r}; from {module} import {function}; sys.exit({function}())"
    return [sys.executable, "-c", code, "--help"], "python -c"


def time_help(cmd: List[str], repeats: int) -> Tuple[float, int, str]:
    """Median seconds over ``repeats`` runs, the last exit status and its output."""
    times, proc = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
        times.append(time.perf_counter() - start)
    return statistics.median(times), proc.returncode, proc.stdout + proc.stderr


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog=__doc__[__doc__.index("Example::"):].replace("Example::", "example:"),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("names", nargs="*", help="console scripts to time (default: all in setup.py)")
    p.add_argument("--repeats", type=int, default=3, help="runs per script; the median is reported (default 3)")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    scripts = console_scripts()
    unknown = sorted(set(args.names) - set(scripts))
    if unknown:
        p.error(f"not console scripts of setup.py: {', '.join(unknown)}")
    results = {}
    print(f"{'console script':<40} {'median s':>8}  < {LIMIT_S:g} s  runs as")
    for name in args.names or scripts:
        cmd, how = help_command(name, *scripts[name])
        seconds, rc, output = time_help(cmd, args.repeats)
        ok = rc == 0 and seconds < LIMIT_S
        results[name] = {"seconds": round(seconds, 3), "exit_status": rc, "under_limit": ok, "runs_as": how}
        status = "yes" if ok else ("FAILED (exit %d)" % rc if rc else "no")
        print(f"{name:<40} {seconds:8.2f}  {status:<7} {how}", flush=True)
        if rc:
            print("    " + "\n    ".join(output.strip().splitlines()[-5:]), file=sys.stderr)
    slow = [n for n, r in results.items() if not r["under_limit"]]
    print(f"{len(results) - len(slow)}/{len(results)} under {LIMIT_S:g} s (median of {args.repeats})")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"limit_s": LIMIT_S, "repeats": args.repeats, "results": results}, f, indent=2)
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
