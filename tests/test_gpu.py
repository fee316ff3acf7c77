"""What only a GPU can show (``pytest -m gpu``; skipped without CUDA).

* The architecture contract on CUDA for every variant of
  :data:`fairseq_ctx.architectures.VARIANTS`, at Base widths (two layers a
  side), in float32, float16 and bfloat16, with each attention backend
  forced in turn (flash, memory-efficient, cuDNN, math; math stays enabled
  as the fallback where a fused kernel does not take the inputs, e.g. flash
  with a padding mask): a sentence alone equals it in a padded batch, and
  incremental decoding equals the full forward (probabilities within the
  type's tolerance); beam search translates a sentence the same alone and
  in a batch (float32: in half precision near-ties of random weights may
  legitimately flip a hypothesis).
  The kernels that ran are recorded by the profiler
  (``fused_attention.recorded_kernels``, kept in each test's
  ``user_properties``, which ``tests/piece_results.py`` writes out) and
  checked: only the forced kernel and the math fallback ran, the
  memory-efficient kernel took every call (it takes masks and every
  dtype), and the forced kernel leads torch's priority order
  (``sdpa_kernel(..., set_priority=True)``: in torch's default order math
  comes before cuDNN, so a forced cuDNN would otherwise never run).
* fp32 training through the memory-efficient kernel alone (no fallback:
  a call it cannot take fails), per variant: its forward and backward
  kernels ran, the gradients equal the math kernel's, and three Adam steps
  lower the loss; the kernel's ``misaligned address`` crash came from
  fp32 and fp16 training at Base size.
* The SDPA policy in a fresh process, as fairseq-train starts: torch's
  first attention call on the GPU (where it installs its cuDNN-first order
  on sm90/sm100 unless its environment says not to) leaves
  ``cudnn-last``'s order in place and the default (``no-cudnn``) cuDNN's
  kernel off; torch's own order is recorded. Every test of this file runs
  after one such call (a module fixture), under the order torch settled
  and the policy the plugin applied when it registered (the default unless
  FAIRSEQ_CTX_SDPA says otherwise); the contract tests force their kernel
  in a scope of their own.
* Device syncs as torch's own detector sees them
  (``torch.cuda.set_sync_debug_mode``): a decoding step and the decoder's
  training forward of every variant synchronise no more often than the
  plain Transformer's (fairseq's own checks), its encoder's training
  forward at most ``ENCODER_READS`` more: what ``tests/test_contract.py``
  counts on the CPU with ``host_reads``, checked where syncs cost.
* ``fairseq-train`` (its own ``main``, through its command-line parser) 50
  updates with ``--fp16`` and with ``--bf16`` per variant, then
  ``fairseq-generate`` on the checkpoint translates every test sentence.

The file has not been timed on a GPU yet; the runbook's ``tests`` call
(``scripts/gpu-call.sh``) runs it with one JSON per test, so a call cut at
its time limit keeps what finished and the next call runs the rest. The CPU tests that
guard the same path (fused-kernel layouts, ``--bf16`` on a CUDA machine, no
device tensor to numpy) are in ``test_fused_attention_layout.py`` and
``test_gpu_path.py``; they run everywhere.
"""
import json
import math
import os
import subprocess
import sys

import pytest
import torch

from fairseq_ctx.architectures import VARIANTS
from fairseq_ctx.modules import fused_attention
from tests.test_contract import ORDER, STEPS, _batch, _decode, _encode, _encoder_attention_keys, _row
from tests.utils import REPO, USER_DIR, _cli_args, parse_generate, tiny_model

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

BASE_WIDTHS = ("--encoder-layers", "2", "--decoder-layers", "2",
               "--encoder-embed-dim", "512", "--decoder-embed-dim", "512", "--encoder-ffn-embed-dim", "2048",
               "--decoder-ffn-embed-dim", "2048", "--encoder-attention-heads", "8", "--decoder-attention-heads", "8")
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# largest |p - p'| between two computations of the same output probabilities
TOLERANCE = {"fp32": 1e-4, "fp16": 5e-3, "bf16": 3e-2}
# the kernels by the names the profiler's counts use (fused_attention.KERNEL_OPS)
BACKENDS = list(fused_attention._KERNELS)  # flash, efficient, cudnn, math
NAMES = [v.name for v in VARIANTS]
BY_NAME = {v.name: v for v in VARIANTS}

