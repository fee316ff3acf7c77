"""A fifth architecture built from docs/adding-an-architecture.md.

Why: the page lists every file a new architecture and its paper's tables
touch, and a list nobody follows drifts (it once named 8 files and left the
tables out). Here it is followed, for a made-up ``transformer_toy`` (fairseq's
encoder layer and a gated sentence summary, Doe et al. 2025, a made-up paper
whose tables module and configs are ``doe``):

1. The page's list (the table under "The files, in order") names files that
   exist (an ``<arch>``/``<paper>`` path: for one of the four), numbered in
   order, and its count of what the example touches is the build's.
2. In a copy of the repository (``scripts/mutation_check.py``'s, whose
   ``conftest.py`` records that the copy's ``fairseq_ctx`` is the one
   imported), :data:`STEPS` does one step per row it follows, in the page's
   order: the new files come from ``tests/fixtures/fifth_architecture/``, at
   the paths they take in the repository; the others are edited where the
   row says. Every "always" row must be followed.
3. One Python process in the copy does what the page says to generate (the
   hydra YAML, the fixture checkpoint), the dry runs of the toy's table, and
   the suite's checks that take a new architecture from the catalogue, with
   ``-k``: the contract, the option grid, registration, readouts, warnings,
   hydra, tables, mutation patterns, fixtures, console scripts, the table
   analyses' hooks and the toy's own tests (all but one check of the
   contract: :data:`SELECT` says which and why).
4. The copy then differs from this checkout in exactly the files of the
   rows followed, and each check passed.

So it fails when the page names a file that moved, when a step needs a file
the page does not name (the checks fail, or :data:`STEPS` holds a row the
page lacks), or when the page's order or count is not the build's.
"""
import fnmatch
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.utils import REPO, load_script

DOC = REPO / "docs" / "adding-an-architecture.md"
FIXTURE = REPO / "tests" / "fixtures" / "fifth_architecture"
NAMES = {"<arch>": "toy", "<paper>": "doe"}
COPIED = ("docs", "README.md", "setup.py")  # beside mutation_check's COPIED: the page's other files


def _mutation_check():
    return load_script("mutation_check")


def page_rows():
    """``(number, path, when)`` of each row of the page's list."""
    section = DOC.read_text(encoding="utf-8").split("\n## The files, in order\n", 1)[1].split("\n## ", 1)[0]
    return [(int(n), path, when.strip()) for n, path, when in
            re.findall(r"^\| (\d+) \| `([^`]+)` \| ([^|]+) \|", section, re.M)]


def toy_path(row_path: str) -> str:
    for placeholder, name in NAMES.items():
        row_path = row_path.replace(placeholder, name)
    return row_path


# ---------------------------------------------------------------------------
# editing a file at the place a row names


def _edit(repo: Path, rel: str, change):
    path = repo / rel
    text = path.read_text(encoding="utf-8")
    new = change(text)
    assert new != text, f"{rel}: the step changed nothing"
    path.write_text(new, encoding="utf-8")


def _once(text: str, anchor: str) -> int:
    assert text.count(anchor) == 1, (f"{anchor!r} occurs {text.count(anchor)} times: the code moved; change the "
                                     "page, the fixture and this test's step together")
    return text.index(anchor)


def _last_in_literal(opener: str, entry: str):
    """``entry`` added as the last line of the bracketed literal that starts at
    ``opener`` (its closing bracket starts a line)."""
    def change(text):
        close = re.compile(r"^[\])}]", re.M).search(text, _once(text, opener))
        return text[:close.start()] + entry + text[close.start():]
    return change


def _table_row(header: str, row: str):
    """``row`` appended to the markdown table whose header line is ``header``."""
    def change(text):
        end = re.compile(r"(?:^\|.*\n)+", re.M).match(text, _once(text, header)).end()
        return text[:end] + row + "\n" + text[end:]
    return change


