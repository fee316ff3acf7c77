"""The shipped models (models/bible/: the study's baseline and context
encoder): the folder's files are those its SHA256SUMS lists, and the
README's first command after the install runs on them and prints the BLEU,
chrF and CXMI that the README states. Skipped only where the models' files
are absent."""
import hashlib
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MODEL = REPO / "models" / "bible"
NAMES = ("baseline", "ctxenc")
README = REPO / "README.md"
RECORD = REPO / "benchmarks" / "first-model.json"

pytestmark = [pytest.mark.skipif(not all((MODEL / f"{n}.pt").is_file() for n in NAMES),
                                 reason="the shipped models are absent")]


def first_command():
    """The README's first shell command after the install block: the
    first fenced block after the one running scripts/install.sh, first
    line that is not a comment."""
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    i = next(i for i, b in enumerate(blocks) if "scripts/install.sh" in b)
    lines = [line.split("#")[0].strip() for line in blocks[i + 1].splitlines()]
    return next(line for line in lines if line)


def readme_numbers():
    """The BLEU and chrF of each model and the context encoder's CXMI that
    the README says the first command prints."""
    text = " ".join(README.read_text(encoding="utf-8").split())
    m = re.search(r"prints BLEU ([\d.]+) and chrF ([\d.]+) for the baseline, ([\d.]+) and ([\d.]+) for the "
                  r"context encoder.*?CXMI ([+\d.]+) bits", text)
    assert m, ("README.md: no 'prints BLEU X and chrF Y for the baseline, X2 and Y2 for the context encoder "
               "... CXMI Z bits' sentence")
    return {"baseline": (m.group(1), m.group(2)), "ctxenc": (m.group(3), m.group(4))}, m.group(5)


def test_sha256sums_list_every_file():
    listed = {}
    for line in (MODEL / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ", 1)
        listed[name] = digest
    present = {p.relative_to(MODEL).as_posix() for p in MODEL.rglob("*") if p.is_file()} - {"SHA256SUMS"}
    assert set(listed) == present
    for name, digest in listed.items():
        assert hashlib.sha256((MODEL / name).read_bytes()).hexdigest() == digest, name
    total = sum((MODEL / name).stat().st_size for name in present | {"SHA256SUMS"})
    assert total <= 12 * 1024 * 1024, f"the shipped models take {total:,} bytes, over 12 MB"


def test_the_readme_first_command_prints_the_readme_numbers(tmp_path):
    command = first_command()
    assert command.startswith("bash scripts/first-model.sh"), command
    out = tmp_path / "first-model"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    # the README's command, its outputs in a temporary folder instead of runs/first-model
    proc = subprocess.run(f"{command} {out}", shell=True, cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    printed = proc.stdout + proc.stderr
    scores, cxmi = readme_numbers()
    for name, (bleu, chrf) in scores.items():
        m = re.search(rf"^{name}\s+([\d.]+)\s+([\d.]+)\s", printed, flags=re.M)
        assert m, printed[-3000:]
        assert (m.group(1), m.group(2)) == (bleu, chrf), f"{name}: printed BLEU {m.group(1)} chrF {m.group(2)}"
    assert re.search(rf"against none\s+{re.escape(cxmi)} ", printed), printed[-3000:]
    systems = {s["name"]: s for s in json.loads((out / "scores.json").read_text())["systems"]}
    record = json.loads(RECORD.read_text())
    for name in NAMES:
        assert {k: round(systems[name][k], 4) for k in ("bleu", "chrf", "ter", "dbleu")} == \
            record["models"][name]["scores"], name
        hyps = (out / f"test.{name}.en").read_text(encoding="utf-8")
        assert hashlib.sha256(hyps.encode()).hexdigest() == record["models"][name]["translations_sha256"], name


def test_a_shipped_model_keeps_the_flags_it_was_trained_with():
    """scripts/ship_model.py keeps the checkpoint's task state, where the
    document task records the flags it was trained with: decoding the
    shipped model with others is checked as for the checkpoint."""
    import importlib.util

    import torch

    spec = importlib.util.spec_from_file_location("ship_model", REPO / "scripts" / "ship_model.py")
    ship_model = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ship_model)
    flags = {"concat_context": True, "target_context": False, "context_separator": "<sep>", "context_size": 1,
             "context_mode": "previous"}
    state = {"model": {"w": torch.ones(2)}, "cfg": {"task": {"data": "/trained/here"}},
             "optimizer_history": [{"num_updates": 3, "optimizer": {}}], "task_state": {"document_flags": flags}}
    slim = ship_model.slim_state(state)
    assert slim["task_state"] == {"document_flags": flags} and slim["cfg"]["task"]["data"] == "."
