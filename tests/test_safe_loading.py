"""Weights-only checkpoint loading: fairseq checkpoints of every kind load,
a checkpoint that smuggles in a callable is refused with a clear error."""
import os

import pytest
import torch

import fairseq_ctx
from fairseq_ctx.safe_loading import fairseq_safe_globals
from tests import cli_process
from tests.utils import REPO, TINY_MODEL_FLAGS, USER_DIR, generate, make_parallel_data, preprocess, run_cli, train

fairseq_ctx.register()  # the weights-only allow-list for the torch.load calls below


class _SmuggledCall:
    """Pickles as a call to os.system: what a hostile checkpoint would do."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _allowed_names():
    names = set()
    for obj in fairseq_safe_globals():
        names.add(f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', getattr(obj, '_name', ''))}")
    return names


@pytest.fixture(scope="module")
def data_bin(tmp_path_factory):
    root = tmp_path_factory.mktemp("safe")
    return preprocess(make_parallel_data(root / "raw", num_train=64), root / "bin")


@pytest.mark.unit
def test_smuggled_callable_is_refused_in_process(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"model": _SmuggledCall(marker), "args": None}, path)
    from fairseq import checkpoint_utils
    from fairseq_ctx.errors import CheckpointLoadError

    with pytest.raises(CheckpointLoadError, match="refusing to load checkpoint .*evil.pt.*posix.system"):
        checkpoint_utils.load_checkpoint_to_cpu(str(path))
    assert not marker.exists(), "the smuggled call ran"


def test_smuggled_callable_is_refused_by_generate(tmp_path, data_bin):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"model": _SmuggledCall(marker), "args": None}, path)
    proc = generate(data_bin, path, check=False)[2]
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("fairseq_ctx: error: refusing to load checkpoint") and str(path) in last
    assert "Traceback" not in proc.stderr
    assert not marker.exists()


def test_truncated_checkpoint_is_a_clear_error(tmp_path, data_bin):
    save = tmp_path / "ck"
    train(data_bin, save, max_update=1)
    cut = tmp_path / "cut.pt"
    cut.write_bytes((save / "checkpoint_last.pt").read_bytes()[:4096])
    proc = generate(data_bin, cut, check=False)[2]
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1].startswith(f"fairseq_ctx: error: cannot read checkpoint {cut}")


def test_without_plugin_fairseq_refuses_its_own_checkpoint(tmp_path, data_bin):
    """The reason the allow-list exists: torch>=2.6 refuses a plain fairseq checkpoint."""
    save = tmp_path / "ck"
    train(data_bin, save, max_update=1)
    proc = run_cli("fairseq_cli.generate", [data_bin, "--path", save / "checkpoint_last.pt", "--cpu"], check=False)
    assert proc.returncode != 0 and "weights_only" in proc.stderr


def _two_process_train(data_bin, save, max_update, port):
    """Two CPU ranks with gloo, launched as separate processes (the form that
    works on CPU; here children of the preloaded fork server, tests/cli_process.py)."""
    procs = []
    for rank in (0, 1):
        args = [str(data_bin), "--user-dir", USER_DIR,
               "--arch", "transformer", *TINY_MODEL_FLAGS, "--optimizer", "adam", "--lr", "0.005",
               "--max-tokens", "500", "--max-update", str(max_update), "--save-dir", str(save), "--cpu",
               "--distributed-world-size", "2", "--distributed-rank", str(rank),
               "--distributed-backend", "gloo", "--distributed-no-spawn", "--ddp-backend", "legacy_ddp",
               "--distributed-init-method", f"tcp://127.0.0.1:{port}", "--no-progress-bar",
               "--required-batch-size-multiple", "1", "--num-workers", "0",
               "--eval-bleu", "--eval-bleu-args", '{"beam": 1, "max_len_b": 10}',
               "--best-checkpoint-metric", "bleu", "--maximize-best-checkpoint-metric"]
        procs.append(cli_process.CliProcess("fairseq_cli.train", args, cwd=REPO,
                                            env={**os.environ, "OMP_NUM_THREADS": "1"}))
    outs = []
    for p in procs:
        p.wait(timeout=300)
        outs.append(p.stdout_text() + p.stderr_text())
        p.cleanup()
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out[-4000:]
    return outs


def test_multiprocess_resume_broadcasts_through_allow_list(tmp_path, data_bin):
    """Resuming 2-rank training: rank 0 broadcasts the loaded state (omegaconf
    config, numpy meters, tensor placeholders) through torch.load on rank 1."""
    import random

    port = random.randint(20000, 40000)
    save = tmp_path / "ddp"
    _two_process_train(data_bin, save, 2, port)
    outs = _two_process_train(data_bin, save, 4, port + 1)
    assert "@ 2 updates" in outs[0]
    assert torch.load(save / "checkpoint_last.pt")["optimizer_history"][-1]["num_updates"] == 4

    # The allow-list covers every global these real checkpoints reference.
    unsafe = set(torch.serialization.get_unsafe_globals_in_checkpoint(str(save / "checkpoint_last.pt")))
    allowed = _allowed_names() | {"numpy._core.multiarray._reconstruct", "numpy.core.multiarray._reconstruct"}
    assert unsafe <= allowed, unsafe - allowed