def _before(anchor: str, addition: str):
    def change(text):
        at = _once(text, anchor)
        return text[:at] + addition + text[at:]
    return change


def _append(addition: str):
    return lambda text: text.rstrip("\n") + "\n" + addition


def _sub(pattern: str, replacement):
    def change(text):
        new, n = re.subn(pattern, replacement, text, count=1, flags=re.M | re.S)
        assert n == 1, f"no match for {pattern!r}: the code moved"
        return new
    return change


def edit(rel: str, *changes):
    def step(repo: Path):
        for change in changes:
            _edit(repo, rel, change)
    return step


def copy_new(rel_glob: str):
    """The fixture's files at ``rel_glob``, into the copy."""
    def step(repo: Path):
        found = sorted(FIXTURE.glob(rel_glob))
        assert found, f"tests/fixtures/fifth_architecture has nothing at {rel_glob}"
        for src in found:
            dest = repo / src.relative_to(FIXTURE)
            assert not dest.exists(), f"{dest.relative_to(repo)} exists already"
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dest)
    return step


GENERATED = None  # made by the driver in the copy, after every edit (the page's command)

def page_code(heading: str) -> str:
    """The first python block of the page's section ``heading``: its example
    code, which the toy's build uses as written."""
    section = DOC.read_text(encoding="utf-8").split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"^ *```python\n(.*?)^ *```", section, re.M | re.S).group(1)


def catalogue_code():
    """The page's catalogue entry: (the constructor, its line in VARIANTS,
    in _GRIDS, in RECIPES), split at the block's comment lines."""
    constructor, *lines = re.split(r"^# .*\n", page_code("2. The catalogue entry"), flags=re.M)
    assert len(lines) == 3, "the page's catalogue example: a constructor, then VARIANTS, _GRIDS and RECIPES lines"
    return ("\n" + constructor.strip("\n") + "\n\n", *lines)


def mutant_code():
    """The page's planted bug, as an entry of MUTANTS."""
    return textwrap.indent(textwrap.dedent(page_code("5. Keep it honest")), "    ")


HOOK = '''

class ToyGates(Analysis):
    """Mean gate per encoder layer of transformer_toy (Doe et al. 2025;
    fairseq_ctx/analysis/toy_gates.py)."""
    name = "toy gates"

    def __init__(self, rows: Sequence[str]):
        self.rows = rows

    def run(self, run):
        states = self._models(run, self.rows)
        out = run.table_dir / "toy_gates"
        if not (out / "toy_gates.json").exists():
            argv = [str(states[0].bin_dir), "--path", ":".join(str(s.avg) for s in states), "--gen-subset", "valid",
                    "--out", str(out), *read_args(states[0].data_cfg.train_config(run.configs))]
            if run.smoke or run.opts.cpu:
                argv += ["--cpu"]
            self._call("fairseq_ctx.analysis.toy_gates", argv)
        summary = json.loads((out / "toy_gates.json").read_text())
        return "mean gate per encoder layer (Doe et al. 2025):\\n" + "\\n".join(
            f"  {label}: " + ", ".join(f"{g:.3f}" for g in c["mean_gate"])
            for label, c in zip(self.rows, summary["checkpoints"]))
'''

