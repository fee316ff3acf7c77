"""Every console script of setup.py is installed, listed in the README, and
its ``--help`` exits 0, shows an example and imports neither torch nor
fairseq. Timing is
``scripts/benchmark_help.py``'s business, not a test's."""
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.utils import REPO, load_script


def _benchmark_help():
    return load_script("benchmark_help")


SCRIPTS = _benchmark_help().console_scripts()

# what the console script's wrapper does, with a report of the heavy modules it imported
_RUN_HELP = """
import json, sys
sys.argv = [{name!r}, "--help"]
from {module} import {function}
try:
    {function}()
    status = 0
except SystemExit as e:
    status = e.code or 0
print(json.dumps({{"status": status, "imported": sorted(m for m in ("torch", "fairseq") if m in sys.modules)}}),
      file=sys.stderr)
"""


@pytest.mark.unit
def test_the_plugins_tools_are_all_console_scripts():
    modules = {module for module, _ in SCRIPTS.values()}
    assert {"fairseq_ctx.translate", "fairseq_ctx.average_checkpoints", "fairseq_ctx.evaluation.score",
            "fairseq_ctx.tables.__main__"} <= modules
    for tool in ("contrastive", "ctxsan_gates", "ctxsan_pos", "dc_divergence", "ctxenc_context_attention", "gret_global_state",
                 "probing", "bow_prediction"):
        assert ("fairseq_ctx.cli", tool) in SCRIPTS.values(), tool
    assert all(name.startswith("fairseq-ctx-") for name in SCRIPTS)


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_help_shows_an_example_without_importing_torch(name):
    module, function = SCRIPTS[name]
    proc = subprocess.run([sys.executable, "-c", _RUN_HELP.format(name=name, module=module, function=function)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    assert report["status"] == 0, proc.stdout + proc.stderr
    assert report["imported"] == [], f"{name} --help imported {report['imported']}"
    assert proc.stdout.startswith("usage: "), proc.stdout[:200]
    section = re.search(r"^examples?\b", proc.stdout, re.M)
    example = section and re.search(r"(^ +|^examples?: )" + re.escape(name) + r" ", proc.stdout[section.start():], re.M)
    assert example, f"{name} --help shows no 'example:' section running {name}:\n{proc.stdout[-1500:]}"


@pytest.mark.unit
def test_installed_console_scripts_are_those_of_setup_py():
    try:
        dist = importlib.metadata.distribution("fairseq_ctx")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("fairseq_ctx is not installed (bash scripts/install.sh)")
    installed = {ep.name: ep.value for ep in dist.entry_points if ep.group == "console_scripts"}
    expected = {name: f"{module}:{function}" for name, (module, function) in SCRIPTS.items()}
    assert installed == expected, ("setup.py's console_scripts changed since the install: "
                                   "pip install -e . --no-deps --no-build-isolation")


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_console_script_on_path_answers_help(name):
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed on PATH (bash scripts/install.sh)")
    proc = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("usage: ")


@pytest.mark.unit
def test_readme_lists_every_console_script_in_one_table():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    rows = [line for line in readme.splitlines() if line.startswith("| `fairseq-ctx-")]
    listed = set()
    for row in rows:
        first = row.split("|")[1]
        names = re.findall(r"`(-?[a-z0-9-]+)`", first)
        full = [n for n in names if n.startswith("fairseq-ctx-")]
        # "`fairseq-ctx-prepare-wmt14-en-de`, `-wmt16-ro-en`": the suffixes share the first name's prefix
        prefix = re.match(r"fairseq-ctx-[a-z]+", full[0]).group(0) if full else ""
        listed |= set(full) | {prefix + n for n in names if n.startswith("-")}
    assert set(SCRIPTS) <= listed, f"missing from the README's table: {sorted(set(SCRIPTS) - listed)}"
    assert listed <= set(SCRIPTS), f"in the README's table but not in setup.py: {sorted(listed - set(SCRIPTS))}"


@pytest.mark.unit
def test_tokenizer_and_bpe_are_checked_against_fairseqs_registries(capsys):
    """--tokenizer/--bpe have no argparse choices (building the parser would
    import fairseq); the names are checked once given, as argparse would."""
    from fairseq_ctx.analysis import probing

    with pytest.raises(SystemExit) as exit_:
        probing.parse_args(["--path", "x.pt", "--out", "o", "--bpe", "nope"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "argument --bpe: invalid choice: 'nope'" in err and "sentencepiece" in err and "subword_nmt" in err
    args = probing.parse_args(["--path", "x.pt", "--out", "o", "--tokenizer", "moses",
                               "--bpe", "sentencepiece", "--sentencepiece-model", "spm.model"])
    assert (args.tokenizer, args.bpe, args.sentencepiece_model) == ("moses", "sentencepiece", "spm.model")
