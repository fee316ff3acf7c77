"""Every architecture and the document task survive fairseq's own
machinery at scale.

For each variant, five real ``fairseq-train`` runs on tiny data:

* a single-process reference with ``--update-freq 2`` (and one more with
  ``--checkpoint-activations``);
* two CPU ranks (gloo, separate processes as on CPU) with ``--update-freq 1``,
  i.e. the same effective batch: fairseq gives rank r the batches r, r+2, ...
  and the reference groups batches (0, 1), (2, 3), ... into one update, so the
  two runs take identical optimizer steps up to floating-point summation order;
* the same two ranks under fairseq's default ``--ddp-backend pytorch_ddp``
  (PyTorch's DistributedDataParallel, as on GPUs; tests/cpu_pytorch_ddp.py
  runs it on CPU) with ``--checkpoint-activations``;
* a run killed with SIGKILL right after its first mid-epoch checkpoint, then
  resumed from ``checkpoint_last.pt``; it must reach the reference's weights
  and optimizer state, which only happens if the update count, the optimizer
  state and the position in the epoch were all restored.

Dropout is off so the runs are comparable at all: fairseq seeds dropout with
``seed + num_updates`` on every rank, so two ranks draw the same masks for
their two batches while one process draws two different ones.

The resulting checkpoints then load in ``fairseq-validate`` and through
fairseq's hub interface (``from_pretrained(..., user_dir=...)``).
(The plain ``transformer`` two-rank resume, which exercises the weights-only
allow-list on the broadcast state, is in test_safe_loading.py.)
"""
import os
import random
import signal

import pytest
import torch

import fairseq_ctx
from fairseq_ctx.architectures import select
from tests import cli_process
from tests.utils import (REPO, TINY_MODEL_FLAGS, USER_DIR, interactive_in_process, make_parallel_data, preprocess,
                         validate)

pytestmark = pytest.mark.integration

fairseq_ctx.register()  # the weights-only allow-list for the torch.load calls below

# Variants of fairseq_ctx/architectures.py, by name. The document task (its
# dataset, batching and iterator state) rides with ctxenc.
VARIANTS = {v.name: v for v in select(["ctxsan_both", "dc_full", "gret", "ctxenc"])}
MAX_UPDATE = 6
SAVE_EVERY = 2


@pytest.fixture(scope="module")
def data_bin(tmp_path_factory):
    root = tmp_path_factory.mktemp("scale_out")
    # --max-tokens 100 makes ~25 batches an epoch (12 updates with --update-freq 2),
    # so the checkpoints at updates 2 and 4 are mid-epoch.
    make_parallel_data(root / "raw", num_train=200, num_valid=16, num_test=8)
    return preprocess(root / "raw", root / "bin")


def _train_args(data_bin, save, variant, extra=()):
    """fairseq-train's command line (after ``python -m fairseq_cli.train``)."""
    v = VARIANTS[variant]
    return [str(data_bin), "--user-dir", USER_DIR,
            "--arch", v.arch, *TINY_MODEL_FLAGS, *v.flags, *v.task,
            "--dropout", "0", "--attention-dropout", "0", "--activation-dropout", "0",
            "--optimizer", "adam", "--lr", "0.005", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "4",
            "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
            "--max-tokens", "100", "--required-batch-size-multiple", "1", "--num-workers", "0",
            "--seed", "3", "--cpu", "--save-dir", str(save), "--no-progress-bar", "--log-interval", "1",
            "--log-format", "simple", "--no-epoch-checkpoints", *map(str, extra)]


def _env():
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def _check(proc, out):
    assert proc.returncode == 0, out[-6000:]


# Each run is a process of its own (tests/cli_process.py: a child of the
# preloaded fork server, ``python -m fairseq_cli.train`` run as __main__).

def _reference(data_bin, save, variant, extra=()):
    proc = cli_process.run("fairseq_cli.train", _train_args(data_bin, save, variant, [
        "--update-freq", "2", "--max-update", MAX_UPDATE, *extra]), cwd=REPO, env=_env())
    _check(proc, proc.stdout + proc.stderr)
    return proc.stdout + proc.stderr