_MODELS = {}


@pytest.fixture(scope="module", autouse=True)
def torch_settled_its_order():
    """One SDPA call on the GPU before any test: torch installs its default
    priority order at its first call (cuDNN first on sm90/sm100 with a
    recent cuDNN), and ``sdpa_kernel(..., set_priority=True)`` puts back the
    order it found on entry, which before that call is the pre-default one:
    without this, whichever test ran first in a worker would decide the
    order every later test of that worker runs under."""
    x = torch.zeros(1, 1, 8, 8, device="cuda")
    torch.nn.functional.scaled_dot_product_attention(x, x, x)
    torch.cuda.synchronize()



def _model(name, dtype):
    """The variant at Base widths (two layers a side) as the contract builds
    it at tiny size (tests.utils.tiny_model: ctxsan's gates random), on CUDA."""
    key = (name, dtype)
    if key not in _MODELS:
        _MODELS[key] = tiny_model(name, dims=BASE_WIDTHS).to(device="cuda", dtype=DTYPES[dtype])
    return _MODELS[key]


def _backend(name):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    chosen = getattr(SDPBackend, fused_attention._KERNELS[name][1])
    # first in the priority order: in torch's default order math precedes cuDNN
    return sdpa_kernel([chosen, SDPBackend.MATH] if chosen != SDPBackend.MATH else [chosen], set_priority=True)


# the forward kernels the profiler names (fused_attention.KERNEL_OPS)
FORWARD_KERNELS = ("flash", "efficient", "cudnn", "math", "cpu_fused", "overrideable")


def _check_kernels(ran, backend):
    """Only the forced kernel and the math fallback ran, every SDPA call is
    accounted for, and the memory-efficient and math kernels took every call."""
    forward = {k: ran.get(k, 0) for k in FORWARD_KERNELS if ran.get(k, 0)}
    assert ran.get("calls", 0) > 0, ran
    assert sum(forward.values()) == ran["calls"], ran
    assert set(forward) <= {backend, "math"}, ran
    if backend in ("efficient", "math"):
        assert forward == {backend: ran["calls"]}, ran


def _cuda(batch):
    src, src_lengths, prev, tgt_lengths, kwargs = batch
    return src.cuda(), src_lengths.cuda(), prev.cuda(), tgt_lengths, {k: v.cuda() for k, v in kwargs.items()}


def _probs(logits):
    return torch.softmax(logits.float(), dim=-1)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name", NAMES)
def test_contract_on_cuda(name, dtype, backend, record_property):
    model = _model(name, dtype)
    pad = model.encoder.dictionary.pad()
    tol = TOLERANCE[dtype]
    with _backend(backend), torch.no_grad():
        # padding: each sentence alone equals it in the padded batch
        src, src_lengths, prev, tgt_lengths, kwargs = _cuda(_batch(model))
        with fused_attention.recorded_kernels() as ran:
            batched = _probs(model(src, src_lengths, prev, **kwargs)[0])
        record_property("kernels", dict(ran))
        _check_kernels(ran, backend)
        for i, n in enumerate(tgt_lengths):
            one, lengths, one_prev, ctx = _row(i, src, src_lengths, prev, n, kwargs, pad)
            alone = _probs(model(one, lengths, one_prev, **ctx)[0])
            assert float((batched[i, :n] - alone[0]).abs().max()) <= tol, f"sentence {i}"
        # incremental decoding = full forward, with a beam reorder half-way
        # (fairseq's encoder-attention caches are per sentence: dropped after
        # a reorder that mixes sentences, as test_contract explains)
        src, src_lengths, prev, tgt_lengths, kwargs = _cuda(_batch(model, seed=1))
        real = torch.arange(prev.size(1))[None, :] < torch.tensor(tgt_lengths)[:, None]  # B x T
        full = _probs(model(src, src_lengths, prev, **kwargs)[0]).cpu()
        enc = _encode(model, src, src_lengths, kwargs)
        state = {}
        steps = _probs(_decode(model, enc, prev, state, 0, STEPS)).cpu()
        first = real[:, :STEPS]
        assert float((steps[first] - full[:, :STEPS][first]).abs().max()) <= tol
        order = ORDER.cuda()
        model.decoder.reorder_incremental_state_scripting(state, order)
        enc = model.encoder.reorder_encoder_out(enc, order)
        for key in _encoder_attention_keys(model):
            state.pop(key, None)
        rest = _probs(_decode(model, enc, prev.index_select(0, order), state, STEPS, prev.size(1))).cpu()
        later = real[ORDER, STEPS:]
        assert float((rest[later] - full[ORDER, STEPS:][later]).abs().max()) <= tol
        if dtype == "fp32":
            _beam_alone_equals_batch(model)


