"""fairseq-ctx-average-checkpoints averages parameters and the result decodes."""
import pytest
import torch

import fairseq_ctx
from tests.utils import generate, make_parallel_data, preprocess, run_cli, train

pytestmark = pytest.mark.integration

fairseq_ctx.register()  # the weights-only allow-list for the torch.load calls below


def _average(*args):
    return run_cli("fairseq_ctx.average_checkpoints", args, check=False)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("avg")
    data_bin = preprocess(make_parallel_data(root / "raw", num_train=48), root / "bin")
    train(data_bin, root / "ck", max_update=2, extra=["--max-tokens", "120"])
    return data_bin, root / "ck"


def test_average_of_two_checkpoints(trained, tmp_path):
    data_bin, ck = trained
    state = torch.load(ck / "checkpoint_last.pt")
    tripled = dict(state, model={k: v * 3 for k, v in state["model"].items()})
    torch.save(state, tmp_path / "checkpoint1.pt")
    torch.save(tripled, tmp_path / "checkpoint2.pt")
    proc = _average("--inputs", tmp_path, "--num-epoch-checkpoints", 2, "--output", tmp_path / "avg.pt")
    assert proc.returncode == 0, proc.stderr
    avg = torch.load(tmp_path / "avg.pt")["model"]
    for name, value in state["model"].items():
        torch.testing.assert_close(avg[name], value * 2)
    hyps, srcs, _ = generate(data_bin, tmp_path / "avg.pt")
    assert len(hyps) == len(srcs) > 0


def test_mismatched_checkpoints_are_a_clear_error(trained, tmp_path):
    _, ck = trained
    state = torch.load(ck / "checkpoint_last.pt")
    name = next(iter(state["model"]))
    torch.save(dict(state, model={**state["model"], name: torch.zeros(3)}), tmp_path / "bad.pt")
    proc = _average("--inputs", ck / "checkpoint_last.pt", tmp_path / "bad.pt", "--output", tmp_path / "o.pt")
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1].startswith(f"fairseq_ctx: error: {tmp_path / 'bad.pt'}: parameter {name}")
    assert not (tmp_path / "o.pt").exists()


def test_too_few_epoch_checkpoints(tmp_path):
    proc = _average("--inputs", tmp_path, "--num-epoch-checkpoints", 3, "--output", tmp_path / "o.pt")
    assert proc.returncode != 0 and "found 0 checkpointN.pt files" in proc.stderr
