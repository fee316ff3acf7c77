"""The GPU runbook's calls (``scripts/gpu-call.sh``), rehearsed on CPU at toy
size: a call killed at its time limit keeps every piece it finished.

The GPU machine gives each command a time limit and kills it there; what
the command left under its output directory comes back, at most 8 files.
Each step writes one JSON per finished piece (a benchmark child, a diagnosis
cell, a test), through a temporary file and a rename, into a work
directory that the call packs into OUT/results.tgz every few seconds. Here
each step runs as the runbook runs it, is killed with SIGKILL (the whole
process group, as a time limit does) once its first piece is in the
archive, and the pieces are read back from it; a second call goes on where
the first stopped (the diagnosis skips the cells it has; pytest deselects
the tests that passed).
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time

import pytest

from tests import cli_process
from tests.utils import REPO, load_script


# the call's own deadline (450 s) cut to the machine's pace would stop a toy call on a
# shared CPU before the kill this test is about; the deadline has a test of its own
NO_DEADLINE = {"GPU_CALL_BUDGET_S": "5000"}


def _start(args, env=None, cwd=REPO):
    """A call in its own process group (a time limit kills the group); its
    python3 forked, with its Python children (tests/cli_zygote.py)."""
    return subprocess.Popen(args, cwd=cwd, env=cli_process.env_with_python(
                                {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _kill_when(proc, ready, timeout=900):
    """SIGKILL ``proc``'s process group as soon as ``ready()`` holds; its output."""
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            pytest.fail(f"the call ended before it was killed (exit {proc.returncode}):\n{proc.stdout.read()[-3000:]}")
        assert time.monotonic() < deadline, "no piece was written in time"
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return proc.stdout.read()


def _pieces(directory):
    return sorted(p for p in os.listdir(directory) if p.endswith(".json")) if os.path.isdir(directory) else []


# what a benchmark child returns, for the tests of the parent's scheduling
CHILD_RESULT = {"params": 1.0, "train_tok_s": 10.0, "decode_sent_s": 1.0, "decode_tok_s": 5.0, "peak_mem_mb": 1.0,
                "train_flops_tok": 2.0, "decode_flops_tok": 2.0, "device_name": "cpu", "peak_flops": None}


def _call_env(tmp_path, **env):
    """A call's environment: its work directory under ``tmp_path`` (kept
    between two calls, as on a warm machine) and a snapshot every second."""
    return {"GPU_CALL_WORK": str(tmp_path / "work"), "GPU_CALL_SNAPSHOT_S": "1", **NO_DEADLINE, **env}


def _archived(out, folder):
    """The JSON files in ``folder`` of the call's archive (OUT/results.tgz,
    what comes back), path in the archive -> text; {} before the first
    snapshot."""
    if not (out / "results.tgz").exists():
        return {}
    with tarfile.open(out / "results.tgz") as tar:
        return {m.name[2:]: tar.extractfile(m).read().decode() for m in tar.getmembers()
                if m.isfile() and m.name.startswith(f"./{folder}/") and m.name.endswith(".json")}


def _what_comes_back(out):
    """OUT as the GPU tool returns it: at most 8 files, none deeper than two
    folders (the archive's leftover part of a killed snapshot counts)."""
    files = [os.path.relpath(os.path.join(d, f), out) for d, _, fs in os.walk(out) for f in fs]
    assert len(files) <= 8 and all(f.count(os.sep) <= 2 for f in files), files
    return sorted(f for f in files if not f.endswith(".part"))