HOOK_TEST = '''

def test_toy_gates_hook(trained_checkpoint, doc_corpus, tmp_path):
    """transformer_toy's hook on the contract's checkpoint of it (two updates
    on the toy corpus, src -> tgt), in a stand-in table run of one row."""
    from fairseq_ctx.tables.datasets import Dataset

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "toy.args").write_text("--source-lang src\\n--target-lang tgt\\n")
    corpus = Dataset("toy", str(doc_corpus[1]), "the toy corpus")
    (tmp_path / "toy").mkdir()
    shutil.copy(trained_checkpoint("toy"), tmp_path / "toy" / "checkpoint_avg.pt")
    row = RowState(SimpleNamespace(label="toy", model_of=None), corpus, corpus, doc_corpus[1],
                   model_dir=tmp_path / "toy")
    run = SimpleNamespace(states={"toy": row}, configs=tmp_path, table_dir=tmp_path / "table", smoke=True,
                          opts=SimpleNamespace(cpu=True), model_state=lambda st: st)
    summary = analyses.ToyGates(["toy"]).run(run)
    res = json.loads((run.table_dir / "toy_gates" / "toy_gates.json").read_text())
    gates = res["checkpoints"][0]["mean_gate"]
    assert len(gates) == 2 and res["subset"] == "valid"
    assert summary.splitlines()[1] == "  toy: " + ", ".join(f"{g:.3f}" for g in gates)
'''

# One step per row of the page that the toy follows, in the page's order:
# (the row's path, what the toy does there).
STEPS = [
    ("fairseq_ctx/model_options.py", edit("fairseq_ctx/model_options.py", _append(
        "\n# transformer_toy (Doe et al. 2025, made up): --toy-gate, --toy-layers; the first is the default\n"
        'TOY_GATES: Tuple[str, ...] = ("vector", "scalar")\nTOY_LAYERS: Tuple[str, ...] = ("all", "top")\n'))),
    ("fairseq_ctx/modules/<arch>_*.py", copy_new("fairseq_ctx/modules/toy_*.py")),
    ("fairseq_ctx/models/transformer_<arch>.py", copy_new("fairseq_ctx/models/transformer_toy.py")),
    ("fairseq_ctx/models/__init__.py", edit("fairseq_ctx/models/__init__.py", _last_in_literal(
        "from fairseq_ctx.models import (", "    transformer_toy,\n"))),
    ("fairseq_ctx/architectures.py", edit(
        "fairseq_ctx/architectures.py",
        _last_in_literal("from fairseq_ctx.model_options import (", "    TOY_GATES,\n    TOY_LAYERS,\n"),
        lambda text: _before("\nVARIANTS", catalogue_code()[0])(text),
        lambda text: _last_in_literal("\nVARIANTS", catalogue_code()[1])(text),
        lambda text: _last_in_literal("\n_GRIDS", catalogue_code()[2])(text))),
    ("tests/test_<arch>.py", copy_new("tests/test_toy.py")),
    ("tests/test_readout.py", edit(
        "tests/test_readout.py",
        _sub(r"^(COUNTS = \{[^}]*)\}", r'\1, "toy": 2}'),
        _sub(r"^(from fairseq_ctx\.modules\.readout import .*?\n)",
             r"\1from fairseq_ctx.modules.toy_gated_summary import ToyGatedSummary\n"),
        _sub(r"^(def _expected\(model\):\n.*?\n)(    return )(.*?)\n",
             r"\1    toy = [m for m in model.modules() if isinstance(m, ToyGatedSummary)]\n\2\3 + toy\n"),
        # its readout modules by its settings, in the count the table is checked against
        _sub(r"^(    def count\(v\):\n(?:        [^\n]*\n)*?        return [^\n]*)\n",
             r'\1 + {"all": layers, "top": 1}.get(v.settings.get("toy_layers"), 0)\n'))),
    ("tests/test_model_options.py", edit("tests/test_model_options.py", _last_in_literal(
        '@pytest.mark.parametrize("arch, expected", [',
        '    ("transformer_toy", {"toy_gate": model_options.TOY_GATES[0], '
        '"toy_layers": model_options.TOY_LAYERS[0]}),\n'))),
    ("docs/architectures.md", edit("docs/architectures.md", _append(
        "\n## `transformer_toy` (Doe et al. 2025, made up)\n\nfairseq's encoder layer followed by a gated summary "
        "of the sentence (`--toy-gate vector|scalar`, `--toy-layers all|top`); presets `transformer_toy`, "
        "`_tiny`; +4.72M parameters at Base size.\n"))),
    ("README.md", edit("README.md", _table_row(
        "| `--arch` | paper | what changes |",
        "| `transformer_toy` | Doe et al. 2025 (made up) | a gated summary of the sentence after each encoder "
        "layer |"))),
    ("docs/ambiguities.md", edit("docs/ambiguities.md", _append(
        "\n## Doe et al. 2025 (transformer_toy, made up)\n- The summary's mean leaves out padding.\n"))),
    ("configs/<paper>/*.args", copy_new("configs/doe/*.args")),
    ("fairseq_ctx/architectures.py", edit("fairseq_ctx/architectures.py",
                                          lambda text: _last_in_literal("\nRECIPES", catalogue_code()[3])(text))),
    ("configs/hydra/<paper>_*.yaml", GENERATED),
    ("fairseq_ctx/tables/<paper>.py", copy_new("fairseq_ctx/tables/doe.py")),
    ("fairseq_ctx/tables/__init__.py", edit("fairseq_ctx/tables/__init__.py",
                                            _sub(r'^(TABLE_MODULES = \([^)]*)\)', r'\1, "doe")'))),
    ("docs/tables.md", edit("docs/tables.md", _table_row(
        "| `TABLE` | rows |", "| `doe-table1` | 3: Transformer, toy with a vector gate, with a scalar gate | "
                             "mean gate per layer |"))),
    ("fairseq_ctx/analysis/<arch>_*.py", copy_new("fairseq_ctx/analysis/toy_*.py")),
    ("fairseq_ctx/tables/analyses.py", edit("fairseq_ctx/tables/analyses.py", _append(HOOK))),
    ("fairseq_ctx/cli.py", edit("fairseq_ctx/cli.py", _append(
        '\n\ndef toy_gates():\n    _console("fairseq_ctx.analysis.toy_gates")\n'))),
    ("setup.py", edit("setup.py", _sub(r'(.*"fairseq-ctx-[\w-]+ = fairseq_ctx\.cli:\w+",\n)',
                                       r'\1            "fairseq-ctx-toy-gates = fairseq_ctx.cli:toy_gates",\n'))),
    ("README.md", edit("README.md", _table_row(
        "| command | what |",
        "| `fairseq-ctx-toy-gates` | transformer_toy's mean gate per layer (Doe et al. 2025) |"))),
    ("tests/test_table_analyses.py", edit("tests/test_table_analyses.py", _append(HOOK_TEST))),
    ("scripts/mutation_check.py", edit("scripts/mutation_check.py",
                                       lambda text: _last_in_literal("\nMUTANTS", mutant_code())(text))),
    ("docs/mutation.md", edit("docs/mutation.md", _sub(r"The list holds (\d+) mutants",
                                                       lambda m: f"The list holds {int(m.group(1)) + 1} mutants"))),
    ("tests/fixtures/make_checkpoints.py", edit("tests/fixtures/make_checkpoints.py", _last_in_literal(
        "\nFIXTURES = {", '    "toy": "toy_vector_all",\n'))),
    ("tests/fixtures/checkpoints/<arch>.pt", GENERATED),
]