def _beam_alone_equals_batch(model):
    from fairseq.sequence_generator import SequenceGenerator

    d = model.encoder.dictionary
    gen = SequenceGenerator([model], d, beam_size=2, max_len_b=8)
    src, src_lengths, _, _, kwargs = _cuda(_batch(model, seed=2))
    batched = gen.generate([model], {"net_input": {"src_tokens": src, "src_lengths": src_lengths, **kwargs}})
    for i in range(src.size(0)):
        one, lengths, _, ctx = _row(i, src, src_lengths, src, 1, kwargs, d.pad())
        alone = gen.generate([model], {"net_input": {"src_tokens": one, "src_lengths": lengths, **ctx}})[0][0]
        assert torch.equal(batched[i][0]["tokens"], alone["tokens"]), i
        assert math.isclose(float(batched[i][0]["score"]), float(alone["score"]), abs_tol=1e-4), i


@pytest.mark.parametrize("name", NAMES)
def test_fp32_training_through_the_memory_efficient_kernel(name, record_property):
    """Training in float32 with the memory-efficient kernel alone (no math
    fallback: a call it cannot take raises): its forward and backward ran for
    every call, the gradients are the math kernel's, and Adam steps train."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    model = tiny_model(name, dims=BASE_WIDTHS, random_constants=False).cuda().train()
    src, src_lengths, prev, tgt_lengths, kwargs = _cuda(_batch(model))
    real = (torch.arange(prev.size(1))[None, :] < torch.tensor(tgt_lengths)[:, None]).cuda()
    target = torch.roll(prev, -1, dims=1)  # any fixed tokens: the loss only has to reach every parameter

    def loss_and_grads(backend):
        model.zero_grad(set_to_none=True)
        with sdpa_kernel([backend]), fused_attention.recorded_kernels() as ran:
            logp = torch.log_softmax(model(src, src_lengths, prev, **kwargs)[0].float(), dim=-1)
            loss = -logp.gather(-1, target[..., None])[..., 0][real].mean()
            loss.backward()
        return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}, ran

    _, math_grads, _ = loss_and_grads(SDPBackend.MATH)
    loss, grads, ran = loss_and_grads(SDPBackend.EFFICIENT_ATTENTION)
    record_property("kernels", dict(ran))
    assert ran.get("efficient", 0) == ran.get("calls", -1) > 0 and not ran.get("math"), ran
    assert ran.get("efficient_backward", 0) > 0, ran
    assert grads.keys() == math_grads.keys()
    # against the largest gradient: some are zero in exact arithmetic (a key bias shifts every
    # score of a query alike) and only rounding noise in either kernel
    scale = max(float(g.abs().max()) for g in math_grads.values())
    worst = max(float((g - math_grads[pname]).abs().max()) for pname, g in grads.items())
    assert worst <= 1e-4 * scale, (worst, scale)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    losses = [float(loss)]
    for _ in range(3):
        optimizer.step()
        loss, _, _ = loss_and_grads(SDPBackend.EFFICIENT_ATTENTION)
        losses.append(float(loss))
    assert all(math.isfinite(x) for x in losses) and losses[-1] < losses[0], losses


# ---------------------------------------------------------------- the SDPA policy in a fresh process

_ORDER_AFTER_ONE_CALL = """
import json, torch
import fairseq_ctx
fairseq_ctx.register()  # applies FAIRSEQ_CTX_SDPA, as fairseq-train's --user-dir does
from fairseq_ctx.modules import fused_attention
before = fused_attention.sdpa_state()
x = torch.zeros(2, 4, 8, 64, device="cuda", dtype=torch.float16)
torch.nn.functional.scaled_dot_product_attention(x, x, x)  # torch settles its default order here
print(json.dumps({"before": before, "after": fused_attention.sdpa_state()}))
"""


@pytest.mark.parametrize("policy", ["torch", "cudnn-last", None], ids=["torch", "cudnn-last", "default"])
def test_policy_order_survives_torchs_first_call(policy, record_property):
    """In a fresh process, as a user's fairseq-train starts: the plugin
    applies the policy before any attention runs, and torch's first SDPA
    call on the GPU (where it installs its cuDNN-first order on sm90/sm100
    unless told not to) leaves ``cudnn-last``'s order in place, and the
    default (FAIRSEQ_CTX_SDPA unset: no-cudnn) keeps cuDNN's kernel off.
    ``torch``'s order is recorded, not checked: it is torch's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_CUDNN_SDPA", "FAIRSEQ_CTX_SDPA"))}
    env.update(PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]), **({"FAIRSEQ_CTX_SDPA": policy} if policy else {}))
    out = subprocess.run([sys.executable, "-c", _ORDER_AFTER_ONE_CALL], env=env, cwd=REPO, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    state = json.loads(out.stdout.strip().splitlines()[-1])
    record_property("sdpa_state", state)
    if policy == "cudnn-last":
        assert state["before"]["priority"][:4] == state["after"]["priority"][:4] == \
            ["flash", "efficient", "cudnn", "math"], state
    if policy is None:
        assert not state["before"]["cudnn"] and not state["after"]["cudnn"], state
        assert state["after"]["flash"] and state["after"]["efficient"], state


# ---------------------------------------------------------------- fairseq's commands on the GPU

SMALL = ("--encoder-layers", "2", "--decoder-layers", "2", "--encoder-embed-dim", "128",
         "--decoder-embed-dim", "128", "--encoder-ffn-embed-dim", "512", "--decoder-ffn-embed-dim", "512",
         "--encoder-attention-heads", "4", "--decoder-attention-heads", "4")


@pytest.mark.parametrize("precision", ["fp16", "bf16", "amp"])
@pytest.mark.parametrize("name", NAMES)
def test_train_then_generate_every_sentence(name, precision, doc_corpus, tmp_path):
    """50 updates through fairseq-train's parser and main (``--bf16`` must
    not turn into ``--tpu`` on a CUDA machine; ``--amp``: fairseq's
    AMPOptimizer around ours, ``adam_foreach``, whose gradients its scaler
    unscales; the forward under CUDA's autocast, float16 where its op lists
    say), then fairseq-generate (``--amp`` is training's only: float32)."""
    from fairseq import options
    from fairseq_cli import generate as fairseq_generate
    from fairseq_cli import train as fairseq_train

    variant = BY_NAME[name]
    data_bin = str(doc_corpus[1])
    cfg = _cli_args(options.get_training_parser(), [
        data_bin, "--user-dir", USER_DIR, "--arch", variant.arch, *SMALL, *variant.flags, *variant.task,
        f"--{precision}", "--optimizer", "adam_foreach" if precision == "amp" else "adam", "--lr", "0.001",
        "--lr-scheduler", "inverse_sqrt",
        "--warmup-updates", "10", "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
        "--max-tokens", "500", "--max-update", "50", "--save-dir", tmp_path / "ckpt", "--no-progress-bar",
        "--num-workers", "0", "--seed", "1", "--no-epoch-checkpoints", "--required-batch-size-multiple", "1",
        "--no-save-optimizer-state", "--disable-validation",
    ])
    assert not cfg.common.tpu and not cfg.common.cpu
    fairseq_train.main(cfg)
    cfg = _cli_args(options.get_generation_parser(), [
        data_bin, "--user-dir", USER_DIR, "--path", tmp_path / "ckpt" / "checkpoint_last.pt", "--gen-subset",
        "test", "--beam", "4", "--max-len-b", "20", "--batch-size", "8",
        *([f"--{precision}"] if precision != "amp" else []),
        "--required-batch-size-multiple", "1", "--results-path", tmp_path / "gen", *variant.task,
    ])
    fairseq_generate.main(cfg)
    hyps, srcs = parse_generate((tmp_path / "gen" / "generate-test.txt").read_text())
    assert sorted(hyps) == list(range(14)) == sorted(srcs)
    assert all(math.isfinite(score) for _, score in hyps.values())


# ---------------------------------------------------------------- context attribution on the GPU

@pytest.mark.parametrize("name", ["ctxenc", "concat"])
def test_attribution_on_cuda_equals_cpu(name, doc_corpus, trained_checkpoint):
    """fairseq_ctx.evaluation.attribution on CUDA gives the CPU's numbers
    (fp32): the sensitivity measures, gradient x input of every context and
    source token at the same sensitive positions, and the erasure drops."""
    import copy

    import numpy as np
    from fairseq import checkpoint_utils

    import fairseq_ctx
    from fairseq_ctx.evaluation.attribution import ContextAttributor, sensitive_positions
    from fairseq_ctx.evaluation.attribution_report import items_from_split
    from fairseq_ctx.evaluation.conditions import TRUE

    fairseq_ctx.register()
    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(trained_checkpoint(name))], arg_overrides={"data": str(doc_corpus[1])})
    items = items_from_split(task, "test", TRUE.rule(task.context_rule, 1), None)
    runs = {}
    for device, model in (("cpu", models[0]), ("cuda", copy.deepcopy(models[0]).cuda())):
        a = ContextAttributor(model, task, batch_size=4, aggregate="sum")
        sens = a.sensitivity(items)
        if device == "cpu":
            positions, _ = sensitive_positions([s["kl"] for s in sens], std=0.5)
            contrasts = [s["none_argmax"][p] for s, p in zip(sens, positions)]
        runs[device] = (sens, a.attribute(items, positions, contrasts), a.erasure(items, positions, contrasts))
    assert sum(len(p) for p in positions) > 0
    (s_cpu, a_cpu, e_cpu), (s_gpu, a_gpu, e_gpu) = runs["cpu"], runs["cuda"]
    for x, y in zip(s_cpu, s_gpu):
        for key in ("pcxmi", "kl"):
            np.testing.assert_allclose(x[key], y[key], atol=1e-4)

    def flat(rows):   # every source and context token's attribution, row after row
        return np.array([v for r in rows for v in [*r["source"], *(w for s in r["context"] for w in s)]
                         if v is not None], dtype=float)

    for x, y in zip(a_cpu, a_gpu):
        np.testing.assert_allclose([r["f"] for r in x], [r["f"] for r in y], atol=1e-4)
        np.testing.assert_allclose(flat(x), flat(y), rtol=1e-3, atol=1e-5)
    for x, y in zip(e_cpu, e_gpu):
        if x["full"] is not None:
            np.testing.assert_allclose(x["full"], y["full"], atol=1e-4)
            np.testing.assert_allclose([v for s in x["sentences"] for v in s],
                                       [v for s in y["sentences"] for v in s], atol=1e-4)


