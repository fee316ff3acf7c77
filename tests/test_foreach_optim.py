"""``--optimizer adam_foreach`` (fairseq_ctx/foreach_optim.py): fairseq's
numbers in far fewer operations per update; and ``--bf16`` outside training
with the document task (fairseq_ctx/tasks/half_decoding.py).

The training comparisons run fairseq's own ``Trainer`` twice from the same
seed, once with ``--optimizer adam`` (fairseq's Adam, ``clip_grad_norm_``,
``FP16Optimizer`` with its loss scaler) and once with ``adam_foreach``, and
compare weights, float32 masters, Adam moments, gradient norms and the loss
scale after 20 updates."""
import contextlib
import copy
import itertools
import math

import pytest
import torch

from tests.utils import generate_in_process, load_script, validate

MAX_DIFF = 1e-6
UPDATES = 20

# Non-view ATen operations of one training update at the study's size with
# --optimizer adam_foreach (scripts/update_ops.py; measured values in
# docs/benchmarks.md), with about 3% of room for fairseq's logging and
# torch's autograd to differ between versions. fairseq's Adam needs 1,896
# (fp32) and 2,291 (bf16) for the baseline.
BUDGET = {
    "transformer": {"fp32": 785, "bf16": 800},
    "transformer_ctxsan": {"fp32": 935, "bf16": 965},
    "transformer_dc": {"fp32": 810, "bf16": 830},
    "transformer_gret": {"fp32": 1205, "bf16": 1240},
    "transformer_ctxenc": {"fp32": 2075, "bf16": 2095},
}
BASELINE_LIMIT = 900  # the baseline's update, fp32 and bf16 alike


def _update_ops():
    return load_script("update_ops")


gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


# ---------------------------------------------------------------- same numbers as fairseq's

def _trainer(data_bin, optimizer, precision, device, extra=()):
    """A fresh trainer of the study's baseline on the toy corpus (batches of
    at most 300 tokens), seeded alike for every optimizer."""
    update_ops = _update_ops()
    # --fp16: the scale doubles every 4 updates without overflow; on CPU it
    # starts low enough never to overflow (fairseq's trainer handles an
    # overflow with torch.tensor(0.0).cuda()), on CUDA high enough to
    argv = update_ops.trainer_args(data_bin, "transformer", precision, optimizer, extra=[
        "--max-tokens", "300", "--fp16-init-scale", "8" if device == "cpu" else "65536",
        "--fp16-scale-window", "4", *extra])
    if device == "cuda":
        argv.remove("--cpu")
        if precision == "fp16":
            argv.remove("--fp16-no-flatten-grads")  # the flat float32 masters: CUDA only
    torch.manual_seed(1)
    trainer, _ = update_ops.build_trainer(argv)
    return trainer


def _gemms(precision, device):
    """On CPU the half-precision matrix products through float32 kernels,
    rounded once (the CPU's own half GEMM is a reference loop, ~100x
    slower): both optimizers see the same products, and what is compared,
    the updates, masters and loss scaling, is untouched."""
    if device == "cpu" and precision != "fp32":
        return load_script("precision_check").half_gemms_through_float32()
    return contextlib.nullcontext()


def _train(data_bin, optimizer, precision, device, extra=()):
    """A trainer after UPDATES updates over the toy corpus (the epoch
    repeated), and the gradient norms it saw."""
    trainer = _trainer(data_bin, optimizer, precision, device, extra)
    with _gemms(precision, device):
        norms = _train_steps(trainer)
    return trainer, norms


def _batches(trainer):
    """The UPDATES batches both runs train on, in order."""
    done = 0
    while done < UPDATES:
        itr = trainer.task.get_batch_iterator(
            dataset=trainer.task.dataset("train"), max_tokens=300, max_positions=(1024, 1024),
            required_batch_size_multiple=1, seed=1).next_epoch_itr(shuffle=False)
        for sample in itr:
            if done == UPDATES:
                return
            yield sample
            done += 1


def _recording_norms(trainer):
    """The gradient norms of the trainer's updates, appended as they come (an
    update skipped for overflow records none: fairseq raises before)."""
    norms = []
    clip = trainer.clip_grad_norm
    trainer.clip_grad_norm = lambda max_norm: norms.append(clip(max_norm)) or norms[-1]
    return norms


def _train_steps(trainer):
    norms = _recording_norms(trainer)
    for sample in _batches(trainer):
        trainer.train_step([sample])
    return [float(n) for n in norms]