def _two_ranks(data_bin, save, variant, ddp_backend="legacy_ddp", extra=()):
    """Two gloo ranks; ``pytorch_ddp`` (fairseq's default, PyTorch's
    DistributedDataParallel) through tests/cpu_pytorch_ddp.py."""
    port = random.randint(20000, 60000)
    procs = []
    module = "tests.cpu_pytorch_ddp" if ddp_backend == "pytorch_ddp" else "fairseq_cli.train"
    for rank in (0, 1):
        args = _train_args(data_bin, save, variant, [
            "--max-update", MAX_UPDATE, "--distributed-world-size", "2", "--distributed-rank", rank,
            "--distributed-backend", "gloo", "--distributed-no-spawn", "--ddp-backend", ddp_backend,
            "--distributed-init-method", f"tcp://127.0.0.1:{port}", *extra])
        procs.append(cli_process.CliProcess(module, args, cwd=REPO, env=_env()))
    outs = []
    for p in procs:
        p.wait(timeout=600)
        outs.append(p.stdout_text() + p.stderr_text())
        p.cleanup()
    for p, out in zip(procs, outs):
        _check(p, out)
    return outs


def _killed_then_resumed(data_bin, save, variant):
    """Train with a checkpoint every SAVE_EVERY updates, SIGKILLed the moment
    the first one is on disk (tests/sigkill_after_first_checkpoint.py), then
    resume to MAX_UPDATE."""
    proc = cli_process.CliProcess("tests.sigkill_after_first_checkpoint", _train_args(data_bin, save, variant, [
        "--update-freq", "2", "--max-update", 1000, "--save-interval-updates", SAVE_EVERY]), cwd=REPO, env=_env())
    proc.wait(timeout=600)
    seen = proc.stdout_text() + proc.stderr_text()
    proc.cleanup()
    assert proc.returncode == -signal.SIGKILL, seen[-6000:]
    killed_at = torch.load(save / "checkpoint_last.pt")["optimizer_history"][-1]["num_updates"]
    assert killed_at == SAVE_EVERY < MAX_UPDATE, f"killed at update {killed_at}, expected {SAVE_EVERY}"

    done = cli_process.run("fairseq_cli.train", _train_args(data_bin, save, variant, [
        "--update-freq", "2", "--max-update", MAX_UPDATE, "--save-interval-updates", SAVE_EVERY]),
        cwd=REPO, env=_env())
    out = done.stdout + done.stderr
    _check(done, out)
    return killed_at, out


@pytest.fixture(scope="module", params=list(VARIANTS))
def runs(request, data_bin, tmp_path_factory):
    variant = request.param
    root = tmp_path_factory.mktemp(variant)
    ref_log = _reference(data_bin, root / "ref", variant)
    ddp_logs = _two_ranks(data_bin, root / "ddp", variant)
    _reference(data_bin, root / "ref_checkpointed", variant, ["--checkpoint-activations"])
    torch_ddp_logs = _two_ranks(data_bin, root / "torch_ddp", variant, "pytorch_ddp", ["--checkpoint-activations"])
    killed_at, resume_log = _killed_then_resumed(data_bin, root / "killed", variant)
    return dict(variant=variant, root=root, ref_log=ref_log, ddp_logs=ddp_logs, torch_ddp_logs=torch_ddp_logs,
                killed_at=killed_at, resume_log=resume_log)


def _load(path):
    return torch.load(path)


def _max_abs_diff(a, b):
    assert a.keys() == b.keys()
    return max((a[k].float() - b[k].float()).abs().max().item() for k in a)


def test_two_ranks_match_single_process(runs):
    root = runs["root"]
    ref, ddp = _load(root / "ref" / "checkpoint_last.pt"), _load(root / "ddp" / "checkpoint_last.pt")
    assert ddp["optimizer_history"][-1]["num_updates"] == MAX_UPDATE
    for rank, out in enumerate(runs["ddp_logs"]):
        assert f"distributed init (rank {rank})" in out, out[-3000:]
    # Same effective batch, same steps: only the order of floating-point sums
    # may differ (with two ranks it does not: the runs agree exactly here).
    # Rank 0 alone would have seen half the batches, so this also shows that
    # rank 1's gradients were in every update.
    assert _max_abs_diff(ref["model"], ddp["model"]) < 1e-5