def followed_rows():
    """The page's rows the toy follows, matched with :data:`STEPS` in order;
    fails on an "always" row it skips or a step the page does not list."""
    steps = [path for path, _ in STEPS]
    followed = []
    for number, path, when in page_rows():
        if steps[len(followed):len(followed) + 1] == [path]:
            followed.append(number)
        else:
            assert when != "always", (
                f"row {number} ({path}) is for every architecture, but the toy's next step is at "
                f"{steps[len(followed):len(followed) + 1]}: a row the page lacks, a step the build lacks, or "
                "another order")
    assert len(followed) == len(steps), (
        f"the toy's build does {steps[len(followed)]} where the page lists no such row (or not in this order)")
    return followed


# ---------------------------------------------------------------------------
# the page


def test_the_page_names_existing_files_in_numbered_rows():
    rows = page_rows()
    assert [n for n, _, _ in rows] == list(range(1, len(rows) + 1)), "the rows are not numbered 1, 2, ..."
    missing = [f"row {n}: {path}" for n, path, _ in rows if not list(REPO.glob(re.sub(r"<[a-z]+>", "*", path)))]
    assert not missing, "the page names files that do not exist:\n" + "\n".join(missing)
    tracker = re.search(r"\b(issue|item) \d+|#\d{2,}", DOC.read_text(encoding="utf-8"), re.I)
    assert not tracker, f"the page cites the issue tracker ({tracker.group(0)}): say the thing itself"