def _state(trainer):
    """Model weights, float32 masters and Adam moments, in parameter order."""
    opt = trainer.optimizer
    out = {f"model.{n}": p.detach().float().cpu() for n, p in trainer.model.named_parameters()}
    masters = getattr(opt, "fp32_params", None)
    if masters is not None:
        masters = list(masters.values()) if isinstance(masters, dict) else masters
        out.update({f"master.{i}": p.detach().cpu() for i, p in enumerate(masters)})
    for i, p in enumerate(opt.optimizer.param_groups[0]["params"]):
        state = opt.optimizer.state[p]
        out[f"exp_avg.{i}"] = state["exp_avg"].cpu()
        out[f"exp_avg_sq.{i}"] = state["exp_avg_sq"].cpu()
        out[f"step.{i}"] = torch.tensor(float(state["step"]))
    return out


def _largest_difference(a, b, prefix=""):
    """The largest absolute difference between two :func:`_state` dicts,
    over the entries whose names start with ``prefix``."""
    return max((a[k] - b[k]).abs().max().item() for k in a if k.startswith(prefix))


def _compare(doc_corpus, precision, device, max_diff=MAX_DIFF, extra=()):
    data_bin = str(doc_corpus[1])
    ref, ref_norms = _train(data_bin, "adam", precision, device, extra)
    new, new_norms = _train(data_bin, "adam_foreach", precision, device, extra)
    if "--memory-efficient-fp16" in extra:  # no float32 masters: fairseq's wrapper around either optimizer
        assert type(ref.optimizer).__name__ == type(new.optimizer).__name__ == "MemoryEfficientFP16Optimizer"
        assert (type(ref.optimizer.optimizer).__name__, type(new.optimizer.optimizer).__name__) == \
            ("Adam", "ForeachAdam")
    else:
        assert type(new.optimizer).__name__ == \
            ("FairseqAdamForeach" if precision == "fp32" else "ForeachFP16Optimizer")
        assert type(ref.optimizer).__name__ == ("FairseqAdam" if precision == "fp32" else "FP16Optimizer")
    # the recipe's --clip-norm 1 clips some of these updates (else clipping is not compared)
    assert max(ref_norms) > 1.0, ref_norms
    assert len(ref_norms) == len(new_norms) == UPDATES
    for a, b in zip(ref_norms, new_norms):
        assert (math.isinf(a) and math.isinf(b)) or abs(a - b) <= max_diff * max(1.0, abs(a)), (ref_norms, new_norms)
    ref_state, new_state = _state(ref), _state(new)
    assert ref_state.keys() == new_state.keys()
    worst = _largest_difference(ref_state, new_state)
    assert worst <= max_diff, worst
    assert ref.get_num_updates() == new.get_num_updates()
    if precision == "fp16":
        assert ref.optimizer.scaler.loss_scale == new.optimizer.scaler.loss_scale
        if device == "cpu":
            assert ref.optimizer.scaler.loss_scale == 8 * 2 ** (UPDATES // 4)  # it grew at every window
    return ref_norms


def test_twenty_updates_equal_fairseqs_adam_fp32(doc_corpus):
    _compare(doc_corpus, "fp32", "cpu")


def test_twenty_updates_equal_fairseqs_adam_bf16_masters(doc_corpus):
    """--bf16: fairseq's FP16Optimizer with unflattened float32 masters."""
    _compare(doc_corpus, "bf16", "cpu")


def test_twenty_updates_equal_fairseqs_adam_fp16_loss_scaling(doc_corpus):
    """--fp16 (per-parameter masters on CPU): fairseq's dynamic loss
    scaling, the scale growing from 8 to 256 (on CUDA, from 65,536 with
    overflow skips)."""
    _compare(doc_corpus, "fp16", "cpu")


# --amp on CPU: torch says that CUDA's scaler and autocast are off (the tests give the trainer a CPU scaler)
CPU_AMP = pytest.mark.filterwarnings(
    "ignore:torch.cuda.amp.GradScaler is enabled, but CUDA is not available:UserWarning",
    "ignore:CUDA is not available or torch_xla is imported:UserWarning")


def _amp_trainer(data_bin, optimizer, extra=()):
    """A trainer with ``--amp``, given torch's CPU gradient scaler with the
    settings asked for: fairseq's is CUDA's, disabled on CPU."""
    from fairseq_ctx.amp_scaling import scaler_kwargs

    trainer = _trainer(data_bin, optimizer, "fp32", "cpu", extra=["--amp", *extra])
    assert type(trainer.optimizer).__name__ == "AMPOptimizer"
    trainer.optimizer._grad_scaler = torch.amp.GradScaler("cpu", **scaler_kwargs(trainer.cfg.common))
    return trainer


@CPU_AMP
@pytest.mark.parametrize("optimizer", ["adam", "adam_foreach"])
def test_amp_loss_scaling_leaves_every_update_as_float32s(doc_corpus, optimizer):
    """--amp: fairseq's AMPOptimizer scales the loss and unscales the
    gradients through the optimizer (here fairseq's Adam and ours) before
    clipping and stepping. Scaling by a power of two is exact, so with
    the scale at 8, doubled every 4 updates without overflow (8 to 256 over
    20), every update equals float32 training's. fairseq's own unscaled
    the gradients twice and drifted (fairseq_ctx/amp_scaling.py). (The
    forward's autocast is CUDA's and stays off here.)"""
    data_bin = str(doc_corpus[1])
    ref, ref_norms = _train(data_bin, optimizer, "fp32", "cpu")
    amp = _amp_trainer(data_bin, optimizer, extra=["--amp-init-scale", "8", "--amp-scale-window", "4"])
    amp_norms = _train_steps(amp)
    assert max(ref_norms) > 1.0 and amp_norms == ref_norms, (ref_norms, amp_norms)
    ref_state, amp_state = _state(ref), _state(amp)
    assert ref_state.keys() == amp_state.keys()
    worst = _largest_difference(ref_state, amp_state)
    assert worst == 0.0, worst
    assert amp.optimizer.scaler.get_scale() == 8.0 * 2 ** (UPDATES // 4) and amp.get_num_updates() == UPDATES
    if optimizer == "adam":  # fairseq's class as shipped: the same run drifts (2026-12-01: 1.7e-2, 0.046)
        from fairseq.optim.amp_optimizer import AMPOptimizer

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(AMPOptimizer, "clip_grad_norm", _fairseqs_amp_optimizer_class().clip_grad_norm)
            shipped = _amp_trainer(data_bin, optimizer, extra=["--amp-init-scale", "8", "--amp-scale-window", "4"])
            _train_steps(shipped)
        drift = _state(shipped)
        weights = _largest_difference(ref_state, drift, "model.")
        moments = (sum(drift[k].norm() ** 2 for k in drift if k.startswith("exp_avg."))
                   / sum(ref_state[k].norm() ** 2 for k in ref_state if k.startswith("exp_avg."))) ** 0.5
        assert weights > 1e-3 and moments < 0.5, (weights, moments)


def _fairseqs_amp_optimizer_class():
    """fairseq's AMPOptimizer as its file defines it (the plugin corrects the
    imported class), loaded anew."""
    import importlib.util

    import fairseq.optim.amp_optimizer as module

    spec = importlib.util.spec_from_file_location("fairseq_amp_optimizer_as_shipped", module.__file__)
    shipped = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shipped)
    return shipped.AMPOptimizer


@CPU_AMP
def test_amp_clip_grad_norm_is_fairseqs_but_for_what_it_unscales_through(doc_corpus, caplog):
    """The corrected clip_grad_norm (a copy of fairseq's) returns fairseq's
    norm of the gradients unscaled once, and on non-finite gradients does
    what fairseq's does: it reports the overflow, the step is skipped and
    the scale halved, and below the minimum scale it stops training."""
    from fairseq.optim.amp_optimizer import AMPOptimizer

    shipped = _fairseqs_amp_optimizer_class()
    assert shipped.clip_grad_norm is not AMPOptimizer.clip_grad_norm
    data_bin = str(doc_corpus[1])
    sample = next(iter(_batches(_trainer(data_bin, "adam", "fp32", "cpu"))))
    seen = {}
    for label, clip in (("ours", AMPOptimizer.clip_grad_norm), ("fairseq", shipped.clip_grad_norm)):
        trainer = _amp_trainer(data_bin, "adam")
        opt = trainer.optimizer
        clips = []
        opt.clip_grad_norm = lambda max_norm, aggregate_norm_fn=None: clips.append(
            clip(opt, max_norm, aggregate_norm_fn)) or clips[-1]
        trainer.train_step([sample])
        # an overflow: a gradient made infinite after the backward, the scale at 8
        opt._grad_scaler = torch.amp.GradScaler("cpu", init_scale=8.0)
        opt.scaler.scale(torch.ones(()))  # the scale exists, as after a backward
        params = [p for p in opt.fp32_optimizer.params if p.grad is not None]
        params[0].grad[0] = float("inf")
        before = [p.detach().clone() for p in params]
        caplog.clear()
        with caplog.at_level("INFO"):  # (the class as shipped, loaded anew, logs under another name)
            norm = clip(opt, 1.0)
        opt.step()
        seen[label] = (float(clips[0]), math.isinf(float(norm)), [r.getMessage() for r in caplog.records],
                       all(torch.equal(a, p) for a, p in zip(before, params)), opt.scaler.get_scale())
        # below the minimum scale: training stops
        opt.min_loss_scale = 4.0
        opt.scaler.scale(torch.ones(()))
        params[0].grad[0] = float("inf")
        with pytest.raises(FloatingPointError, match=r"^AMP: Minimum loss scale reached \(4\.0\)"):
            clip(opt, 1.0)
    norm, overflowed, messages, kept, scale = seen["ours"]
    assert norm == seen["fairseq"][0] > 0 and overflowed and kept and scale == 4.0 == seen["fairseq"][4]
    assert messages == ["AMP: overflow detected, setting scale to 4.0"], messages  # fairseq's says "to to"
    assert seen["fairseq"][1:4] == (True, ["AMP: overflow detected, setting scale to to 4.0"], True)


@CPU_AMP
def test_amp_overflow_retries_the_batch_at_half_the_scale(doc_corpus):
    """An overflow under --amp: the corrected clip reports it, the step is
    skipped and the scale halved, and fairseq's trainer feeds the same batch
    again (--amp-batch-retries), which then makes the update: one update,
    the scale halved once, the weights those of float32 training's first
    update."""
    data_bin = str(doc_corpus[1])
    ref = _trainer(data_bin, "adam", "fp32", "cpu")
    sample = next(iter(_batches(ref)))
    ref.train_step([sample])
    amp = _amp_trainer(data_bin, "adam", extra=["--amp-init-scale", "8"])
    weight = next(p for p in amp.model.parameters() if p.requires_grad)
    backwards = []
    # the first backward's gradient of one weight made infinite, as an overflow leaves it
    weight.register_hook(lambda g: backwards.append(1) or (torch.full_like(g, float("inf")) if len(backwards) == 1
                                                           else g))
    amp.train_step([sample])
    assert len(backwards) == 2 and amp.get_num_updates() == 1 and amp.optimizer.scaler.get_scale() == 4.0
    ref_state, amp_state = _state(ref), _state(amp)
    assert _largest_difference(ref_state, amp_state) == 0.0


@pytest.mark.unit
def test_amp_flags_reach_the_scaler():
    """--amp-init-scale is the initial scale and --amp-scale-window the
    growth interval (fairseq passed --fp16-init-scale and, with a window,
    --amp-init-scale as the interval); fairseq's defaults, 128 and torch's
    2,000, are what it built already."""
    import types

    from fairseq_ctx.amp_scaling import _fairseqs_scaler_kwargs, scaler_kwargs

    common = types.SimpleNamespace(fp16_init_scale=128, amp_init_scale=32, amp_scale_window=5)
    assert scaler_kwargs(common) == {"init_scale": 32, "growth_interval": 5}
    assert _fairseqs_scaler_kwargs(common) == {"init_scale": 128, "growth_interval": 32}
    default = types.SimpleNamespace(fp16_init_scale=128, amp_init_scale=128, amp_scale_window=None)
    assert scaler_kwargs(default) == _fairseqs_scaler_kwargs(default) == {"init_scale": 128}


@CPU_AMP
def test_amp_flags_reach_the_trainers_scaler(doc_corpus, monkeypatch):
    """fairseq-train's AMPOptimizer gets its scaler from the flags (built
    for CUDA: on CPU it is disabled and keeps no settings to read, so the
    construction is recorded)."""
    built = []
    real = torch.amp.GradScaler
    monkeypatch.setattr(torch.amp, "GradScaler",
                        lambda *args, **kwargs: built.append((args, kwargs, real(*args, **kwargs))) or built[-1][2])
    trainer = _trainer(str(doc_corpus[1]), "adam", "fp32", "cpu",
                       extra=["--amp", "--amp-init-scale", "32", "--amp-scale-window", "5"])
    assert type(trainer.optimizer).__name__ == "AMPOptimizer"
    assert [(args, kwargs) for args, kwargs, _ in built] == [(("cuda",), {"init_scale": 32, "growth_interval": 5})]
    assert trainer.optimizer.scaler is built[0][2]


def test_twenty_updates_equal_fairseqs_adam_memory_efficient_fp16(doc_corpus):
    """--memory-efficient-fp16: fairseq's MemoryEfficientFP16Optimizer keeps
    no float32 masters, so the optimizer updates float16 parameters itself,
    on float32 copies with float32 moments, copied back (fairseq's Adam and
    ForeachAdam's half-precision branch); loss scaling as for --fp16."""
    _compare(doc_corpus, "fp16", "cpu", extra=["--memory-efficient-fp16"])


# ---------------------------------------------------------------- on CUDA: update by update

def _masters(optimizer):
    masters = getattr(optimizer, "fp32_params", None)
    if masters is None:
        return []
    return list(masters.values()) if isinstance(masters, dict) else list(masters)


def _take_state(dst, src):
    """dst's trainer takes src's weights, float32 masters, Adam state and loss
    scaler, so that its next update starts where src's does."""
    with torch.no_grad():
        for a, b in zip(src.model.parameters(), dst.model.parameters()):
            b.copy_(a)
        for a, b in zip(_masters(src.optimizer), _masters(dst.optimizer)):
            b.copy_(a)
    dst.optimizer.load_state_dict(copy.deepcopy(src.optimizer.state_dict()))
    scaler = getattr(src.optimizer, "scaler", None)
    if scaler is not None:
        dst.optimizer.scaler.__dict__.update(vars(scaler))


def _lockstep(data_bin, precision, device, ref_patch=contextlib.nullcontext, updates=UPDATES):
    """fairseq's Adam trains UPDATES updates; before each, the adam_foreach
    trainer takes its state, makes the same update from it, and the two
    results are compared. Returns the largest state difference (absolute;
    half-precision weights less the one rounding step a master near a
    rounding boundary may take either way) and the largest relative
    difference of gradient norms, over all updates; ``ref_patch`` wraps
    the reference's updates."""
    ref = _trainer(data_bin, "adam", precision, device)
    new = _trainer(data_bin, "adam_foreach", precision, device)
    assert type(new.optimizer).__name__ == ("FairseqAdamForeach" if precision == "fp32" else "ForeachFP16Optimizer")
    assert type(ref.optimizer).__name__ == ("FairseqAdam" if precision == "fp32" else "FP16Optimizer")
    ref_norms, new_norms = _recording_norms(ref), _recording_norms(new)
    worst_state = worst_norm = 0.0
    with _gemms(precision, device):
        for sample in itertools.islice(_batches(ref), updates):
            _take_state(new, ref)
            with ref_patch():
                ref.train_step([sample])
            new.train_step([sample])
            assert len(ref_norms) == len(new_norms), "one of the two skipped an update the other made"
            assert ref.get_num_updates() == new.get_num_updates()
            if ref_norms:
                a, b = float(ref_norms[-1]), float(new_norms[-1])
                if not (math.isinf(a) and math.isinf(b)):
                    worst_norm = max(worst_norm, abs(a - b) / max(1.0, abs(a)))
            ref_state, new_state = _state(ref), _state(new)
            assert ref_state.keys() == new_state.keys()
            half_eps = torch.finfo(next(ref.model.parameters()).dtype).eps if precision != "fp32" else 0.0
            for key, a in ref_state.items():
                diff = (a - new_state[key]).abs()
                if key.startswith("model.") and half_eps:
                    diff = (diff - half_eps * a.abs()).clamp(min=0)
                worst_state = max(worst_state, diff.max().item())
            if precision == "fp16":
                assert ref.optimizer.scaler.loss_scale == new.optimizer.scaler.loss_scale
    assert ref_norms and max(float(n) for n in ref_norms) > 1.0, ref_norms  # clipping is compared
    return worst_state, worst_norm, len(ref_norms)


# A different summation order changes a gradient norm in its last bits, and
# Adam turns such differences into whole steps where a gradient is near zero:
# a 20-update trajectory with the norm summed in float64 instead differs from
# fairseq's by 2.6e-3 in the norm and 1.8e-3 in the weights on CPU. On CUDA
# the foreach norm is a multi-tensor reduction (another order), so there each
# update is compared from the same state, where rounding stays rounding.
CUDA_MAX_DIFF = 1e-5


@contextlib.contextmanager
def _norm_summed_in_float64():
    """fairseq's clip_grad_norm_ with the same norm summed in another order
    (float64, rounded once): what CUDA's multi-tensor norm does to it."""
    from fairseq import utils

    clip = utils.clip_grad_norm_

    def reordered(params, max_norm, aggregate_norm_fn=None):
        grads = [p.grad.detach() for p in params if getattr(p, "grad", None) is not None]
        total = torch.stack([g.double().norm() for g in grads]).norm().float()
        if max_norm > 0:  # FP16Optimizer measures with 0 and clips through its multiply factor
            torch._foreach_mul_(grads, (float(max_norm) / (total + 1e-6)).clamp_(max=1))
        return total

    utils.clip_grad_norm_ = reordered
    try:
        yield
    finally:
        utils.clip_grad_norm_ = clip


@pytest.mark.parametrize("precision,updates", [("fp32", UPDATES), ("fp16", 6)])
def test_lockstep_keeps_a_reordered_norm_to_rounding(doc_corpus, precision, updates):
    """The CUDA comparison, rehearsed on CPU: the reference's norm summed in
    another order differs (it is not the same computation), and update by
    update everything stays within CUDA_MAX_DIFF of it (fp16: fairseq's
    FP16Optimizer with per-parameter masters and its loss scaler, whose
    scale doubles at the fourth update, carried across)."""
    worst_state, worst_norm, made = _lockstep(str(doc_corpus[1]), precision, "cpu", _norm_summed_in_float64, updates)
    assert made == updates
    assert 0 < worst_norm <= CUDA_MAX_DIFF, worst_norm
    assert worst_state <= CUDA_MAX_DIFF, worst_state


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_updates_equal_fairseqs_adam_on_cuda(doc_corpus, precision):
    """On CUDA the foreach kernels are multi-tensor kernels, not the
    per-tensor ones: each update, from the state fairseq's Adam reached,
    equal to fairseq's up to rounding (fp16: flat float32 masters, from an
    initial scale of 65,536, so that overflowed updates are skipped alike)."""
    worst_state, worst_norm, updates = _lockstep(str(doc_corpus[1]), precision, "cuda")
    assert worst_norm <= CUDA_MAX_DIFF and worst_state <= CUDA_MAX_DIFF, (worst_norm, worst_state)
    assert updates == UPDATES if precision != "fp16" else 0 < updates < UPDATES


# ---------------------------------------------------------------- pieces against fairseq's

@pytest.mark.unit
def test_foreach_adam_equals_fairseqs_adam_step_by_step():
    """Two groups with their own learning rate and weight decay, amsgrad, a
    parameter without a gradient in some steps (a step count of its own),
    bfloat16 parameters (--memory-efficient-bf16's path), and a state
    loaded from fairseq's Adam."""
    from fairseq.optim.adam import Adam

    from fairseq_ctx.foreach_optim import ForeachAdam

    def params():
        g = torch.Generator().manual_seed(0)
        p = [torch.randn(5, 3, generator=g), torch.randn(7, generator=g), torch.randn(4, 2, generator=g),
             torch.randn(6, generator=g).bfloat16()]
        return [torch.nn.Parameter(t) for t in p]

    def groups(ps):
        return [{"params": ps[:2], "lr": 1e-2, "weight_decay": 0.1},
                {"params": ps[2:], "lr": 3e-3, "weight_decay": 0.0, "amsgrad": True}]

    ref_p, new_p = params(), params()
    ref = Adam(groups(ref_p), betas=(0.9, 0.98), eps=1e-8)
    new = ForeachAdam(groups(new_p), betas=(0.9, 0.98), eps=1e-8)
    g = torch.Generator().manual_seed(1)
    for step in range(12):
        grads = [torch.randn(p.shape, generator=g) * 10 ** -(step % 4) for p in ref_p]
        for ps in (ref_p, new_p):
            for i, (p, gr) in enumerate(zip(ps, grads)):
                p.grad = None if (i == 1 and step % 3 == 1) else gr.to(p.dtype)
        ref.step()
        new.step()
        if step == 5:  # both resume from fairseq's state (copies, as from a checkpoint; torch's
            # load_state_dict rounds the bfloat16 parameter's moments to its dtype, for both alike)
            state = ref.state_dict()
            ref.load_state_dict(copy.deepcopy(state))
            new.load_state_dict(copy.deepcopy(state))
    for a, b in zip(ref_p, new_p):
        assert torch.equal(a, b)
    for a, b in zip(ref_p, new_p):
        sa, sb = ref.state[a], new.state[b]
        assert sa["step"] == sb["step"]
        for key in sa:
            if key != "step":
                assert torch.equal(sa[key], sb[key]), key
    assert ref.state[ref_p[1]]["step"] == 8 and ref.state[ref_p[0]]["step"] == 12


@pytest.mark.unit
@pytest.mark.parametrize("max_norm", [0.0, 0.5, 1e9])
def test_clip_grad_norm_equals_fairseqs(max_norm):
    """The total norm and the clipped gradients, expert gradients included."""
    from fairseq import utils

    from fairseq_ctx.foreach_optim import clip_grad_norm_

    def params():
        g = torch.Generator().manual_seed(2)
        ps = [torch.nn.Parameter(torch.zeros(*s)) for s in ((4, 3), (9,), (2, 2, 2), (5,))]
        for p in ps:
            p.grad = torch.randn(p.shape, generator=g)
        ps[3].expert = True
        ps.append(torch.nn.Parameter(torch.zeros(3)))  # no gradient
        return ps

    ref, new = params(), params()
    ref_norm = utils.clip_grad_norm_(ref, max_norm)
    new_norm = clip_grad_norm_(new, max_norm)
    assert torch.equal(ref_norm, new_norm)
    for a, b in zip(ref, new):
        assert (a.grad is None and b.grad is None) or torch.equal(a.grad, b.grad)
    if max_norm == 0.5:
        assert not torch.equal(ref[0].grad, params()[0].grad)  # it did clip


@pytest.mark.unit
def test_fp16_adam_stats_is_refused_in_one_line():
    from fairseq_ctx.errors import ConfigError
    from fairseq_ctx.foreach_optim import FairseqAdamForeach, FairseqAdamForeachConfig

    cfg = FairseqAdamForeachConfig(fp16_adam_stats=True, lr=[1e-3], tpu=False)
    with pytest.raises(ConfigError, match=r"^--fp16-adam-stats needs apex"):
        FairseqAdamForeach(cfg, [torch.nn.Parameter(torch.zeros(2))])


def test_other_optimizers_keep_fairseqs_fp16_optimizer(doc_corpus):
    """The FP16Optimizer wrapper changes nothing unless adam_foreach is named."""
    update_ops = _update_ops()
    trainer, _ = update_ops.build_trainer(update_ops.trainer_args(str(doc_corpus[1]), "transformer", "bf16", "adam"))
    from fairseq.optim.fp16_optimizer import FP16Optimizer

    assert type(trainer.optimizer) is FP16Optimizer


# ---------------------------------------------------------------- operations per update

@pytest.mark.parametrize("arch", list(BUDGET))
def test_update_ops_within_budget(arch, doc_corpus):
    """One update at the study's size (fp32 and bf16) within its budget;
    the baseline's within BASELINE_LIMIT."""
    update_ops = _update_ops()
    for precision, budget in BUDGET[arch].items():
        r = update_ops.measure(str(doc_corpus[1]), arch, precision, "adam_foreach")
        assert r["total"] <= budget, (arch, precision, r["total"], r["after_backward"])
        if arch == "transformer":
            assert r["total"] <= BASELINE_LIMIT
        # no per-parameter loop is left after the backward
        assert r["after_backward"] < r["parameters"], (arch, precision, r["after_backward"])


# The context encoder with its contexts in one pass (its length groups are
# the operations a GPU measurement weighs against the padding they save:
# docs/benchmarks.md). Unlike BUDGET's these follow the batch: the toy
# corpus's first batch makes 940 (fp32) and 957 (bf16), the Bible's 1,116
# and 1,133; about 3% of room.
ONE_PASS_BUDGET = {"fp32": 970, "bf16": 985}


def test_ctxenc_length_groups_cost_over_800_operations_an_update(doc_corpus):
    """The toy batch forms length groups; with the contexts in one pass the
    update is within its budget, and the switch is undone after it."""
    from fairseq_ctx.models import transformer_ctxenc

    update_ops = _update_ops()
    for precision, budget in ONE_PASS_BUDGET.items():
        one_pass = update_ops.measure(str(doc_corpus[1]), "transformer_ctxenc", precision, ctxenc_one_pass=True)
        assert transformer_ctxenc.CONTEXT_MIN_FILL == 0.8
        grouped = update_ops.measure(str(doc_corpus[1]), "transformer_ctxenc", precision)
        assert one_pass["total"] <= budget, (precision, one_pass["total"])
        # the groups' own passes through the shared layers, forward and backward
        assert grouped["total"] - one_pass["total"] > 800, (precision, grouped["total"], one_pass["total"])


# Non-view ATen operations of one incremental decoding step at the study's
# size (scripts/update_ops.py --decoding-step; docs/benchmarks.md), with the
# same room: each is a kernel launch per generated token on a GPU.
STEP_BUDGET = {"transformer": 105, "ctxsan": 105, "ctxsan_both": 127, "dc": 105, "dc_full": 142, "gret": 110,
               "ctxenc": 105}
# the model's operations when beam search moves the beams between two steps
# (its cached states and encoder output reordered), exactly as measured: one
# index_select per cached tensor and per tensor of encoder_out (ctxsan's
# decoder-side prefix sums add 4, GRET's cached W_s s 1 and its global state
# in encoder_out 1; DC's keys and values take the order at the next step's
# append, a clone of the order per layer instead), no room: each is a launch
# per step, and one more is a state reordered twice or a cache that need
# not exist
REORDER_OPS = {"transformer": 10, "ctxsan": 10, "ctxsan_both": 14, "dc": 10, "dc_full": 10, "gret": 12,
               "ctxenc": 10}


def test_decoding_step_ops_within_budget(doc_corpus):
    """One decoding step of every architecture and decoder-side option
    within its budget (ctxsan's decoder-side context made 132 before its
    blocks were projected by one GEMM without autograd), and so the model's
    part of the move of the beams before the next."""
    update_ops = _update_ops()
    assert set(STEP_BUDGET) == set(REORDER_OPS) == set(update_ops.STEP_VARIANTS)
    counts = {name: update_ops.measure_step(str(doc_corpus[1]), name) for name in STEP_BUDGET}
    totals = {name: c["total"] for name, c in counts.items()}
    assert all(totals[name] <= budget for name, budget in STEP_BUDGET.items()), totals
    reorders = {name: c["reorder_ops"] for name, c in counts.items()}
    assert {name: c["reorder"] for name, c in counts.items()} == REORDER_OPS, reorders


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_update_launches_on_cuda(doc_corpus, precision):
    """On CUDA, the update after the backward launches fewer kernels than
    the model has parameter tensors (the foreach calls take torch's
    multi-tensor path, not a per-tensor fallback)."""
    from torch.profiler import ProfilerActivity, profile

    update_ops = _update_ops()
    argv = update_ops.trainer_args(str(doc_corpus[1]), "transformer", precision, "adam_foreach")
    argv.remove("--cpu")
    if precision == "fp16":
        argv.remove("--fp16-no-flatten-grads")
    trainer, sample = update_ops.build_trainer(argv)
    trainer.train_step([sample])
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        trainer.train_step([sample])
        torch.cuda.synchronize()
    events = sorted(prof.events(), key=lambda e: e.time_range.start)
    start = next(e.time_range.start for e in events if e.name == "reduce-grads")
    is_launch = load_script("step_profile").is_launch  # the profiler's names of a kernel launch
    launches = [e for e in events if is_launch(e.name) and e.time_range.start >= start]
    n_params = sum(1 for p in trainer.model.parameters() if p.requires_grad)
    # none counted would mean the profiler saw no launch at all, not a cheap update
    assert 0 < len(launches) < n_params, (len(launches), n_params)


# ---------------------------------------------------------------- --bf16 outside training

def _hyps(generated):
    hyps, _ = generated
    return {i: score for i, (_, score) in hyps.items()}


def test_generate_decodes_in_bf16_validate_says_float32(doc_corpus, trained_checkpoint, tmp_path,
                                                                       caplog):
    """fairseq-generate --bf16 with the document task casts the model
    (its scores move by bfloat16 rounding, not more; fairseq-interactive
    loads its models the same way); fairseq-validate says
    in one line that it computes in float32 and reports float32's loss."""
    from fairseq.checkpoint_utils import load_model_ensemble
    from fairseq import options, tasks

    from fairseq_ctx.architectures import BY_NAME
    from fairseq_ctx.tasks.half_decoding import CAST, FLOAT32
    from tests.utils import USER_DIR, _cli_args

    variant = BY_NAME["ctxenc"]
    ckpt = trained_checkpoint("ctxenc")
    data_bin = str(doc_corpus[1])
    task_flags = list(variant.task)

    fp32 = _hyps(generate_in_process(data_bin, ckpt, tmp_path / "fp32", task_flags=task_flags))
    with caplog.at_level("INFO", logger="fairseq_ctx.tasks.document_translation"):
        bf16 = _hyps(generate_in_process(data_bin, ckpt, tmp_path / "bf16", task_flags=task_flags,
                                         extra=["--bf16"]))
    assert CAST in caplog.text
    assert fp32.keys() == bf16.keys() == set(range(14))
    diffs = [abs(fp32[i] - bf16[i]) for i in fp32]
    assert max(diffs) > 0, "--bf16 decoded in float32"

    # the models fairseq-generate's and fairseq-interactive's loading build for the
    # command line's task: with --bf16, the float32 weights rounded to bfloat16
    cfg = _cli_args(options.get_generation_parser(), [
        data_bin, "--user-dir", USER_DIR, "--path", ckpt, "--cpu", *task_flags])
    (model32,), _ = load_model_ensemble([str(ckpt)], task=tasks.setup_task(cfg.task))
    assert {p.dtype for p in model32.parameters()} == {torch.float32}
    for parser in (options.get_generation_parser(), options.get_interactive_generation_parser()):
        cfg = _cli_args(parser, [data_bin, "--user-dir", USER_DIR, "--path", ckpt, "--bf16", "--cpu", *task_flags])
        (model16,), _ = load_model_ensemble([str(ckpt)], task=tasks.setup_task(cfg.task))
        weights = dict(model16.named_parameters())
        for name, p in model32.named_parameters():
            assert weights[name].dtype == torch.bfloat16 and torch.equal(weights[name], p.bfloat16()), name

    loss32, _ = validate(data_bin, ckpt, task_flags=task_flags)
    loss_bf16, proc = validate(data_bin, ckpt, task_flags=task_flags, extra=["--bf16"])
    assert loss_bf16 == loss32
    assert FLOAT32 in proc.stdout + proc.stderr