def test_pytorch_ddp_with_checkpointed_layers_matches_single_process(runs):
    """fairseq's default ``--ddp-backend pytorch_ddp`` (what runs on GPUs)
    with ``--checkpoint-activations``: PyTorch's DistributedDataParallel
    reduces each parameter's gradient once per backward pass, which a layer
    checkpointed by a reentrant wrapper and called twice in a forward
    breaks (the context encoder's shared layers, for the sources and the
    contexts, stopped the first update with "Expected to mark a variable
    ready only once"). The two ranks take the single process's steps."""
    root = runs["root"]
    ref, ddp = _load(root / "ref_checkpointed" / "checkpoint_last.pt"), _load(root / "torch_ddp" / "checkpoint_last.pt")
    assert ddp["optimizer_history"][-1]["num_updates"] == MAX_UPDATE
    assert "ddp_backend': 'pytorch_ddp'" in runs["torch_ddp_logs"][0]
    # against a single process checkpointed too: fairseq's reentrant
    # checkpoint sums a parameter's gradient contributions in another order
    # than the plain model, and Adam carries that rounding to up to 8e-5 in
    # six updates (measured against the plain reference, 2026-12-01)
    assert _max_abs_diff(ref["model"], ddp["model"]) < 1e-5


def test_sigkill_resume_matches_uninterrupted_run(runs):
    root, killed_at = runs["root"], runs["killed_at"]
    assert f"@ {killed_at} updates" in runs["resume_log"], runs["resume_log"][-3000:]
    ref, resumed = _load(root / "ref" / "checkpoint_last.pt"), _load(root / "killed" / "checkpoint_last.pt")
    assert resumed["optimizer_history"][-1]["num_updates"] == MAX_UPDATE
    # It resumed mid-epoch and stayed in epoch 1, like the reference.
    assert resumed["extra_state"]["train_iterator"]["epoch"] == ref["extra_state"]["train_iterator"]["epoch"] == 1
    assert (resumed["extra_state"]["train_iterator"]["iterations_in_epoch"]
            == ref["extra_state"]["train_iterator"]["iterations_in_epoch"])
    # Same weights and the same Adam moments: a wrong data position, update
    # count or optimizer state would each change them.
    assert _max_abs_diff(ref["model"], resumed["model"]) < 1e-6
    ref_opt, res_opt = ref["last_optimizer_state"]["state"], resumed["last_optimizer_state"]["state"]
    assert ref_opt.keys() == res_opt.keys()
    for k in ref_opt:
        for name in ("exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(ref_opt[k][name], res_opt[k][name], rtol=0, atol=1e-7)


def test_checkpoint_loads_in_validate(runs, data_bin):
    """(generate and interactive are run on every architecture by its own test file.)"""
    task_flags = VARIANTS[runs["variant"]].task
    loss, _ = validate(data_bin, runs["root"] / "ddp" / "checkpoint_last.pt", task_flags=task_flags)
    assert 0 < loss < 20


def test_hub_interface_loads_with_user_dir(runs, data_bin, tmp_path):
    """``from_pretrained`` with our user dir, as a researcher would script it,
    translates as fairseq-interactive does with the same checkpoint, beam and
    length limit (the lines one document under the document task)."""
    from fairseq.models.transformer import TransformerModel

    task = VARIANTS[runs["variant"]].task
    overrides = {"task": "document_translation", "context_size": 1} if task else {}
    checkpoint = runs["root"] / "ddp" / "checkpoint_last.pt"
    hub = TransformerModel.from_pretrained(str(checkpoint.parent), checkpoint_file=checkpoint.name,
                                           data_name_or_path=str(data_bin), user_dir=USER_DIR, **overrides)
    hub.eval()
    lines = ["w1 w2 w3", "w4 w5", "w6 w7 w8 w9"]
    out = hub.translate(lines, beam=2, max_len_b=20)
    assert out == interactive_in_process(data_bin, checkpoint, lines, tmp_path, beam=2, task_flags=task)