# ---------------------------------------------------------------- device syncs

def _syncs(run):
    """Where ``run()`` synchronised with the device, as torch's sync debug
    mode reports it (one warning per synchronizing call, at the Python
    line that made it)."""
    import warnings

    torch.cuda.synchronize()
    before = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run()
    finally:
        torch.cuda.set_sync_debug_mode(before)
    return [f"{os.path.relpath(w.filename, REPO)}:{w.lineno}" for w in caught
            if "synchronizing CUDA operation" in str(w.message)]


def _sync_counts(name):
    """Syncs of the encoder's and the decoder's training forwards and of two
    incremental decoding steps, on the contract's batch (float32, Base
    widths). Measured on the second of two runs: the first fills what a
    model caches on first use (fairseq's future mask, built on the host and
    copied once), which depends on what the worker ran before."""
    from tests.test_contract import _batch as contract_batch

    model = _model(name, "fp32")
    src, src_lengths, prev, _, kwargs = _cuda(contract_batch(model))

    def training_forwards():
        enc = [None]

        def encode():
            enc[0] = model.encoder(src, src_lengths, **kwargs)

        model.train()
        try:
            return {"encoder": _syncs(encode), "decoder": _syncs(lambda: model.decoder(prev, enc[0]))}
        finally:
            model.eval()

    def steps():
        with torch.no_grad():
            enc = model.encoder(src, src_lengths, **kwargs)
            state = {}
            model.decoder(prev[:, :1], enc, incremental_state=state)
            return _syncs(lambda: [model.decoder(prev[:, :t + 1], enc, incremental_state=state) for t in (1, 2)])

    training_forwards(), steps()
    return {**training_forwards(), "step": steps()}