def test_the_toy_follows_every_always_row_in_order():
    followed = followed_rows()
    always = [n for n, _, when in page_rows() if when == "always"]
    assert set(always) <= set(followed) and followed == sorted(followed)


def test_the_fixture_holds_exactly_the_new_files_of_the_copy_steps():
    globs = [toy_path(path) for path, step in STEPS if step is not GENERATED]
    fixture = {p.relative_to(FIXTURE).as_posix() for p in FIXTURE.rglob("*") if p.is_file()
               and "__pycache__" not in p.parts}
    new = {f for f in fixture if any(fnmatch.fnmatchcase(f, g) for g in globs)}
    assert new == fixture, f"fixture files no step copies: {sorted(fixture - new)}"
    assert not any((REPO / f).exists() for f in fixture), "a fixture file is in the repository already"


# ---------------------------------------------------------------------------
# the build in a copy

DRIVER = '''
"""Run in the copy: the page's generated files, the table's dry runs and the checks."""
import contextlib, io, json, os, shutil, sys

import pytest

repo, out = sys.argv[1], sys.argv[2]
result = {}
from fairseq_ctx.tables import hydra_configs
result["hydra"] = hydra_configs.main([])  # python3 -m fairseq_ctx.tables.hydra_configs
from tests.fixtures import make_checkpoints
make_checkpoints.main(os.path.join(out, "fixtures"))  # PYTHONPATH=. python3 tests/fixtures/make_checkpoints.py OUT
shutil.copy(os.path.join(out, "fixtures", "toy.pt"), os.path.join(repo, "tests", "fixtures", "checkpoints"))
from fairseq_ctx.tables.__main__ import main as table
for mode, extra in (("full", []), ("smoke", ["--smoke"])):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        result[mode + "_rc"] = table(["doe-table1", "--dry-run", "--out", os.path.join(out, "runs"), *extra])
    result[mode] = buf.getvalue()


class Outcomes:
    def __init__(self):
        self.outcomes = {}

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            self.outcomes[report.nodeid] = report.outcome


outcomes = Outcomes()
result["pytest"] = int(pytest.main(sys.argv[3:], plugins=[outcomes]))
result["outcomes"] = outcomes.outcomes
with open(os.path.join(out, "result.json"), "w") as f:
    json.dump(result, f)
'''

TESTS = ["tests/test_contract.py", "tests/test_warnings.py", "tests/test_checkpoint_compat.py",
         "tests/test_model_options.py", "tests/test_readout.py", "tests/test_hydra.py", "tests/test_tables.py",
         "tests/test_mutation_patterns.py", "tests/test_console_scripts.py", "tests/test_table_analyses.py",
         "tests/test_toy.py"]
# the toy's and its table's tests, and the checks over every architecture or table that its entries join;
# not the contract's fairseq-validate check, whose command runs in a fork server of its own (another
# import of torch and fairseq, 8 s of CPU): generate, score-reference and interactive run in this process
SELECT = "(" + " or ".join([
    "toy", "doe-table1", "test_model_options", "test_readout", "test_mutation_patterns", "up_to_date",
    "every_recipe_is_accepted", "every_table_row", "every_config_parses", "gpu_assumption", "dry_run_of_every_table",
    "readme_lists"]) + ") and not test_validate_loss_equals_score_reference"