def test_benchmark_call_killed_midway_keeps_its_finished_children(doc_corpus, tmp_path):
    """``gpu-call.sh bench`` at toy size in fp16: killed as the baseline's
    child is archived (on a fast machine the second may have ended too, never
    the third), the baseline's JSON is there, whole, and is fairseq-train's
    fp16 (FP16Optimizer with a loss scale), with its phases' seconds;
    ``--markdown-of`` reads the pieces directory."""
    out = tmp_path / "call"
    proc = _start(["bash", "scripts/gpu-call.sh", "bench", str(out), "--device", "cpu", "--size", "tiny",
                   "--threads", "1", "--max-tokens", "400", "--warmup-updates", "1", "--train-updates", "2",
                   "--decode-sentences", "8", "--decode-batch-size", "4", "--precision", "fp16",
                   "--variants", "ctxsan", "dc"], env=_call_env(tmp_path, DATA_BIN=str(doc_corpus[1])))
    _kill_when(proc, lambda: _archived(out, "bench"))
    assert _what_comes_back(out) == ["call.log", "results.tgz"]
    pieces = _archived(out, "bench")
    # the children finished by the kill's snapshot: the baseline's, and on a
    # fast machine perhaps ctxsan's too, never all three
    labels = {json.loads(text)["label"] for text in pieces.values()}
    assert labels in ({"transformer"}, {"transformer", "ctxsan"}), labels
    name = next(n for n in pieces if n.endswith("-transformer.json"))
    call_dir, piece_name = os.path.split(name)
    assert call_dir.startswith("bench/") and call_dir.endswith("-bench") and piece_name.endswith("-transformer.json")
    piece = json.loads(pieces[name])
    result = piece["result"]
    assert piece["label"] == "transformer" and piece["settings"]["precision"] == "fp16"
    assert result["train_tok_s"] > 0 and result["decode_tok_s"] > 0
    assert result["optimizer"] == "FP16Optimizer" and result["loss_scale"] > 0  # fairseq-train's --fp16
    assert result["sdpa_kernels_train"]["calls"] > 0
    # where the child's time went (what sizes the next call), within the time its parent measured
    phases = result["phase_s"]
    assert list(phases) == ["setup", "train", "decode", "doc_order", "profile", "flops"]
    assert phases["train"] > 0 and phases["decode"] > 0 and phases["profile"] > 0 and phases["flops"] > 0
    # the call profiles a step of each kind (--profile-steps), here on CPU: no device share
    for key in ("train_profile", "decode_profile"):
        assert result[key]["device_busy"] is None and 0 < result[key]["op_ms"] <= result[key]["wall_ms"], key
    assert sum(phases.values()) <= piece["seconds"]
    with tarfile.open(out / "results.tgz") as tar:
        names = tar.getnames()
        tar.extractall(tmp_path / "back", filter="data")
    # the whole run's JSON would have come only at its end; no checkpoint or temporary file is packed
    assert not any(n.endswith(".pt") or ".tmp" in n for n in names) and not any(
        n.startswith("./logs/") and n.endswith("-bench.json") for n in names)
    table = subprocess.run([sys.executable, "scripts/benchmark.py", "--markdown-of", str(tmp_path / "back" / call_dir)],
                           cwd=REPO, capture_output=True, text=True)
    assert table.returncode == 0, table.stderr
    assert "| `transformer` (" in table.stdout and "fp16" in table.stdout
    assert f"{result['train_tok_s']:.0f} train tok/s" in table.stdout


def test_diagnosis_call_killed_midway_keeps_its_cells_and_the_next_call_goes_on(doc_corpus, tmp_path):
    """``gpu-call.sh diagnose`` at toy size: killed after its first cell, the
    cell's JSON is whole; a second call into the same directory measures
    only the cells missing; the forced math policy ran the math kernel, and
    torch's own choice on CPU the fused CPU kernel."""
    out = tmp_path / "call"
    # six cells, two of them new models, so that the kill (within a snapshot
    # interval and a poll of the first) leaves some unmeasured on a fast machine too
    MODELS = ("transformer", "ctxsan", "dc")
    args = ["bash", "scripts/gpu-call.sh", "diagnose", str(out), "--device", "cpu", "--sizes", "toy",
            "--models", *MODELS, "--precisions", "fp32", "--policies", "torch", "math",
            "--updates", "2", "--threads", "1", "--deadline-s", "0"]
    env = _call_env(tmp_path, DATA_BIN=str(doc_corpus[1]))
    _kill_when(_start(args, env), lambda: _archived(out, "diagnosis"))
    # a toy cell takes about a second: the snapshot the kill waited for, and the
    # work directory at the kill, may hold more than the first
    archived = _archived(out, "diagnosis")
    first = ["diagnosis/toy-transformer-fp32-torch.json"]
    assert first[0] in archived, sorted(archived)
    done = _pieces(tmp_path / "work" / "diagnosis")
    assert len(done) < 2 * len(MODELS) and {f"diagnosis/{c}" for c in done} >= set(archived)
    kept = archived[first[0]]
    cell = json.loads(kept)
    assert len(cell["fresh_ms"]) == len(cell["seen_ms"]) == 2 and cell["fresh_median_ms"] > 0
    assert cell["kernels"]["cpu_fused"] == cell["kernels"]["calls"] > 0
    assert cell["sdpa_state"]["cudnn"]  # torch's own switches, not the plugin's default (no-cudnn)

    proc = _start(args, env)
    output, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, output[-3000:]
    assert f"{len(done)} cells already in" in output
    cells = _archived(out, "diagnosis")
    assert sorted(cells) == sorted(f"diagnosis/toy-{m}-fp32-{p}.json" for m in MODELS for p in ("torch", "math"))
    assert all(cells[name] == text for name, text in archived.items())  # not measured again
    assert _what_comes_back(out) == ["call.log", "results.tgz"]
    for model in MODELS:
        forced = json.loads(cells[f"diagnosis/toy-{model}-fp32-math.json"])
        assert forced["kernels"]["math"] == forced["kernels"]["calls"] > 0 and not forced["kernels"].get("cpu_fused")
        assert forced["sdpa_state"]["priority"][0] == "math" and forced["optimizer"] == "FairseqAdam"
    assert "| toy | ctxsan | fp32 | math |" in output  # the summary table