@pytest.mark.parametrize("name", [n for n in NAMES if n != "transformer"])
def test_no_more_device_syncs_than_the_baseline(name, record_property):
    """torch's sync detector on CUDA: the variant's decoding steps and
    decoder training forward synchronise no more often than the plain
    Transformer's, its encoder's training forward at most ENCODER_READS
    more (the context encoder's one transfer of what its shapes depend on)."""
    from tests.test_contract import ENCODER_READS

    # the detector reports (else every count below would be zero)
    assert _syncs(lambda: torch.ones(1, device="cuda").item())
    base, ours = _sync_counts("transformer"), _sync_counts(name)
    assert base["decoder"] and base["step"]  # fairseq's decoder checks its input for padding
    record_property("syncs", json.dumps({"transformer": base, name: ours}))
    allowed = ENCODER_READS.get(BY_NAME[name].arch, 0)
    assert len(ours["encoder"]) <= len(base["encoder"]) + allowed, (ours["encoder"], base["encoder"])
    assert len(ours["decoder"]) <= len(base["decoder"]), (ours["decoder"], base["decoder"])
    assert len(ours["step"]) <= len(base["step"]), (ours["step"], base["step"])


# ---------------------------------------------------------------- glued interactive batches

def test_split_concatenated_returns_the_batch_on_its_device():
    """fairseq-interactive's glued batches of a separate-context model
    (context <sep> source, left-padded) and a 2-to-2 model's glued targets
    (right-padded) are split on the host and come back on the batch's
    device, equal to the split of the same batch on the CPU."""
    from fairseq_ctx.data.token_layout import split_concatenated

    pad, eos, sep = 1, 2, 5
    sources = torch.tensor([[1, 1, 7, 8, 5, 9, 2], [7, 5, 8, 5, 9, 10, 2], [1, 1, 1, 1, 9, 10, 2]])
    targets = torch.tensor([[7, 5, 9, 2, 1, 1], [7, 8, 5, 9, 10, 2], [9, 10, 2, 1, 1, 1]])
    for batch, left_pad in ((sources, True), (targets, False)):
        cpu = split_concatenated(batch, pad, eos, sep, left_pad=left_pad)
        cuda = split_concatenated(batch.cuda(), pad, eos, sep, left_pad=left_pad)
        for a, b in zip(cpu, cuda):
            assert b.device.type == "cuda" and torch.equal(a, b.cpu())