# files run whole (quick, and each holds a check over every architecture, whatever its name)
WHOLE = ("tests/test_model_options.py", "tests/test_readout.py", "tests/test_mutation_patterns.py")


def _digests(root: Path):
    return {p.relative_to(root).as_posix(): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """The copy after every step and the driver: (copy, files the build
    added or changed, the driver's result)."""
    tmp = tmp_path_factory.mktemp("fifth_architecture")
    repo = _mutation_check().make_copy(tmp)
    for name in COPIED:
        (shutil.copytree if (REPO / name).is_dir() else shutil.copy)(REPO / name, repo / name)
    before = _digests(repo)
    for _, step in STEPS:
        if step is not GENERATED:
            step(repo)
    out = tmp / "out"
    (tmp / "drive.py").write_text(DRIVER)
    env = dict(os.environ, PYTHONPATH=str(repo), PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1",
               MUTATION_IMPORT_LOG=str(tmp / "import.log"))
    env.setdefault("FAIRSEQ_CTX_SHARED", str(REPO.parent / "shared"))
    proc = subprocess.run([sys.executable, str(tmp / "drive.py"), str(repo), str(out),
                           "-q", "-rfE", "-p", "no:cacheprovider", *TESTS, "-k", SELECT],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=1200)
    assert (out / "result.json").is_file(), proc.stdout[-4000:] + proc.stderr[-4000:]
    result = json.loads((out / "result.json").read_text())
    result["log"] = proc.stdout[-6000:] + proc.stderr[-3000:]
    result["imported"] = sorted(set((tmp / "import.log").read_text().split()))
    after = _digests(repo)
    assert set(before) <= set(after), f"the build removed {sorted(set(before) - set(after))}"
    touched = sorted(f for f in after if before.get(f) != after[f])
    return repo, touched, result


def test_the_build_touches_exactly_the_files_of_the_rows_it_follows(build):
    repo, touched, _ = build
    patterns = [toy_path(path) for path, _ in STEPS]
    unlisted = [f for f in touched if not any(fnmatch.fnmatchcase(f, p) for p in patterns)]
    assert not unlisted, f"the build touched files no row of the page names: {unlisted}"
    untouched = [p for p in patterns if not any(fnmatch.fnmatchcase(f, p) for f in touched)]
    assert not untouched, f"rows whose files the build did not touch: {untouched}"
    # the page's count of what the example touches
    m = re.search(r"The example follows (\d+) of the (\d+) rows and so touches (\d+) files,\s+(\d+) of them configs",
                  DOC.read_text(encoding="utf-8"))
    assert m, "the page no longer states what the example touches"
    configs = [f for f in touched if f.startswith("configs/")]
    assert [int(x) for x in m.groups()] == [len(followed_rows()), len(page_rows()), len(touched), len(configs)]


def test_the_copys_own_fairseq_ctx_ran_the_checks_and_they_passed(build):
    repo, _, result = build
    assert result["imported"] == [str(repo / "fairseq_ctx")]
    failed = {k: v for k, v in result["outcomes"].items() if v == "failed"}
    assert result["pytest"] == 0 and not failed, f"{failed}\n{result['log']}"
    passed = [k for k, v in result["outcomes"].items() if v == "passed"]
    # each check the page promises, run on the toy (one node id each, or more)
    for expected in [
        "test_contract.py::test_sentence_alone_equals_sentence_in_padded_batch[toy]",
        "test_contract.py::test_incremental_decoding_equals_full_forward[toy]",
        "test_contract.py::test_reorder_encoder_out_equals_encoding_the_permuted_batch[toy]",
        "test_contract.py::test_reorder_incremental_state_moves_every_cached_value[toy]",
        "test_contract.py::test_beam_search_translates_a_sentence_the_same_alone_and_in_a_batch[toy]",
        "test_contract.py::test_half_precision_forward_and_backward[toy-fp16]",
        "test_contract.py::test_checkpoint_activations_wraps_every_layer_and_keeps_gradients[toy-0.3-pre-offload]",
        "test_contract.py::test_checkpointed_parameters_get_their_gradient_in_one_accumulation[toy]",
        "test_contract.py::test_retain_dropout_makes_evaluation_draw_trainings_dropout[toy]",
        "test_contract.py::test_generate_translates_every_sentence[toy]",
        "test_contract.py::test_score_reference_scores_every_reference[toy]",
        "test_contract.py::test_interactive_equals_generate[toy]",
        "test_contract.py::test_option_grid_settings_are_what_fairseq_parses[transformer_toy]",
        "test_contract.py::test_option_grid_models_have_what_they_declare[toy_",
        "test_warnings.py::test_no_mask_type_warning_in_training_and_full_forward[toy_",
        "test_model_options.py::test_architecture_defaults_are_the_options[transformer_toy-",
        "test_readout.py::test_reading_switches_on_exactly_the_readout_modules_and_keeps_nothing_after[toy]",
        "test_hydra.py::test_generated_configs_are_up_to_date",
        "test_hydra.py::test_the_dataclass_is_the_source_of_the_flags[transformer_toy]",
        "test_hydra.py::test_same_config_and_model_as_fairseq_train[transformer_toy]",
        "test_tables.py::test_dry_run_of_every_table_prints_every_command",
        "test_tables.py::test_smoke_flags_come_last_and_keep_every_row_flag[doe-table1]",
        "test_tables.py::test_every_config_parses_and_fairseq_accepts_its_flags",
        "test_mutation_patterns.py::test_pattern_occurs_exactly_once[toy_summary_reads_padding]",
        "test_checkpoint_compat.py::test_old_checkpoint_loads_and_gives_the_same_outputs[toy]",
        "test_console_scripts.py::test_help_shows_an_example_without_importing_torch[fairseq-ctx-toy-gates]",
        "test_console_scripts.py::test_readme_lists_every_console_script_in_one_table",
        "test_table_analyses.py::test_toy_gates_hook",
        "test_toy.py::test_summary_is_eq_1_to_3_over_the_real_positions[vector]",
        "test_toy.py::test_gates_command_averages_over_the_real_tokens",
    ]:
        assert any(expected in k for k in passed), f"{expected} did not pass\n{result['log']}"
    # the quick files ran whole
    for name in WHOLE:
        ran = [k for k in result["outcomes"] if k.startswith(name + "::")]
        assert len(ran) == len([k for k in passed if k.startswith(name + "::")]) > 0, name


def test_the_dry_runs_print_each_rows_commands_with_its_flags(build):
    repo, _, result = build
    assert (result["hydra"], result["full_rc"], result["smoke_rc"]) == (0, 0, 0)
    want = {"doe/01_transformer.args": ("transformer", None), "doe/02_toy_vector.args": ("transformer_toy", None),
            "doe/03_toy_scalar.args": ("transformer_toy", "scalar")}
    for mode in ("full", "smoke"):
        trains = [shlex.split(line) for line in result[mode].splitlines() if " -m fairseq_cli.train " in line]
        generates = [line for line in result[mode].splitlines() if " -m fairseq_cli.generate " in line]
        assert len(trains) == len(generates) == 3, result[mode]
        got = {}
        for cmd in trains:
            flags = {tok: cmd[i + 1] for i, tok in enumerate(cmd[:-1]) if tok.startswith("--")}  # the last wins
            config = re.search(r"models/[^/]+/(doe/[^/]+)/checkpoints", flags["--save-dir"]).group(1) + ".args"
            got[config] = (flags["--arch"], flags.get("--toy-gate"))
            assert flags["--user-dir"] == str(repo / "fairseq_ctx")
            assert flags["--update-freq"] == ("8" if mode == "full" else "1")
        assert got == want, mode
