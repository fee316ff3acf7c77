"""End-to-end runs of plain ``--arch transformer`` through ``--user-dir fairseq_ctx``:
train, resume, fine-tune, generate, interactive, as a user would run them
(fresh processes, so weights-only checkpoint loading is exercised for real).
fairseq-validate against ``--score-reference`` is the architecture contract's
(tests/test_contract.py, every variant, plain transformer included)."""
import math
import re
import shutil

import pytest
import torch

import fairseq_ctx

from tests.utils import REPO, generate, interactive, make_parallel_data, preprocess, train

pytestmark = pytest.mark.integration

fairseq_ctx.register()  # the weights-only allow-list for the torch.load calls below

EVAL_BLEU = ["--eval-bleu", "--eval-bleu-args", '{"beam": 1, "max_len_b": 20}',
             "--best-checkpoint-metric", "bleu", "--maximize-best-checkpoint-metric"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e")
    raw = make_parallel_data(root / "raw")
    data_bin = preprocess(raw, root / "bin")
    save = root / "ckpt"
    # --eval-bleu stores numpy arrays in the checkpoint's meters: the allow-list must cover them.
    train(data_bin, save, max_update=4, extra=EVAL_BLEU)
    return root, data_bin, save


@pytest.fixture(scope="module")
def generated(trained):
    """fairseq-generate on the test set with the best checkpoint (beam 3)."""
    _, data_bin, save = trained
    return generate(data_bin, save / "checkpoint_best.pt", beam=3)


def test_generate_translates_every_sentence(trained, generated):
    root, _, _ = trained
    hyps, srcs, proc = generated
    n_test = len((root / "raw" / "test.src").read_text().splitlines())
    assert sorted(hyps) == list(range(n_test)), "a test sentence got no hypothesis"
    assert len(srcs) == n_test
    assert all(math.isfinite(score) for _, score in hyps.values())
    assert "BLEU4" in proc.stdout


def test_generate_default_batch_multiple_keeps_every_sentence(trained):
    """fairseq #5036: inference batches rounded to a multiple of 8 can drop
    sentences. Our harness passes --required-batch-size-multiple 1; this pins
    that 23 sentences (not a multiple of 8) all come back with it."""
    root, data_bin, save = trained
    hyps, _, _ = generate(data_bin, save / "checkpoint_last.pt", subset="valid", extra=["--batch-size", "5"])
    n_valid = len((root / "raw" / "valid.src").read_text().splitlines())
    assert sorted(hyps) == list(range(n_valid))


def test_interactive_equals_generate(trained, generated):
    """fairseq-interactive on the raw test sentences gives fairseq-generate's
    hypotheses, sentence by sentence (same checkpoint, beam and length limit)."""
    root, data_bin, save = trained
    lines = (root / "raw" / "test.src").read_text().splitlines()
    hyps, _ = interactive(data_bin, save / "checkpoint_best.pt", lines, beam=3)
    expected, _, _ = generated
    assert hyps == [expected[i][0] for i in range(len(lines))]


def test_resume_continues_update_count(trained, tmp_path):
    _, data_bin, save = trained
    resumed = tmp_path / "resume"
    shutil.copytree(save, resumed)
    proc = train(data_bin, resumed, max_update=7, extra=EVAL_BLEU)
    log = proc.stdout + proc.stderr
    assert re.search(r"Loaded checkpoint .*checkpoint_last\.pt \(epoch \d+ @ 4 updates\)", log), log[-3000:]
    state = torch.load(resumed / "checkpoint_last.pt")
    assert state["optimizer_history"][-1]["num_updates"] == 7


def test_finetune_from_model(trained, tmp_path):
    _, data_bin, save = trained
    proc = train(data_bin, tmp_path / "ft", max_update=2,
                 extra=["--finetune-from-model", str(save / "checkpoint_best.pt")])
    assert "loaded checkpoint" in (proc.stdout + proc.stderr).lower()
    assert (tmp_path / "ft" / "checkpoint_last.pt").exists()


def test_user_dir_absolute_from_elsewhere(trained, tmp_path):
    """--user-dir given as the installed package's directory works from any cwd."""
    import fairseq_ctx, os
    _, data_bin, save = trained
    user_dir = os.path.dirname(fairseq_ctx.__file__)
    proc = train(data_bin, tmp_path / "elsewhere", max_update=1, user_dir=user_dir, cwd=tmp_path)
    assert (tmp_path / "elsewhere" / "checkpoint_last.pt").exists(), proc.stderr[-2000:]


def test_user_dir_relative_from_repo_root(trained, tmp_path):
    _, data_bin, _ = trained
    train(data_bin, tmp_path / "rel", max_update=1, user_dir="fairseq_ctx", cwd=REPO)
    assert (tmp_path / "rel" / "checkpoint_last.pt").exists()