def test_a_ctxenc_cell_times_its_batches_in_length_groups_and_in_one_pass(tmp_path):
    """ctxenc encodes a batch's contexts in length groups where padding
    would fill most of it; on a GPU fewer, larger calls may win, so its
    cell times the same batches both ways: in groups (the model's own
    rule, more attention calls) and without (the diagnosis's switch), and
    the table's note compares them; the baseline before it in the same
    child reads batches of its own task, without contexts. The corpus's
    sentences are of 1 to 40 words, so that padding fills about half of a
    context batch, and one batch holds them all (a batch of fewer than 16
    is never grouped)."""
    from tests.utils import make_parallel_data, preprocess

    data = preprocess(make_parallel_data(tmp_path / "raw", num_train=960, num_valid=12, num_test=12, min_len=1,
                                         max_len=40, docs_every=4), tmp_path / "bin")
    out = tmp_path / "diag"
    res = subprocess.run([sys.executable, "scripts/speed_diagnosis.py", str(data), "--out", str(out),
                          "--device", "cpu", "--sizes", "toy", "--models", "transformer", "ctxenc",
                          "--precisions", "fp32", "--policies", "math", "--updates", "2", "--threads", "1",
                          "--max-tokens", "4096", "--profile-steps"],
                         cwd=REPO, env=cli_process.env_with_python({**os.environ, "OMP_NUM_THREADS": "1"}),
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    cell = json.loads((out / "toy-ctxenc-fp32-math.json").read_text())
    for name in ("fresh_ms", "seen_ms", "one_pass_fresh_ms", "one_pass_seen_ms"):
        assert len(cell[name]) == 2 and cell[name.replace("_ms", "_median_ms")] > 0, name
    assert cell["skipped_updates"] == 0  # every update of the cell counted, the one-pass ones included
    # the switch reached the model: one pass makes fewer attention calls than the groups
    assert 0 < cell["one_pass_kernels"]["math"] == cell["one_pass_kernels"]["calls"] < cell["kernels"]["calls"]
    assert (f"toy ctxenc, fp32, math: without length groups {cell['one_pass_seen_median_ms']:.1f} ms per update "
            f"against {cell['seen_median_ms']:.1f} ms with them (seen shapes, the same batches in turn; its first run "
            f"without them {cell['one_pass_fresh_median_ms']:.1f} ms); SDPA calls in a profiled update "
            f"{cell['one_pass_kernels']['calls']} against {cell['kernels']['calls']}") in res.stdout.splitlines()
    # the sentence-level model in the same child draws its batches from a task of its own
    baseline = json.loads((out / "toy-transformer-fp32-math.json").read_text())
    assert baseline["kernels"]["calls"] > 0
    # --profile-steps: one more update of each cell under the profiler, ctxenc's also without its groups,
    # each a line below the table; the profiled updates count among the cell's calls
    step_profile = load_script("step_profile")
    assert "one_pass_profile" not in baseline and baseline["skipped_updates"] == 0
    assert cell["profile"]["op_ms"] > 0 and cell["one_pass_profile"]["op_ms"] > 0
    assert (f"toy ctxenc, fp32, math, {step_profile.line(cell['profile'])}; toy ctxenc, fp32, math, without "
            f"length groups {step_profile.line(cell['one_pass_profile'])}") in res.stdout.splitlines()
    assert f"toy transformer, fp32, math, {step_profile.line(baseline['profile'])}" in res.stdout.splitlines()


def test_test_pieces_survive_a_kill_and_the_next_call_skips_what_passed(tmp_path):
    """``-p tests.piece_results``: one JSON per finished test; killed during
    the third test, the two before it are kept; ``--skip-passed`` with them
    runs only the tests that did not pass, a piece named from another
    rootdir included."""
    (tmp_path / "test_toy.py").write_text(
        "import time\n"
        "def test_a(record_property):\n    record_property('kernels', {'math': 2})\n"
        "def test_b():\n    assert 1 == 2\n"
        "def test_c():\n    time.sleep(600)\n")
    pieces = tmp_path / "pieces"
    cmd = [sys.executable, "-m", "pytest", "test_toy.py", "-q", "-p", "no:cacheprovider", "-p",
           "tests.piece_results", "--pieces", str(pieces)]
    env = {"PYTHONPATH": REPO.as_posix()}
    _kill_when(_start(cmd, env, cwd=tmp_path), lambda: len(_pieces(pieces)) == 2, timeout=120)
    found = {json.loads((pieces / p).read_text())["nodeid"]: json.loads((pieces / p).read_text())
             for p in _pieces(pieces)}
    assert set(found) == {"test_toy.py::test_a", "test_toy.py::test_b"}
    assert found["test_toy.py::test_a"]["outcome"] == "passed"
    assert found["test_toy.py::test_a"]["properties"] == {"kernels": {"math": 2}}
    failed = found["test_toy.py::test_b"]
    assert failed["outcome"] == "failed" and "assert 1 == 2" in failed["report"]
    # the passed piece as a machine whose pytest took "/" for its rootdir names it
    doc = json.loads((pieces / "test_toy.py_test_a.json").read_text())
    (pieces / "test_toy.py_test_a.json").write_text(json.dumps({**doc, "nodeid": "work/main/test_toy.py::test_a"}))
    proc = _start([*cmd[:-2], "--pieces", str(tmp_path / "next"), "--skip-passed", str(pieces), "-k", "not test_c"],
                  env, cwd=tmp_path)
    output, _ = proc.communicate(timeout=120)
    assert "1 failed, 2 deselected" in output, output  # test_a passed before, test_c left out by -k
    assert [json.loads((tmp_path / "next" / p).read_text())["nodeid"] for p in _pieces(tmp_path / "next")] == [
        "test_toy.py::test_b"]


def test_a_test_run_again_replaces_its_piece_named_from_another_rootdir(tmp_path):
    """The first loan's pieces are named from ``/`` (``work/main/tests/...``),
    later calls' from the checkout: a test run again leaves one piece, its
    latest, whatever root its earlier one was named from; other tests'
    pieces stay. In the checkout, where an archive is extracted over the
    committed pieces, ``python3 -m tests.piece_results DIR --prune`` counts
    each test's latest outcome and removes what it superseded."""
    (tmp_path / "test_toy.py").write_text("def test_a():\n    pass\ndef test_b():\n    pass\n")
    pieces = tmp_path / "pieces"
    pieces.mkdir()
    for test in ("test_a", "test_b"):
        (pieces / f"work_main_test_toy.py_{test}.json").write_text(json.dumps(
            {"nodeid": f"work/main/test_toy.py::{test}", "outcome": "failed"}))
    res = subprocess.run([sys.executable, "-m", "pytest", "test_toy.py", "-q", "-p", "no:cacheprovider", "-p",
                          "tests.piece_results", "--pieces", str(pieces), "-k", "test_a"], cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": REPO.as_posix()}, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stdout[-3000:]
    found = {p: json.loads((pieces / p).read_text()) for p in _pieces(pieces)}
    assert {p: (d["nodeid"], d["outcome"]) for p, d in found.items()} == {
        "test_toy.py_test_a.json": ("test_toy.py::test_a", "passed"),
        "work_main_test_toy.py_test_b.json": ("work/main/test_toy.py::test_b", "failed")}
    # the checkout after the archive is extracted over it: the first loan's piece of test_a too
    (pieces / "work_main_test_toy.py_test_a.json").write_text(json.dumps(
        {"nodeid": "work/main/test_toy.py::test_a", "outcome": "failed"}))
    summary = subprocess.run([sys.executable, "-m", "tests.piece_results", str(pieces), "--prune"], cwd=REPO,
                             capture_output=True, text=True, timeout=120)
    assert summary.returncode == 0, summary.stderr
    assert summary.stdout.splitlines() == ["2 tests: 1 failed, 1 passed", "  failed: work/main/test_toy.py::test_b",
                                           "1 superseded pieces, removed"]
    assert _pieces(pieces) == ["test_toy.py_test_a.json", "work_main_test_toy.py_test_b.json"]
    # unpruned, a test's earlier pass does not deselect it once its latest piece says it failed
    from tests.piece_results import passed_in

    (pieces / "work_main_test_toy.py_test_c.json").write_text(json.dumps(
        {"nodeid": "work/main/test_toy.py::test_c", "outcome": "passed"}))
    (pieces / "test_toy.py_test_c.json").write_text(json.dumps({"nodeid": "test_toy.py::test_c", "outcome": "failed"}))
    assert passed_in(pieces) == {"test_toy.py::test_a"}


def test_the_tests_call_names_tests_from_the_checkout_under_an_ini_file_above_it(tmp_path):
    """pytest takes its rootdir from the first ini file above its arguments:
    on the H200 of 2026-11-30 one lay above the checkout, and the pieces
    were named ``work/main/tests/...``. ``gpu-call.sh tests`` names them from
    the checkout (a copy of it here, under a folder with a pytest.ini, with
    one toy test marked gpu)."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    checkout = tmp_path / "main"
    (checkout / "tests").mkdir(parents=True)
    for name in ("fairseq_ctx", "scripts"):
        (checkout / name).symlink_to(REPO / name)
    for name in ("__init__.py", "conftest.py", "cuda_guard.py", "piece_results.py"):
        (checkout / "tests" / name).symlink_to(REPO / "tests" / name)
    (checkout / "tests" / "test_toy.py").write_text("import pytest\n@pytest.mark.gpu\ndef test_a():\n    pass\n")
    res = subprocess.run(["bash", "scripts/gpu-call.sh", "tests", str(tmp_path / "out"), "--device", "cpu"],
                         cwd=checkout, env=cli_process.env_with_python({**os.environ, **_call_env(
                             tmp_path, DATA_BIN=str(tmp_path))}), capture_output=True, text=True, timeout=300)
    pieces = [json.loads((tmp_path / "work" / "tests" / p).read_text()) for p in _pieces(tmp_path / "work" / "tests")]
    assert [(p["nodeid"], p["outcome"]) for p in pieces] == [("tests/test_toy.py::test_a", "passed")], \
        res.stdout[-3000:] + res.stderr[-3000:]


def test_a_broken_cuda_context_costs_one_test_not_its_workers_rest(tmp_path):
    """A CUDA error breaks its process's context for good (simulated here:
    the device's synchronize raises once the first test has run, as after
    an asynchronous kernel error its own assertions did not see). Under
    xdist, tests.cuda_guard ends that worker after the test, whose piece
    says it crashed (not passed: the next call runs it again), and the next
    test runs in a fresh worker and passes; without the guard the first
    test reads as passed and the second fails with its error."""
    (tmp_path / "test_toy.py").write_text(
        "import pytest, torch\n"
        "state = {'broken': False}\n"
        "torch.cuda.is_available = lambda: True\n"
        "torch.cuda.is_initialized = lambda: True\n"
        "def _synchronize():\n"
        "    if state['broken']:\n"
        "        raise RuntimeError('CUDA error: misaligned address')\n"
        "torch.cuda.synchronize = _synchronize\n"
        "@pytest.mark.gpu\n"
        "def test_a():\n    state['broken'] = True\n"
        "@pytest.mark.gpu\n"
        "def test_b():\n    torch.cuda.synchronize()\n")
    pieces = tmp_path / "pieces"
    cmd = [sys.executable, "-m", "pytest", "test_toy.py", "-q", "-p", "no:cacheprovider", "-n", "1", "-p",
           "tests.piece_results", "-W", "ignore::pytest.PytestUnknownMarkWarning"]
    env = cli_process.env_with_python({**os.environ, "PYTHONPATH": REPO.as_posix()})
    res = subprocess.run([*cmd, "--pieces", str(pieces), "-p", "tests.cuda_guard"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    def outcomes(folder):
        docs = (json.loads((folder / p).read_text()) for p in _pieces(folder))
        return {doc["nodeid"]: doc["outcome"] for doc in docs}
    assert outcomes(pieces) == {"test_toy.py::test_a": "crashed", "test_toy.py::test_b": "passed"}, res.stdout[-3000:]
    assert "crashed while running" in res.stdout  # xdist's word for the worker that ended
    # the same run without the guard: the second test inherits the first one's error
    res = subprocess.run([*cmd, "--pieces", str(tmp_path / "unguarded")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert outcomes(tmp_path / "unguarded") == {"test_toy.py::test_a": "passed", "test_toy.py::test_b": "failed"}, \
        res.stdout[-3000:]


# the run tool's limit on what it sends (the tracked tree and the carried paths)
SEND_LIMIT = 64 * 2 ** 20


def test_the_tree_and_its_carry_fit_what_the_gpu_tool_sends():
    """The run tool sends the checkout's tracked files and the paths named
    in carry, 64 MiB at most; above that no call of a loan starts. The
    tree (tracked and untracked files that git does not ignore) with the
    kit (a copy of ../shared/gpu) and data/bible/bin, as the runbook's
    calls carry them, must fit: a commit of large files fails here, not on
    a GPU loan. Where the kit or the data is not on this
    machine, their sizes of 2026-12-01 stand in."""
    # what the tool sends: the tracked files and the untracked ones git does not ignore
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True)
    if listed.returncode != 0:
        pytest.skip(f"not a git checkout here: the files sent are not known ({listed.stderr.decode().strip()})")
    tree = sum(os.path.getsize(REPO / name) for name in set(listed.stdout.decode().split("\0"))
               if (REPO / name).is_file())

    def size_of(path, measured):
        if not path.is_dir():
            return measured
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)

    kit = size_of(REPO.parent / "shared" / "gpu", 12_810_236)
    data = size_of(REPO / "data" / "bible" / "bin", 5_275_051)
    assert tree + kit + data <= SEND_LIMIT, (
        f"the tracked tree ({tree / 2 ** 20:.1f} MiB) with the GPU kit ({kit / 2 ** 20:.1f} MiB) and "
        f"data/bible/bin ({data / 2 ** 20:.1f} MiB) is over the run tool's 64 MiB: a GPU loan could not start")


@pytest.mark.unit
def test_the_diagnosis_answers_the_first_calls_two_questions_first():
    """A first 2-minute call measures a few cells of 84: the Base
    transformer under every policy (which kernel choice is fastest), then
    the study size under torch's choice (the study's time per update, which
    sizes a study call), then the rest by size; every cell once."""
    diag = load_script("speed_diagnosis")
    opts = type("Opts", (), dict(sizes=["base", "study"], models=list(diag.DEFAULT_MODELS), precisions=["bf16", "fp16"],
                                 policies=list(diag.POLICY_NAMES)))
    names = [diag.cell_name(c) for c in diag.cells_of(opts)]
    assert names[:10] == [f"base-transformer-bf16-{p}.json" for p in diag.POLICY_NAMES] + [
        "study-transformer-bf16-torch.json", "study-ctxsan-bf16-torch.json", "study-dc-bf16-torch.json"]
    assert names[10:12] == ["base-transformer-fp16-torch.json", "base-transformer-fp16-cudnn-last.json"]
    assert names[-1] == "study-dc-fp16-math.json"
    assert sorted(names) == sorted({f"{s}-{m}-{p}-{q}.json" for s in opts.sizes for m in diag.DEFAULT_MODELS
                                    for p in opts.precisions for q in diag.POLICY_NAMES})
    # one size: its context models under torch's choice come next; torch leads wherever it is given
    opts.sizes, opts.policies = ["study"], ["math", "torch"]
    names = [diag.cell_name(c) for c in diag.cells_of(opts)]
    assert names[:4] == ["study-transformer-bf16-math.json", "study-transformer-bf16-torch.json",
                         "study-ctxsan-bf16-torch.json", "study-dc-bf16-torch.json"]


@pytest.mark.unit
def test_the_diagnosis_table_gives_the_seconds_of_a_study_runs_updates(tmp_path):
    """What a study call's deadline must hold: below the table, per study-size
    cell measured (not a failed one, not another size), the study's budget
    at its time per update: the first epoch's (the landed runs') on new
    shapes, the rest on seen ones."""
    diag = load_script("speed_diagnosis")

    def cell(size, model, precision, fresh, seen, failed=None):
        c = {"size": size, "model": model, "precision": precision, "policy": "torch", "fresh_median_ms": fresh,
             "seen_median_ms": seen, "kernels": {"calls": 2, "flash": 2}, "device_name": "NVIDIA H200"}
        (tmp_path / f"{size}-{model}-{precision}-torch.json").write_text(json.dumps(
            {**c, "failed": failed} if failed else c))

    cell("base", "transformer", "bf16", 50.0, 40.0)
    cell("study", "transformer", "fp32", 30.0, 20.25)
    cell("study", "dc", "bf16", 35.0, 25.0)
    cell("study", "ctxsan", "bf16", 0, 0, failed="CUDA error")
    lines = diag.summary(str(tmp_path)).splitlines()
    assert lines[2:6] == ["| base | transformer | bf16 | torch | 50.0 | 40.0 | flash 2 | NVIDIA H200 |",
                          "| study | transformer | fp32 | torch | 30.0 | 20.2 | flash 2 | NVIDIA H200 |",
                          "| study | ctxsan | bf16 | torch | failed: CUDA error | | | |",
                          "| study | dc | bf16 | torch | 35.0 | 25.0 | flash 2 | NVIDIA H200 |"]
    # 263 x 30 + 3737 x 20.25 ms; 263 x 35 + 3737 x 25 ms
    assert lines[6:] == ["", "a study run (4,000 updates), transformer, fp32, torch: about 84 s of updates (263 at "
                             "30.0 ms, new shapes; the rest at 20.2 ms)",
                         "a study run (4,000 updates), dc, bf16, torch: about 103 s of updates (263 at 35.0 ms, new "
                         "shapes; the rest at 25.0 ms)"]
    landed = json.loads(open(os.path.join(REPO, "benchmarks", "study-bible-budget.json")).read())["runs"]
    # the diagnosis's models read one sentence (concatenation's longer inputs make more batches)
    assert {rec["history"][0]["updates"] for rec in landed if rec.get("history") and rec.get("budget") == 4000
            and rec["arch"] in ("transformer", "transformer_ctxsan", "transformer_dc")
            and not rec["name"].startswith("concat")} == {diag.STUDY_EPOCH_UPDATES}


@pytest.mark.unit
def test_benchmark_deadline_starts_no_child_that_would_not_end_in_time(monkeypatch, tmp_path):
    """``--deadline-s``: the first child always starts; after it, no child
    starts unless the longest child so far still fits; the rest are listed,
    and the results hold the children that ran."""
    bench = load_script("benchmark")
    ran = []

    def fake_child(opts, label, arch, flags, first=None, timeout=None):
        ran.append(label)
        time.sleep(0.3)
        return dict(CHILD_RESULT)
    monkeypatch.setattr(bench, "run_child", fake_child)
    monkeypatch.setattr(bench, "reuses_sentence_states", lambda arch: False)
    out = tmp_path / "b.json"
    monkeypatch.setattr(sys, "argv", ["benchmark.py", str(tmp_path), "--variants", "ctxsan", "dc", "gret",
                                      "--deadline-s", "0.5", "--pieces", str(tmp_path / "pieces"), "--json", str(out)])
    bench.main()
    doc = json.loads(out.read_text())
    assert ran == ["transformer"] and set(doc["results"]) == {"transformer"}
    assert doc["not_run"] == ["ctxsan (round 1)", "dc (round 1)", "gret (round 1)"]
    assert len(_pieces(tmp_path / "pieces")) == 1


def test_benchmark_deadline_kills_a_child_that_outgrows_it(monkeypatch, tmp_path, capsys):
    """A variant longer than the longest child so far may start in time and
    run past the deadline: its process is killed then (a real child process
    here, one that sleeps), the run ends in its own time with its JSON, the
    variant is listed as cut and leaves a piece with its time; the exit
    status is the deadline's (0), not a failure's."""
    bench = load_script("benchmark")
    real_run_child, ran = bench.run_child, []
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text("import time\ntime.sleep(60)\n")

    def child(opts, label, arch, flags, first=None, timeout=None):
        ran.append((label, timeout))
        if label == "transformer":
            time.sleep(0.2)
            return dict(CHILD_RESULT)
        monkeypatch.setattr(bench, "__file__", str(sleeper))  # the child's command runs the sleeper
        return real_run_child(opts, label, arch, flags, first=first, timeout=timeout)
    monkeypatch.setattr(bench, "run_child", child)
    monkeypatch.setattr(bench, "reuses_sentence_states", lambda arch: False)
    pieces, out = tmp_path / "pieces", tmp_path / "b.json"
    monkeypatch.setattr(sys, "argv", ["benchmark.py", str(tmp_path), "--variants", "ctxsan", "dc", "--deadline-s", "5",
                                      "--pieces", str(pieces), "--json", str(out)])
    started = time.monotonic()
    bench.main()
    took = time.monotonic() - started
    assert took < 30, f"the run took {took:.1f} s: the child (60 s) was not killed at the deadline (5 s)"
    # the child's time is what was left of the deadline after the baseline
    assert [label for label, _ in ran] == ["transformer", "ctxsan"] and 0 < ran[1][1] < 5
    doc = json.loads(out.read_text())
    assert set(doc["results"]) == {"transformer"} and doc["failed"] == []
    assert doc["not_run"] == ["ctxsan (round 1, cut at the deadline)", "dc (round 1)"]
    written = {json.loads((pieces / p).read_text())["label"]: json.loads((pieces / p).read_text())
               for p in _pieces(pieces)}
    assert written["ctxsan"]["failed"].startswith("benchmark: variant ctxsan cut at the deadline after ")
    assert ran[1][1] <= written["ctxsan"]["seconds"] < 30
    assert "variant ctxsan cut at the deadline" in capsys.readouterr().err


@pytest.mark.unit
def test_a_variant_that_fails_leaves_a_failed_piece_and_the_others_run(monkeypatch, tmp_path, capsys):
    """With ``--pieces`` (a GPU call) a variant whose child fails (a CUDA
    error) writes a piece holding the error and the next variants still
    run; the run then exits non-zero naming it, and ``--markdown-of``
    tables the others. A baseline that fails stops the run: nothing has a
    ratio without it."""
    bench = load_script("benchmark")
    ran = []

    def fake_child(opts, label, arch, flags, first=None, timeout=None):
        ran.append(label)
        if label == "ctxsan":
            raise bench.ChildFailed("benchmark: variant ctxsan (transformer_ctxsan) failed (exit 1):\nCUDA error")
        return dict(CHILD_RESULT)
    monkeypatch.setattr(bench, "run_child", fake_child)
    monkeypatch.setattr(bench, "reuses_sentence_states", lambda arch: False)
    pieces = tmp_path / "pieces"
    monkeypatch.setattr(sys, "argv", ["benchmark.py", str(tmp_path), "--variants", "ctxsan", "dc",
                                      "--pieces", str(pieces), "--json", str(tmp_path / "b.json")])
    with pytest.raises(SystemExit) as e:
        bench.main()
    assert str(e.value) == "benchmark: failed (their pieces hold the error): ctxsan (round 1)"
    assert ran == ["transformer", "ctxsan", "dc"]
    assert set(json.loads((tmp_path / "b.json").read_text())["results"]) == {"transformer", "dc"}
    written = {json.loads((pieces / p).read_text())["label"]: json.loads((pieces / p).read_text())
               for p in _pieces(pieces)}
    assert written["ctxsan"]["failed"].endswith("CUDA error") and "result" not in written["ctxsan"]
    assert [(st["precision"], set(r)) for st, _, r in bench.collect_pieces(pieces)] == [("fp32", {"transformer", "dc"})]
    # the folder above the calls' own (benchmarks/gpu/bench, holding bench/CALL/) reads the same;
    # a folder with no piece is an error, not an empty table
    shutil.copytree(pieces, tmp_path / "bench" / "20261129T180000Z-bench")
    assert bench.collect_pieces(tmp_path / "bench") == bench.collect_pieces(pieces)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no piece"):
        bench.collect_pieces(tmp_path / "empty")
    # a file that is no piece (the run's own JSON copied in) is named, not read as one
    (pieces / "b.json").write_text((tmp_path / "b.json").read_text())
    with pytest.raises(ValueError, match="b.json is not a piece"):
        bench.collect_pieces(pieces)
    # without pieces, or for the baseline, a failure stops the run at once
    ran.clear()
    monkeypatch.setattr(sys, "argv", ["benchmark.py", str(tmp_path), "--variants", "ctxsan", "dc"])
    with pytest.raises(SystemExit, match="variant ctxsan"):
        bench.main()
    assert ran == ["transformer", "ctxsan"]


def test_a_call_archives_its_pieces_but_no_checkpoint_and_no_file_on_its_way(tmp_path):
    """What the archive leaves out: checkpoints, files not yet renamed to
    their names (a piece's NAME.tmpPID, fairseq's .pt.tmp, the study's .tmp
    and .part), run locks and the diagnosis's to-do lists; a call that stops
    at once (here: no deadline) still packs what its work directory holds,
    and OUT holds the archive alone."""
    work = tmp_path / "work"
    planted = ["diagnosis/a.json", "tests/t.json", "study/runs/x/train.done", "study/runs/x/logs/epoch-001.log",
               "study/runs/x/eval/test.hyp"]
    left_out = ["diagnosis/b.json.tmp123", "diagnosis/.cells-1.todo", "study/runs/x/checkpoint_1.pt",
                "study/runs/x/checkpoint_1.pt.tmp", "study/runs/x/eval/average.pt.part", "study/runs/x/train.lock",
                "study/runs/x/done.json.tmp"]
    for name in planted + left_out:
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(name)
    out = tmp_path / "out"
    res = subprocess.run(["bash", "scripts/gpu-call.sh", "study", str(out), "soon", "--device", "cpu"], cwd=REPO,
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, **_call_env(tmp_path, DATA_BIN=str(tmp_path))})
    assert res.returncode == 2 and "DEADLINE_S (seconds) is missing" in res.stderr
    assert sorted(os.listdir(out)) == ["call.log", "results.tgz"]
    with tarfile.open(out / "results.tgz") as tar:
        files = sorted(m.name[2:] for m in tar.getmembers() if m.isfile())
        assert tar.extractfile("./diagnosis/a.json").read().decode() == "diagnosis/a.json"
    assert [f for f in files if not f.startswith("logs/")] == sorted(planted)
    assert [f for f in files if f.startswith("logs/")] == [f"logs/{n}" for n in os.listdir(work / "logs")]


def test_the_study_call_exits_with_the_studys_status_and_a_relative_out_is_the_callers(tmp_path):
    """A study that fails (an unknown run) fails the call, whose log says
    so; OUT given relative to the caller's directory is found there."""
    res = subprocess.run(["bash", os.path.join(REPO, "scripts", "gpu-call.sh"), "study", "out", "5", "--device", "cpu",
                          "--runs", "no-such-run"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env=cli_process.env_with_python({**os.environ, **_call_env(tmp_path, DATA_BIN=str(tmp_path))}))
    assert res.returncode == 1, res.stdout[-2000:] + res.stderr[-2000:]  # the driver's sys.exit(message)
    assert "fairseq_ctx: error: --runs: unknown run(s) no-such-run" in res.stdout
    assert "] exit 1" in (tmp_path / "out" / "call.log").read_text()
    assert sorted(os.listdir(tmp_path / "out")) == ["call.log", "results.tgz"]


def test_a_copy_without_git_names_its_commit_from_the_file_the_session_wrote(tmp_path):
    """The checkout a GPU machine is sent may come without git's directory:
    the call takes the commit from ``.gpu/commit`` and hands it to the study
    (``FAIRSEQ_CTX_COMMIT``)."""
    copy = tmp_path / "copy"
    (copy / "scripts").mkdir(parents=True)
    (copy / ".gpu").mkdir()
    (copy / "scripts" / "gpu-call.sh").write_text((REPO / "scripts" / "gpu-call.sh").read_text())
    (copy / "scripts" / "gpu-study.sh").write_text('echo "the study sees ${FAIRSEQ_CTX_COMMIT-nothing}"\n')
    call = ["bash", str(copy / "scripts" / "gpu-call.sh"), "study", str(tmp_path / "out"), "5", "--device", "cpu"]
    env = {**os.environ, **_call_env(tmp_path, DATA_BIN=str(tmp_path)),
           "GIT_CEILING_DIRECTORIES": str(tmp_path)}  # no repository above the copy
    env.pop("FAIRSEQ_CTX_COMMIT", None)
    (copy / ".gpu" / "commit").write_text("0123abc+dirty\n")
    res = subprocess.run(call, capture_output=True, text=True, timeout=60, env=env)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "the study sees 0123abc+dirty" in res.stdout
    # without the file the study is told nothing (its records say unknown)
    (copy / ".gpu" / "commit").unlink()
    res = subprocess.run(call, capture_output=True, text=True, timeout=60, env=env)
    assert "the study sees nothing" in res.stdout, res.stdout[-2000:] + res.stderr[-2000:]


@pytest.mark.unit
def test_the_study_records_the_commit_it_is_handed_where_git_cannot_say(monkeypatch):
    from fairseq_ctx.study import train

    def no_git(*args, **kwargs):
        raise subprocess.CalledProcessError(128, args[0])
    monkeypatch.setattr(train.subprocess, "run", no_git)
    monkeypatch.setenv("FAIRSEQ_CTX_COMMIT", "0123abc")
    assert train.code_commit() == "0123abc (from FAIRSEQ_CTX_COMMIT: not a git checkout)"
    monkeypatch.delenv("FAIRSEQ_CTX_COMMIT")
    assert train.code_commit() == "unknown (not a git checkout)"
