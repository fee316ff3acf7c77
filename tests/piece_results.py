"""A pytest plugin that writes each test's result as its own JSON file the
moment the test is done, for runs that may be killed at a time limit (the GPU
runbook, scripts/gpu-call.sh): every finished test's outcome survives.

    python3 -m pytest tests -m gpu -p tests.piece_results --pieces DIR [--skip-passed DONE]

``--pieces DIR``: one file per test, ``DIR/<node id, made a file name>.json``
with its node id, outcome (passed, failed, skipped, error, or crashed: its
xdist worker died), duration and, when
it did not pass, the end of its report; written through a temporary file and
a rename, so a kill leaves no half file. ``--skip-passed DONE``: tests whose
file in DONE says passed (an earlier call's pieces, carried back) are
deselected, so a second call goes on with the rest. With pytest-xdist only the
controller writes (the workers' reports reach it one by one). A test's new
piece replaces its piece named from another rootdir.

    python3 -m tests.piece_results DIR [--prune]

counts DIR's tests by outcome, each by its latest piece (:func:`main`).
"""
import json
import os
import re
from typing import Dict, List, Tuple

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("piece_results")
    group.addoption("--pieces", metavar="DIR", help="write each test's result to its own JSON file in DIR")
    group.addoption("--skip-passed", metavar="DIR",
                    help="deselect the tests whose JSON in DIR (written by --pieces) says passed")


def piece_name(nodeid: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid).strip("_")[:200] + ".json"


def passed_in(directory) -> set:
    """Node ids that passed according to each test's latest piece in
    ``directory`` (:func:`latest`: an earlier pass of a test that failed
    since does not count)."""
    if not directory or not os.path.isdir(directory):
        return set()
    return {piece["nodeid"] for piece in latest(directory)[0].values() if piece.get("outcome") == "passed"}


def with_every_root(nodeids) -> set:
    """Each node id also under every shorter root: pytest names a test from
    its rootdir, which it takes from the first ini file above the checkout
    (on the H200 of 2026-11-30 that was ``/``: ``work/main/tests/...``), so
    a piece matches a test whose id its own ends with, at a folder boundary
    (``gpu-call.sh`` passes ``--rootdir .`` since; the pieces of that loan
    keep their names)."""
    out = set()
    for nodeid in nodeids:
        path, sep, rest = nodeid.partition("::")
        parts = path.split("/")
        out.update("/".join(parts[i:]) + sep + rest for i in range(len(parts)))
    return out


def pytest_collection_modifyitems(config, items):
    done = with_every_root(passed_in(config.getoption("skip_passed")))
    if not done:
        return
    keep = [item for item in items if item.nodeid not in done]
    dropped = [item for item in items if item.nodeid in done]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def same_test(a: str, b: str) -> bool:
    """Whether node ids ``a`` and ``b`` name one test under two rootdirs."""
    return a in with_every_root([b]) or b in with_every_root([a])


def _write(directory, doc):
    """``doc`` as its test's piece; a piece of the same test named from
    another rootdir (an earlier call's, carried back) is removed, so that
    the directory holds each test's latest outcome once."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, piece_name(doc["nodeid"]))
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=2)
    os.replace(tmp, path)
    for name, piece in _read_pieces(directory).items():
        if name != os.path.basename(path) and same_test(piece["nodeid"], doc["nodeid"]):
            os.remove(os.path.join(directory, name))


def _read_pieces(directory) -> Dict[str, dict]:
    """The pieces in ``directory``, file name -> piece, by name; what is
    not a piece (or one on its way) is left out."""
    pieces = {}
    for name in sorted(os.listdir(directory)):
        if name.endswith(".json"):
            try:
                with open(os.path.join(directory, name)) as f:
                    piece = json.load(f)
            except (OSError, ValueError):
                continue
            if isinstance(piece, dict) and "nodeid" in piece:
                pieces[name] = piece
    return pieces


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report):
    config = _CONFIG.get("config")
    if config is None or hasattr(config, "workerinput"):  # an xdist worker: the controller writes
        return
    directory = config.getoption("pieces")
    if not directory:
        return
    # one file per test: the call phase's outcome, or the setup's when the test never ran
    # (skipped, or an error in a fixture); an error in teardown overrides a pass, and so
    # does the report xdist makes for a test whose worker died (tests/cuda_guard.py ends
    # the worker of a test after which the CUDA context is broken), so it is not skipped
    # as passed next time
    crashed = report.failed and report.when not in ("setup", "call", "teardown")
    if report.when == "call" or (report.when == "setup" and not report.passed) or \
            (report.when == "teardown" and report.failed) or crashed:
        outcome = "crashed" if crashed else report.outcome if report.when == "call" else (
            "skipped" if report.skipped else "error")
        doc = {"nodeid": report.nodeid, "outcome": outcome, "when": report.when,
               "duration_s": round(report.duration, 3)}
        if not report.passed:
            doc["report"] = str(report.longrepr)[-4000:]
        for name, content in report.user_properties:
            doc.setdefault("properties", {})[name] = content
        _write(directory, doc)


_CONFIG = {}


def pytest_configure(config):
    _CONFIG["config"] = config


def latest(directory) -> Tuple[Dict[str, dict], List[str]]:
    """Each test's latest piece in ``directory`` (file name -> piece),
    and the superseded ones (file names): of the pieces naming one test
    under several rootdirs, the one named from the checkout (the shortest
    id) is the latest, since every call after the first loan names tests
    from the checkout (scripts/gpu-call.sh's ``--rootdir .``)."""
    pieces = _read_pieces(directory)
    ids = {name: piece["nodeid"] for name, piece in pieces.items()}
    superseded = {a for a in ids for b in ids
                  if a != b and len(ids[b]) < len(ids[a]) and same_test(ids[a], ids[b])}
    return {name: pieces[name] for name in pieces if name not in superseded}, sorted(superseded)


def main(argv=None):
    """``python3 -m tests.piece_results DIR [--prune]``: how many tests of
    DIR's pieces passed, failed, ... by each test's latest piece, and the
    tests that did not pass; ``--prune`` removes the superseded pieces (a
    test's piece of the first loan, named from another rootdir, after a
    later call ran it again)."""
    import argparse

    p = argparse.ArgumentParser(prog="python3 -m tests.piece_results",
                                description="How many tests of DIR's pieces passed, failed, ... by each test's "
                                            "latest piece, and the tests that did not pass.")
    p.add_argument("directory")
    p.add_argument("--prune", action="store_true", help="remove the superseded pieces")
    opts = p.parse_args(argv)
    if not os.path.isdir(opts.directory):
        p.error(f"{opts.directory}: no such directory")
    kept, superseded = latest(opts.directory)
    outcomes = {}
    for piece in kept.values():
        outcomes.setdefault(piece["outcome"], []).append(piece["nodeid"])
    print(f"{len(kept)} tests: " + ", ".join(f"{len(v)} {k}" for k, v in sorted(outcomes.items())))
    for outcome, nodeids in sorted(outcomes.items()):
        if outcome != "passed":
            print("\n".join(f"  {outcome}: {n}" for n in sorted(nodeids)))
    if superseded:
        print(f"{len(superseded)} superseded pieces" + (", removed" if opts.prune else " (--prune removes them)"))
        if opts.prune:
            for name in superseded:
                os.remove(os.path.join(opts.directory, name))


if __name__ == "__main__":
    main()
