#!/usr/bin/env python3
"""Mixed-precision health check: train every architecture with
fairseq's ``--fp16`` and ``--bf16`` and show that it neither diverges nor
loops on overflow, and that every module's output stays finite.

The variants are those of ``fairseq_ctx/architectures.py`` (``--variants
NAME ...`` picks some; default: all). For each variant and precision this runs a real ``fairseq-train`` for
``--updates`` updates and then, on the resulting checkpoint:

* parses the training log: the last training loss (must be finite), the
  number of "gradient overflow detected" skips (fp16's dynamic loss scaling
  skips a few early on; a loop of them is a failure, and fairseq itself stops
  with "Minimum loss scale reached"), and the final loss scale;
* loads the checkpoint in the training precision and runs ``--check-batches``
  validation batches through the model with a forward hook on every module,
  reporting the first module whose output holds NaN or inf (gates, routing,
  convolutions, context attention included).

``--precision fp32`` runs the same path in full precision, which is what the
CPU tests do (fairseq's ``--fp16`` needs CUDA; its ``--bf16`` without CUDA
takes the TPU path). Example on a GPU::

    python3 scripts/precision_check.py data/bible/bin --precision fp16 bf16 --updates 200 \\
        --json benchmarks/precision-h100.json

Prints a table and exits non-zero if any run failed.

Checkpoint mode (``--path CKPT``, any device, CPU included): no training.
The trained model is loaded in float32 and, for each ``--precision``, a copy
cast to that dtype runs the same ``--check-batches`` batches of
``--gen-subset`` (spread over the length-sorted batches, the longest
included):

* forward (teacher-forced): every module's output finite, else the first
  module (in execution order) whose output is not; the target NLL and the
  largest difference of any output probability from float32;
* backward of the float32 NLL: every gradient finite, else the module
  nearest the loss whose output gradient is not (the first one backward
  reaches); cosine of the whole gradient with float32's;
* incremental decoding (step by step, as beam search runs the decoder):
  finite, and the largest probability difference from the full pass in the
  same dtype (running sums, caches) and from float32.

A run fails on anything non-finite or on a difference above ``--max-prob-diff``
(per dtype, default 0.05 for fp16 and 0.25 for bf16: see ``PROB_TOLERANCE``).
For a user whose ``--fp16`` run diverges::

    python3 scripts/precision_check.py DATA-BIN --path CKPT --device cpu --precision fp16 bf16

With ``--lengths 1 50 150 250`` checkpoint mode also runs one batch of those
lengths cut from the running text of ``--gen-subset`` (consecutive sentences
glued, contexts the text before), longer than any sentence of a corpus like
the Bible, decoded step by step over ``--inc-steps`` positions.

Hunt mode (``--hunt``, CPU, no data): every variant of the precision matrix
(:func:`hunt_cases`) built at Base and/or Big dimensions at initialisation,
each precision against float32 on one batch of sources, targets and contexts
of ``--lengths`` (:func:`hunt_sample`), with the same comparison as checkpoint
mode (forward, backward, step-by-step decoding where the decoder keeps state
of its own); one line per case, size and precision, the first non-finite
module named, and the largest module output in float32 (float16 ends at
65504). Tolerances: ``HUNT_TOLERANCE``. The 2026-11-23 run::

    OMP_NUM_THREADS=1 python3 scripts/precision_check.py --hunt --size base big \
        --json benchmarks/precision-hunt/hunt-2026-11-23.json
"""
import argparse
import copy
import dataclasses
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
USER_DIR = os.path.join(REPO, "fairseq_ctx")
if REPO not in sys.path:  # this checkout's list, whether or not the package is installed
    sys.path.insert(0, REPO)
from fairseq_ctx import architectures  # noqa: E402  (torch-free: --help stays fast)

SMALL = ["--encoder-layers", "3", "--decoder-layers", "3", "--encoder-embed-dim", "256",
         "--decoder-embed-dim", "256", "--encoder-ffn-embed-dim", "1024", "--decoder-ffn-embed-dim", "1024",
         "--encoder-attention-heads", "4", "--decoder-attention-heads", "4"]
PRECISION_FLAGS = {"fp32": [], "fp16": ["--fp16"], "bf16": ["--bf16"]}
# Largest tolerated |p_half - p_fp32| over all output probabilities. Unit
# roundoff is 2^-11 (fp16) and 2^-8 (bf16). Measured at initialisation (Base,
# 250-token inputs, tests/test_precision.py): fairseq's Transformer 4.3e-4 /
# 3.8e-3, every architecture here at most 4.2e-3 (bf16). Trained models have
# peakier distributions, so the defaults are wider: on the study's trained
# checkpoints (d = 128, Bible corpus, 2026-11-23; benchmarks/precision-cpu-
# trained and precision-hunt) the largest differences, full pass or step by
# step, were 8.3e-3 (fp16) and 5.9e-2 (bf16), 6x and 4x below them (pass
# --max-prob-diff to tighten them).
PROB_TOLERANCE = {"fp32": 1e-4, "fp16": 0.05, "bf16": 0.25}


def train(opts, arch, flags, precision, save_dir):
    cmd = [sys.executable, "-m", "fairseq_cli.train", opts.data, "--user-dir", USER_DIR, "--arch", arch,
           *(SMALL if opts.size == "small" else []), *flags, *PRECISION_FLAGS[precision],
           "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--lr", str(opts.lr),
           "--lr-scheduler", "inverse_sqrt", "--warmup-updates", str(max(1, opts.updates // 4)),
           "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
           "--max-tokens", str(opts.max_tokens), "--max-update", str(opts.updates),
           "--required-batch-size-multiple", "1", "--num-workers", "0", "--seed", "1",
           "--save-dir", save_dir, "--no-epoch-checkpoints", "--disable-validation",
           "--log-format", "simple", "--log-interval", "1", *opts.extra]
    if opts.device == "cpu":
        cmd.append("--cpu")
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    return proc.returncode, proc.stdout + proc.stderr


def parse_log(log):
    losses = [float(x) for x in re.findall(r"\| loss ([-0-9.naif]+) \|", log)]
    scales = [float(x) for x in re.findall(r"loss_scale ([0-9.e+-]+)", log)]
    return {
        "last_loss": losses[-1] if losses else None,
        "overflow_skips": len(re.findall(r"gradient overflow detected", log)),
        "final_loss_scale": scales[-1] if scales else None,
        "min_scale_reached": "Minimum loss scale reached" in log,
    }


def check_modules(opts, checkpoint, precision, task_flags):
    """Run validation batches with a forward hook on every module; return the
    name of the first module with a non-finite output (or None) and the count
    of batches checked."""
    import torch
    from fairseq import checkpoint_utils, utils

    utils.import_user_module(argparse.Namespace(user_dir=USER_DIR))  # also allow-lists checkpoint classes
    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    overrides = {"data": opts.data}
    if task_flags:
        overrides.update(task="document_translation", context_size=1)
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([checkpoint], arg_overrides=overrides)
    model = models[0].to(device=opts.device, dtype=dtype).eval()
    bad = []

    def hook(module, inputs, output, name=None):
        for t in (output if isinstance(output, (tuple, list)) else [output]):
            if torch.is_tensor(t) and t.is_floating_point() and not torch.isfinite(t).all() and not bad:
                bad.append(name)

    for name, module in model.named_modules():
        module.register_forward_hook(lambda m, i, o, name=name or "model": hook(m, i, o, name))
    task.load_dataset("valid")
    itr = task.get_batch_iterator(dataset=task.dataset("valid"), max_tokens=opts.max_tokens,
                                  required_batch_size_multiple=1).next_epoch_itr(shuffle=False)
    checked = 0
    with torch.no_grad():
        for sample in itr:
            if checked >= opts.check_batches:
                break
            sample = utils.move_to_cuda(sample) if opts.device == "cuda" else sample
            model(**sample["net_input"])
            checked += 1
    return (bad[0] if bad else None), checked


DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def _tensors(obj):
    """Every tensor in a module output (tensors, and lists, tuples and dicts of them)."""
    import torch

    if torch.is_tensor(obj):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors(o)


class NonFiniteWatch(object):
    """Forward hooks on every module of ``model``: ``forward`` is the first
    module (in the order outputs are produced, so the innermost culprit before
    its parents) whose floating-point output holds NaN or inf; with
    ``watch_grads`` also ``backward``, the first module whose output gradient
    is not finite (the one nearest the loss, as backward reaches them)."""

    def __init__(self, model, watch_grads=False, track_max=False):
        self.forward = None
        self.backward = None
        self.watch_grads = watch_grads
        # with track_max: the largest finite |value| of any module's output
        # and that module (float16's range ends at 65504)
        self.track_max = track_max
        self.max_abs = 0.0
        self.max_abs_module = None
        self.handles = [m.register_forward_hook(self._hook(name or "model")) for name, m in model.named_modules()]

    def _hook(self, name):
        import torch

        def hook(module, inputs, output):
            for t in _tensors(output):
                if not t.is_floating_point():
                    continue
                if self.forward is None and not bool(torch.isfinite(t).all()):
                    self.forward = name
                if self.track_max and t.numel():
                    m = float(t.detach().abs().amax())
                    if math.isfinite(m) and m > self.max_abs:
                        self.max_abs, self.max_abs_module = m, name
                if self.watch_grads and t.requires_grad:
                    t.register_hook(self._grad_hook(name))
        return hook

    def _grad_hook(self, name):
        import torch

        def hook(grad):
            if self.backward is None and not bool(torch.isfinite(grad).all()):
                self.backward = name
        return hook

    def close(self):
        for h in self.handles:
            h.remove()


def _max_prob_diff(lp_a, lp_b, keep):
    """Largest |p_a - p_b| over the vocabulary at the kept (non-padding)
    target positions; lp_*: B x T x V float32 log-probabilities, keep: B x T."""
    return float((lp_a.exp() - lp_b.exp()).abs()[keep].max()) if bool(keep.any()) else 0.0


def _cosine(a, b, chunk=1 << 20):
    """Cosine of two flat float32 tensors, accumulated in float64 chunk by
    chunk (a float64 copy of a Big model's gradient would be gigabytes)."""
    dot = na = nb = 0.0
    for i in range(0, a.numel(), chunk):
        x, y = a[i:i + chunk].double(), b[i:i + chunk].double()
        dot, na, nb = dot + float(x @ y), na + float(x @ x), nb + float(y @ y)
    return dot / max(math.sqrt(na * nb), 1e-300)


# The matrix products whose half-precision CPU kernels are reference loops
# (no AVX-512 FP16/BF16 GEMM on this kind of CPU: a 512 x 512 x 2048 product
# takes 2.2 s in float16 or bfloat16 against 0.02 s in float32 on one core).
_GEMMS = ("mm", "addmm", "bmm", "baddbmm")


def half_gemms_through_float32():
    """A dispatch mode under which a CPU matrix product of float16/bfloat16
    tensors is computed by the float32 kernel on its inputs (exact in
    float32) and rounded once to the inputs' dtype: what the half GEMMs of
    CPU (ATen's reference kernel, oneDNN) and of CUDA (cuBLAS, float32
    accumulation) compute, up to the order of the sum (on random 64 x 512 x
    256 inputs 0.2% of float16 outputs and 0.01% of bfloat16 ones differ, by
    at most 2.5 units in the last place). Everything else (softmax, norms,
    masks, gates, running sums, the products' inputs and outputs) stays in
    the half dtype, so what this check looks for (a module whose half output
    overflows or loses precision) is untouched; forward, backward and
    step-by-step decoding all go through it."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    aten = torch.ops.aten
    gemms = {getattr(aten, name).default for name in _GEMMS}
    half = (torch.float16, torch.bfloat16)

    class HalfGemmsThroughFloat32(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            if func in gemms and tensors and all(t.dtype in half and t.device.type == "cpu" for t in tensors):
                dtype = tensors[0].dtype
                wide = [a.float() if isinstance(a, torch.Tensor) else a for a in args]
                return func(*wide, **kwargs).to(dtype)
            return func(*args, **kwargs)

    return HalfGemmsThroughFloat32()


def run_precision(model, sample, incremental=True, inc_steps=None, track_max=False):
    """One model in its own dtype on one batch. Returns a dict with the
    float32 log-probabilities of the full forward (B x T x V), the target NLL,
    the flat float32 gradient, the incremental log-probabilities (of the
    first ``inc_steps`` target positions; all when None) and the first
    non-finite module of forward / backward / incremental decoding; with
    ``track_max`` also the largest |output| of any module in the forward
    pass and that module. On CPU a float16/bfloat16 model's matrix products
    go through :func:`half_gemms_through_float32` (the CPU's own half GEMM
    is a reference loop, about 100x slower than float32's)."""
    import torch

    first = next(model.parameters())
    if first.device.type == "cpu" and first.dtype in (torch.float16, torch.bfloat16):
        with half_gemms_through_float32():
            return _run_precision(model, sample, incremental, inc_steps, track_max)
    return _run_precision(model, sample, incremental, inc_steps, track_max)


def _run_precision(model, sample, incremental, inc_steps, track_max):
    import torch

    net_input, target = sample["net_input"], sample["target"]
    pad = model.decoder.dictionary.pad()
    keep = target.ne(pad)
    for m in model.modules():  # eval: no dropout, so every dtype computes the same function
        m.train(False)
    model.zero_grad(set_to_none=True)
    watch = NonFiniteWatch(model, watch_grads=True, track_max=track_max)
    try:
        with torch.enable_grad():
            out = model(**net_input)
            lprobs = model.get_normalized_probs(out, log_probs=True).float()  # B x T x V
            nll = -lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1)[keep].mean()
            fwd_bad = watch.forward
            nll.backward()
    finally:
        watch.close()
    grads = [p.grad.float().flatten() if p.grad is not None else torch.zeros(p.numel())
             for p in model.parameters() if p.requires_grad]
    bad_params = [n for n, p in model.named_parameters() if p.grad is not None and not torch.isfinite(p.grad).all()]
    model.zero_grad(set_to_none=True)
    res = {"lprobs": lprobs.detach(), "nll": float(nll.detach()), "grad": torch.cat(grads), "keep": keep,
           "forward_nonfinite": fwd_bad, "backward_nonfinite": watch.backward,
           "nonfinite_grads": bad_params, "inc_lprobs": None, "incremental_nonfinite": None,
           "max_abs": watch.max_abs, "max_abs_module": watch.max_abs_module}
    if incremental:
        prev = net_input["prev_output_tokens"]
        if inc_steps is not None:
            prev = prev[:, :inc_steps]
        watch = NonFiniteWatch(model)
        try:
            with torch.no_grad():
                enc_input = {k: v for k, v in net_input.items() if k != "prev_output_tokens"}
                enc = model.encoder.forward_torchscript(enc_input)
                state = {}
                steps = [model.get_normalized_probs(
                    model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=state), log_probs=True)
                    .float() for t in range(prev.size(1))]
        finally:
            watch.close()
        res["inc_lprobs"] = torch.cat(steps, dim=1)
        res["incremental_nonfinite"] = watch.forward
    return res


def compare_precisions(model, sample, precisions, incremental=True, tolerance=None, inc_steps=None):
    """Run ``model`` (float32) and a copy cast to each of ``precisions`` on
    ``sample``; returns one row per precision (see the module docstring).
    ``inc_steps``: decode only the first that many target positions step by
    step (compared with the same positions of the full pass); None: all."""
    import torch

    tolerance = {**PROB_TOLERANCE, **(tolerance or {})}
    model = model.float()
    # step-by-step output is compared with the full pass
    ref = run_precision(model, sample, incremental=False, track_max=True)
    keep = ref["keep"]
    inc_keep = keep if inc_steps is None else keep[:, :inc_steps]
    rows = []
    for precision in precisions:
        dtype = getattr(torch, DTYPES[precision])
        half = model if precision == "fp32" else copy.deepcopy(model).to(dtype)
        r = run_precision(half, sample, incremental, inc_steps)
        finite = bool(torch.isfinite(r["lprobs"][keep]).all()) and math.isfinite(r["nll"])
        g, g_ref = r["grad"], ref["grad"]
        row = {
            "precision": precision,
            "forward_nonfinite": r["forward_nonfinite"],
            "backward_nonfinite": r["backward_nonfinite"],
            "nonfinite_grads": r["nonfinite_grads"][:5],
            "nll": r["nll"], "nll_fp32": ref["nll"],
            "max_prob_diff": _max_prob_diff(r["lprobs"], ref["lprobs"], keep) if finite else math.inf,
            "grad_cosine": _cosine(g, g_ref)
            if bool(torch.isfinite(g).all()) else math.nan,
            "max_abs_fp32": ref["max_abs"], "max_abs_module": ref["max_abs_module"],
        }
        if incremental:
            inc, n = r["inc_lprobs"], r["inc_lprobs"].size(1)
            inc_finite = bool(torch.isfinite(inc[inc_keep]).all())
            row["incremental_nonfinite"] = r["incremental_nonfinite"] or (None if inc_finite else "decoder")
            row["inc_steps"] = n
            row["inc_vs_full"] = _max_prob_diff(inc, r["lprobs"][:, :n], inc_keep) if inc_finite else math.inf
            row["inc_vs_fp32"] = _max_prob_diff(inc, ref["lprobs"][:, :n], inc_keep) if inc_finite else math.inf
        tol = tolerance[precision]
        row["ok"] = (finite and row["forward_nonfinite"] is None and not row["nonfinite_grads"]
                     and row["backward_nonfinite"] is None
                     and row["max_prob_diff"] <= tol
                     and (not incremental or (row["incremental_nonfinite"] is None
                                              and row["inc_vs_full"] <= tol and row["inc_vs_fp32"] <= tol)))
        rows.append(row)
        del half
    return rows


def pick_batches(task, subset, max_tokens, count):
    """``count`` batches of ``subset`` spread evenly over fairseq's
    length-sorted batch order (the first and the longest included)."""
    task.load_dataset(subset)
    dataset = task.dataset(subset)
    itr = task.get_batch_iterator(dataset=dataset, max_tokens=max_tokens, required_batch_size_multiple=1,
                                  max_positions=None, ignore_invalid_inputs=False)
    batches = list(itr.frozen_batches)
    if not batches:
        raise SystemExit(f"fairseq_ctx: error: --gen-subset {subset} of {task.cfg.data} is empty")
    count = min(count, len(batches))
    picks = sorted({round(i * (len(batches) - 1) / max(1, count - 1)) for i in range(count)})
    return [dataset.collater([dataset[i] for i in batches[b]]) for b in picks]


def running_text(task, subset):
    """The running text of ``subset``: its sentences in corpus (document)
    order, each without its </s>, as (source tokens, target tokens, source
    sentence starts, target sentence starts), 1-D tensors."""
    import torch
    from fairseq.data import data_utils

    src, tgt = task.cfg.source_lang, task.cfg.target_lang
    streams, starts = [], []
    for lang, dictionary in ((src, task.src_dict), (tgt, task.tgt_dict)):
        path = os.path.join(task.cfg.data.split(os.pathsep)[0], f"{subset}.{src}-{tgt}.{lang}")
        ds = data_utils.load_indexed_dataset(path, dictionary)
        if ds is None:
            raise SystemExit(f"fairseq_ctx: error: no {path}.bin / .idx for --lengths")
        sents = [ds[i][:-1] if int(ds[i][-1]) == dictionary.eos() else ds[i] for i in range(len(ds))]
        streams.append(torch.cat(sents).long())
        starts.append(torch.tensor([0] + [len(t) for t in sents[:-1]]).cumsum(0))
    return (*streams, *starts)


def check_checkpoint(opts):
    """Checkpoint mode: every ``--precision`` against float32 on the picked
    batches (and with ``--lengths`` one batch of running text of those
    lengths: consecutive sentences glued, see :func:`hunt_sample`); prints
    one line per batch and precision, returns the rows."""
    import torch
    from fairseq import checkpoint_utils, utils

    utils.import_user_module(argparse.Namespace(user_dir=USER_DIR))  # also allow-lists checkpoint classes
    if not os.path.isfile(opts.path):
        raise SystemExit(f"fairseq_ctx: error: --path {opts.path}: no such checkpoint")
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([opts.path], arg_overrides={"data": opts.data})
    model = models[0].float().to(opts.device)
    tolerance = dict(zip(opts.precision, opts.max_prob_diff)) if opts.max_prob_diff else None
    rows = []
    samples = pick_batches(task, opts.gen_subset, opts.max_tokens, opts.check_batches)
    if opts.lengths:
        kind = ("concat" if getattr(task.cfg, "concat_context", False)
                else "context" if getattr(model, "accepts_context", False) else "plain")
        samples.append(hunt_sample(task.src_dict, kind, opts.lengths, text=running_text(task, opts.gen_subset)))
    for b, sample in enumerate(samples):
        if opts.device == "cuda":
            sample = utils.move_to_cuda(sample)
        src_len = int(sample["net_input"]["src_tokens"].size(1))
        tgt_len = int(sample["target"].size(1))
        for row in compare_precisions(model, sample, opts.precision, not opts.no_incremental, tolerance,
                                      inc_steps=opts.inc_steps if opts.lengths and b == len(samples) - 1 else None):
            row.update(batch=b, sentences=int(sample["target"].size(0)), src_len=src_len, tgt_len=tgt_len)
            if opts.lengths and b == len(samples) - 1:
                row["running_text_lengths"] = list(opts.lengths)
            rows.append(row)
            where = [f"{k}: {row[k]}" for k in ("forward_nonfinite", "backward_nonfinite", "incremental_nonfinite")
                     if row.get(k)]
            print(f"batch {b:<3} src {src_len:<4} tgt {tgt_len:<4} {row['precision']:<5} "
                  f"{'ok' if row['ok'] else 'FAILED':<7} max|dp| {row['max_prob_diff']:.2e}  "
                  f"nll {row['nll']:.4f} (fp32 {row['nll_fp32']:.4f})  grad cos {row['grad_cosine']:.5f}"
                  + (f"  incremental max|dp| {row['inc_vs_full']:.2e} vs full, {row['inc_vs_fp32']:.2e} vs fp32"
                     if "inc_vs_full" in row else "")
                  + f"  max|out| fp32 {row['max_abs_fp32']:.3g} ({row['max_abs_module']})"
                  + (f"  NON-FINITE {'; '.join(where)}" if where else ""), flush=True)
    return rows


# ---------------------------------------------------------------------------
# Hunt mode (--hunt): every variant of the precision matrix at the papers'
# dimensions and sentence lengths, at initialisation, on CPU.
# ---------------------------------------------------------------------------
HUNT_SIZES = {"base": (512, 2048, 8), "big": (1024, 4096, 16)}  # d, ffn, heads (Vaswani et al. Table 3)
HUNT_LENGTHS = (1, 50, 150, 250)
# Largest tolerated |p_half - p_fp32| in the hunt (40-word vocabulary, so
# probabilities are large enough for a logit error to show): 5 unit
# roundoffs, 5 * 2^-11 (fp16) and 5 * 2^-8 (bf16). Measured at
# initialisation on hunt_sample (2026-11-23, benchmarks/precision-hunt/):
# fairseq's own Transformer gives about one unit roundoff at both sizes
# (Base 4.9e-4 / 3.9e-3, Big 3.8e-4 / 3.0e-3); our architectures at most
# 2.5 (GRET, bfloat16: the same largest logit error as a two-layer
# Transformer's, 0.036 against 0.032, on a peakier output distribution). A
# case fails when it loses a few roundings more than fairseq's own
# Transformer; NaN, inf or a drifting sum (the bugs once found: 0.37 in
# bfloat16, 95 unit roundoffs) by far.
HUNT_TOLERANCE = {"fp16": 5 * 2.0 ** -11, "bf16": 5 * 2.0 ** -8}
# Cosine of the half-precision gradient with float32's: measured >= 0.9997
# at initialisation (the NLL of random targets has large gradients, so
# nothing underflows there); 0.999 is a direction off by 2.6 degrees.
HUNT_MIN_GRAD_COSINE = 0.999


@dataclasses.dataclass(frozen=True)
class HuntCase:
    """One row of the hunt matrix: ``arch`` built with ``flags`` at a hunt
    size; ``kind`` of input ("plain", "concat": context + separator + source
    as one source, "context": separate ctx_tokens for the document task);
    ``decoder_state``: the decoder keeps state of its own between steps
    (checked step by step); ``layers`` per side; ``sizes``: the hunt sizes
    it is built at."""

    name: str
    arch: str
    flags: tuple = ()
    kind: str = "plain"
    decoder_state: bool = False
    layers: int = 1
    sizes: tuple = tuple(HUNT_SIZES)


def hunt_cases():
    """The hunt's matrix, built from fairseq_ctx/architectures.py
    (the baselines and ctxenc from ``VARIANTS``, the rest from the option
    grid, :func:`fairseq_ctx.architectures.option_grid`):

    * fairseq's Transformer (the reference every tolerance is measured on) and
      the concatenation baseline (the same model on context + source);
    * ctxsan: every --ctxsan-context on every --ctxsan-side (the grid's
      settings that contextualise both query and key: the query-only and
      key-only ones mix a subset of the same projections), two layers per
      side (layer 1 has no deep context; layer 2 has deep-global of 2d and
      deep of d); not footnote 1's ungated ablation, whose attention module
      tests/test_precision.py checks in half precision on each side;
    * DC: every setting of the grid, Enc-DC, Dec-DC and Full-DC with each
      --dc-kernel-size of ``DC_KERNEL_SIZES`` (2, the paper's; 3, an odd
      window, asymmetric when centred; 8);
    * GRET: the full model and each single ablation of Table 3 with both
      --gret-routing-softmax modes (no-capsule has no routing: once), the
      default number of capsules (the grid's settings with at most one
      ablation), two encoder layers (the GRU aggregates more than one layer);
    * ctxenc with the document task (ctx_tokens), two encoder layers (one
      shared, one gated);
    * any other architecture with an option grid: each model of its grid,
      two layers per side, with ctx_tokens where it runs under the document
      task;
    * depth: ctxsan with both contexts on both sides at six layers, where the
      deep contexts of the top layers span 5 and 6 layers' states (Base only).

    One or two layers suffice elsewhere: in post-norm stacks every layer's
    output is layer-normalised, so magnitudes at initialisation do not grow
    with depth; what grows is sums over positions, i.e. lengths."""
    by, grid = architectures.BY_NAME, architectures.option_grid

    def case(v, kind="plain", **kw):
        return HuntCase(v.name, v.arch, v.flags, kind, decoder_state=v.decoder_state, **kw)

    cases = [case(by["transformer"]), case(by["concat"], "concat")]
    cases += [case(v, layers=2) for v in grid("transformer_ctxsan")
              if v.settings["ctxsan_contextualize"] == "both" and not v.settings["ctxsan_no_gate"]]
    cases += [case(v) for v in grid("transformer_dc")]
    cases += [case(v, layers=2) for v in grid("transformer_gret")
              if v.settings["gret_capsules"] == architectures.GRET_DEFAULT_CAPSULES
              and sum(v.settings[a] for a in architectures.GRET_ABLATIONS) <= 1]
    cases.append(case(by["ctxenc"], "context", layers=2))
    # any other architecture with an option grid: every model of its grid
    # (settings that differ in task flags only build the same model), two layers
    chosen = {"transformer_ctxsan", "transformer_dc", "transformer_gret", "transformer_ctxenc"}
    for arch in architectures.grid_archs():
        if arch not in chosen:
            models = {}
            for v in grid(arch):
                models.setdefault(v.flags, v)
            cases += [case(v, "context" if v.task else "plain", layers=2) for v in models.values()]
    # depth: the deep contexts of layer l concatenate l (deep-global) and l - 1
    # (deep) layers' states; six layers, the papers' depth, check their
    # projections. Base only: at Big size their 2 (2l - 1) d^2 parameters per
    # layer make a 320M-parameter model; the first run built it and was killed
    # at 20 GB (with float64 copies of the gradients, since removed), and it
    # was not tried again beside the jobs sharing that machine.
    deepest = architectures.variant("ctxsan_deep-global+deep_both")
    cases.append(dataclasses.replace(case(deepest, layers=6, sizes=("base",)), name=deepest.name + "_6layers"))
    return cases


def hunt_dims(size, layers):
    """Model flags of a hunt size with ``layers`` layers per side."""
    d, ffn, heads = HUNT_SIZES[size]
    out = []
    for side in ("encoder", "decoder"):
        out += [f"--{side}-layers", str(layers), f"--{side}-embed-dim", str(d),
                f"--{side}-ffn-embed-dim", str(ffn), f"--{side}-attention-heads", str(heads)]
    return out


def hunt_dictionary(n=40):
    """Source and target dictionary of the hunt: n words besides fairseq's
    specials (a small vocabulary gives probabilities of ~1/n, where logit
    errors show in the probability differences)."""
    from fairseq.data import Dictionary

    d = Dictionary()
    for i in range(n):
        d.add_symbol(f"w{i}")
    return d


def build_hunt_model(arch, flags, dictionary):
    """``arch`` built from command-line model flags as fairseq-train builds
    it, in float32, with ``dictionary`` on both sides."""
    from fairseq import options
    from fairseq.models import ARCH_MODEL_REGISTRY
    from fairseq.tasks.translation import TranslationTask

    import fairseq_ctx

    fairseq_ctx.register()
    args = options.parse_args_and_arch(options.get_training_parser(), ["/nonexistent", "--arch", arch, *flags])
    return ARCH_MODEL_REGISTRY[args.arch].build_model(args, TranslationTask(args, dictionary, dictionary))


def hunt_sample(dictionary, kind, lengths=HUNT_LENGTHS, seed=0, text=None):
    """One batch with a row per length: sources of ``lengths`` (left-padded),
    targets of the same lengths in reverse order (right-padded, so the
    longest source meets the shortest target and every row has padding
    somewhere), and for "context" contexts of the lengths rotated by one
    (left-padded; B x max(lengths)); "concat" glues each row's context, a
    separator and its source into one source, up to 2 * max + 1 tokens.
    Each sequence ends in </s>. Random words, or with ``text`` = (source
    stream, target stream, sentence starts in each) (running text as 1-D
    token tensors, no </s>; see :func:`running_text`) slices of it: row i
    starts at the i-th of ``len(lengths)`` evenly spaced sentences, its
    source there in the source stream, its target at the same sentence in
    the target stream (a translation, cut to its length), its context the
    source text just before."""
    import torch

    d = dictionary
    g = torch.Generator().manual_seed(seed)
    n = len(lengths)
    longest = max(lengths)
    if text is not None and min(len(t) for t in text[:2]) < 6 * longest:
        raise ValueError(f"the running text ({min(len(t) for t in text[:2])} tokens) is too short for "
                         f"{n} rows of up to {longest} tokens")
    starts = None
    if text is not None:
        # sentences with room for a context (and a concatenated one) before and a row after
        src_text, tgt_text, src_starts, tgt_starts = text
        room = [j for j in range(len(src_starts)) if src_starts[j] > 2 * longest + 1
                and src_starts[j] + longest < len(src_text) and tgt_starts[j] + longest < len(tgt_text)]
        picks = [room[i * (len(room) - 1) // max(1, n - 1)] for i in range(n)]
        starts = {"src": [int(src_starts[j]) for j in picks], "tgt": [int(tgt_starts[j]) for j in picks]}

    def tokens(lens, left_pad, side=None, shifts=None):
        """B x max(lens); with running text, row i is the slice of ``lens[i] - 1``
        tokens of ``side`` ("src", "tgt") starting ``shifts[i]`` after row
        i's sentence start, then </s>."""
        out = torch.full((n, max(lens)), d.pad())
        for i, m in enumerate(lens):
            if starts is None:
                row = torch.randint(d.nspecial, len(d), (m,), generator=g)
            else:
                stream = text[0] if side == "src" else text[1]
                at = starts[side][i] + (shifts[i] if shifts else 0)
                row = torch.cat([stream[at:at + m - 1], torch.full((1,), d.eos(), dtype=stream.dtype)])
            row[-1] = d.eos()
            if left_pad:
                out[i, out.size(1) - m:] = row
            else:
                out[i, :m] = row
        return out

    src_lens = list(lengths)
    tgt_lens = list(reversed(lengths))
    ctx_lens = list(lengths[1:]) + list(lengths[:1])
    if kind == "concat":
        # context, separator, source: with running text the text before the source
        cat_lens = [c + 1 + m for c, m in zip(ctx_lens, src_lens)]
        src = tokens(cat_lens, True, "src", [-(c + 1) for c in ctx_lens])
        src_lens = cat_lens
    else:
        src = tokens(src_lens, True, "src")
    target = tokens(tgt_lens, False, "tgt")
    prev = torch.full_like(target, d.pad())  # </s> first, as fairseq's collater moves it
    for i, m in enumerate(tgt_lens):
        prev[i, 0] = d.eos()
        prev[i, 1:m] = target[i, :m - 1]
    net_input = {"src_tokens": src, "src_lengths": torch.tensor(src_lens), "prev_output_tokens": prev}
    if kind == "context":  # with running text the text just before the source
        ctx = tokens(ctx_lens, True, "src", [-(c - 1) for c in ctx_lens])
        net_input.update(ctx_tokens=ctx, ctx_lengths=torch.tensor(ctx_lens))
    return {"net_input": net_input, "target": target}


def hunt_row_ok(row, tolerance):
    """A hunt row passes: nothing non-finite, probabilities (full and step
    by step) within ``tolerance`` of float32 and of each other, the gradient
    pointing where float32's does."""
    tol = tolerance[row["precision"]]
    return (row["forward_nonfinite"] is None and row["backward_nonfinite"] is None and not row["nonfinite_grads"]
            and row["max_prob_diff"] <= tol and row["grad_cosine"] >= HUNT_MIN_GRAD_COSINE
            and row.get("incremental_nonfinite") is None
            and row.get("inc_vs_full", 0.0) <= tol and row.get("inc_vs_fp32", 0.0) <= tol)


def hunt(opts, on_case=None):
    """Hunt mode: every case of :func:`hunt_cases` (or those matching
    ``--cases``) at every ``--size`` it is built at, each ``--precision``
    against float32 on :func:`hunt_sample`; prints one line per case, size
    and precision, calls ``on_case(rows so far)`` after each case and returns
    the rows."""
    import re as _re
    import time

    import torch

    torch.set_num_threads(opts.threads)
    tolerance = {**HUNT_TOLERANCE, **(dict(zip(opts.precision, opts.max_prob_diff)) if opts.max_prob_diff else {})}
    cases = [c for c in hunt_cases() if not opts.cases or any(_re.search(p, c.name) for p in opts.cases)]
    if not cases:
        raise SystemExit(f"fairseq_ctx: error: --cases {' '.join(opts.cases)} match no case; cases: "
                         + ", ".join(c.name for c in hunt_cases()))
    d = hunt_dictionary()
    rows = []
    for size in opts.size:
        lengths = opts.lengths_big if (size == "big" and opts.lengths_big) else opts.lengths
        for case in cases:
            if size not in case.sizes:
                continue
            start = time.process_time()
            torch.manual_seed(opts.seed)
            layers = opts.layers or case.layers
            model = build_hunt_model(case.arch, [*case.flags, *hunt_dims(size, layers)], d)
            sample = hunt_sample(d, case.kind, lengths, opts.seed)
            inc = case.decoder_state and opts.inc_steps != 0
            res = compare_precisions(model, sample, opts.precision, incremental=inc, tolerance=tolerance,
                                     inc_steps=opts.inc_steps or None)
            cpu = time.process_time() - start
            for row in res:
                row.update(case=case.name, arch=case.arch, flags=list(case.flags), size=size, layers=layers,
                           lengths=list(lengths), src_len=int(sample["net_input"]["src_tokens"].size(1)),
                           tgt_len=int(sample["target"].size(1)), cpu_s=round(cpu, 1))
                row["ok"] = hunt_row_ok(row, tolerance)
                rows.append(row)
                where = [f"{k}: {row[k]}" for k in ("forward_nonfinite", "backward_nonfinite",
                                                    "incremental_nonfinite") if row.get(k)]
                print(f"{case.name:<37} {size:<5}{row['precision']:<5}{'ok' if row['ok'] else 'FAILED':<7}"
                      f"max|dp| {row['max_prob_diff']:.2e}  grad cos {row['grad_cosine']:.5f}"
                      + (f"  incremental ({row['inc_steps']} steps) max|dp| {row['inc_vs_full']:.2e} vs full, "
                         f"{row['inc_vs_fp32']:.2e} vs fp32" if "inc_vs_full" in row else "")
                      + f"  max|out| fp32 {row['max_abs_fp32']:.3g} ({row['max_abs_module']})"
                      + (f"  NON-FINITE {'; '.join(where)}" if where else "")
                      + f"  [{cpu:.0f} CPU s]", flush=True)
            del model
            if on_case is not None:
                on_case(rows)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", nargs="?", help="binarized data (with .docids for the document task); "
                   "not with --hunt")
    p.add_argument("--variants", nargs="+", default=architectures.names(), choices=architectures.names(),
                   metavar="NAME", help="variants of fairseq_ctx/architectures.py (default: all): "
                   + ", ".join(architectures.names()))
    p.add_argument("--precision", nargs="+", default=["fp16", "bf16"], choices=list(PRECISION_FLAGS))
    p.add_argument("--updates", type=int, default=200)
    p.add_argument("--size", nargs="+", choices=["small", "preset", *HUNT_SIZES],
                   help="training: small (default; 3+3 layers, d=256) or preset (each arch's own Base "
                   "dimensions); --hunt: base and/or big (default both; d 512/1024, ffn 2048/4096, "
                   "8/16 heads)")
    p.add_argument("--max-tokens", type=int, default=4096)
    p.add_argument("--lr", type=float, default=0.0007)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--check-batches", type=int, default=20)
    p.add_argument("--max-overflow-skips", type=int, default=20,
                   help="more fp16 overflow skips than this counts as an overflow loop")
    p.add_argument("--path", help="checkpoint mode: check this trained checkpoint instead of training "
                                  "(any --device; see the module docstring)")
    p.add_argument("--gen-subset", default="valid", help="checkpoint mode: the subset whose batches are run")
    p.add_argument("--no-incremental", action="store_true", help="checkpoint mode: skip step-by-step decoding")
    p.add_argument("--max-prob-diff", type=float, nargs="+",
                   help="checkpoint mode: tolerated |p - p_fp32|, one per --precision (default: PROB_TOLERANCE)")
    h = p.add_argument_group("hunt mode (--hunt; no data, no training)")
    h.add_argument("--hunt", action="store_true",
                   help="build every case of hunt_cases() (every ctxsan context and side; Enc-, "
                   "Dec- and Full-DC with f = 2, 3, 8; GRET and each single ablation with both routing softmaxes; "
                   "ctxenc with contexts; fairseq's Transformer and the concatenation baseline) at --size "
                   "at initialisation and run forward, backward and (where the decoder keeps state of its "
                   "own) step-by-step decoding in each --precision against float32 on one batch of "
                   "--lengths; one line per case, size and precision, naming the first non-finite module; "
                   "fails on anything non-finite, a probability difference above --max-prob-diff "
                   "(default fp16 2e-3, bf16 1e-2: see HUNT_TOLERANCE) or a gradient cosine below "
                   f"{HUNT_MIN_GRAD_COSINE}")
    h.add_argument("--cases", nargs="+", metavar="REGEX", help="only the cases whose name matches one of these")
    h.add_argument("--lengths", type=int, nargs="+",
                   help="one batch row per length: sources of these lengths, targets of them reversed, "
                   "contexts rotated by one; concatenated sources up to 2 max + 1 (default 1 50 150 250). "
                   "Also in checkpoint mode: one more batch of these lengths cut from the running text of "
                   "--gen-subset (consecutive sentences glued; longer than any sentence of the corpus), "
                   "decoded step by step over --inc-steps positions")
    h.add_argument("--lengths-big", type=int, nargs="+", help="--lengths for --size big (default: --lengths)")
    h.add_argument("--layers", type=int,
                   help="layers per side for every case (default: 2 for ctxsan (deep contexts start at layer "
                   "2), GRET (aggregation over layers) and ctxenc (one shared, one gated layer), 6 for the "
                   "ctxsan depth case, 1 otherwise)")
    h.add_argument("--inc-steps", type=int, default=50,
                   help="target positions decoded step by step (0: none; full passes cover every length; "
                   "the running sums over long prefixes are tested over 600 steps in tests/test_precision.py)")
    h.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    h.add_argument("--seed", type=int, default=0, help="initialisation and sample seed")
    p.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="further fairseq-train flags (last)")
    p.add_argument("--json", help="write the results here")
    opts = p.parse_args()
    if opts.hunt:
        opts.size = opts.size or list(HUNT_SIZES)
        if set(opts.size) - set(HUNT_SIZES) or opts.data or opts.path:
            p.error(f"--hunt takes --size {' / '.join(HUNT_SIZES)} and neither data nor --path")
        if opts.max_prob_diff and len(opts.max_prob_diff) != len(opts.precision):
            p.error(f"--max-prob-diff needs one value per --precision ({len(opts.precision)})")
        opts.lengths = opts.lengths or list(HUNT_LENGTHS)
        if min(opts.lengths + (opts.lengths_big or [1])) < 1 or opts.inc_steps < 0 or (opts.layers or 1) < 1:
            p.error("--lengths, --lengths-big and --layers must be at least 1, --inc-steps at least 0")
        start = time.time()

        def write(rows):  # after every case, so that a run cut short keeps what it measured
            import platform

            import torch

            if not opts.json:
                return
            with open(opts.json, "w") as f:
                json.dump({"mode": "hunt", "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
                           "cpu": platform.processor() or platform.machine(), "threads": opts.threads,
                           "settings": {k: getattr(opts, k) for k in (
                               "size", "precision", "cases", "lengths", "lengths_big", "layers", "inc_steps",
                               "seed", "max_prob_diff")},
                           "tolerance": {**HUNT_TOLERANCE, **(
                               dict(zip(opts.precision, opts.max_prob_diff)) if opts.max_prob_diff else {})},
                           "min_grad_cosine": HUNT_MIN_GRAD_COSINE, "wall_s": round(time.time() - start, 1),
                           "cpu_s": round(sum(r["cpu_s"] for r in rows[::len(opts.precision)]), 1),
                           "results": rows}, f, indent=2)

        rows = hunt(opts, write)
        failed = [f"{r['case']} {r['size']} {r['precision']}" for r in rows if not r["ok"]]
        print(f"{len(rows) - len(failed)} of {len(rows)} ok" + (f"; FAILED: {', '.join(failed)}" if failed else ""))
        sys.exit(1 if failed else 0)
    opts.size = (opts.size or ["small"])
    if len(opts.size) != 1 or opts.size[0] not in ("small", "preset"):
        p.error("training takes one --size: small or preset")
    opts.size = opts.size[0]
    if opts.data is None:
        p.error("the data directory is required (except with --hunt)")
    if not os.path.isdir(opts.data):
        p.error(f"data directory not found: {opts.data}")
    if opts.updates < 1:
        p.error("--updates must be at least 1")
    if opts.check_batches < 1:
        p.error("--check-batches must be at least 1")
    if opts.max_prob_diff and len(opts.max_prob_diff) != len(opts.precision):
        p.error(f"--max-prob-diff needs one value per --precision ({len(opts.precision)}), "
                f"got {len(opts.max_prob_diff)}")
    if opts.lengths and (not opts.path or min(opts.lengths) < 1):
        p.error("--lengths (at least 1) goes with --hunt or --path")
    if opts.path:
        rows = check_checkpoint(opts)
        if opts.json:
            with open(opts.json, "w") as f:
                json.dump({"checkpoint": opts.path, "settings": vars(opts), "results": rows}, f, indent=2)
        sys.exit(0 if all(r["ok"] for r in rows) else 1)
    if opts.device == "cpu" and set(opts.precision) - {"fp32"}:
        p.error("--precision fp16/bf16 need --device cuda to train (fairseq's --fp16 requires CUDA and its "
                "--bf16 without CUDA takes the TPU path); on CPU check a trained checkpoint with --path")

    import torch

    device_name = torch.cuda.get_device_name(0) if opts.device == "cuda" else "cpu"
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for variant in architectures.select(opts.variants):
            label, arch = variant.name, variant.arch
            for precision in opts.precision:
                save = os.path.join(tmp, f"{label}-{precision}")
                rc, log = train(opts, arch, [*variant.flags, *variant.task], precision, save)
                row = {"variant": label, "arch": arch, "precision": precision, "device": device_name,
                       "updates": opts.updates, "train_rc": rc, **parse_log(log)}
                if rc == 0:
                    row["nonfinite_module"], row["batches_checked"] = check_modules(
                        opts, os.path.join(save, "checkpoint_last.pt"), precision, bool(variant.task))
                else:
                    row["log_tail"] = log[-2000:]
                row["ok"] = (rc == 0 and row["last_loss"] is not None and math.isfinite(row["last_loss"])
                             and row["overflow_skips"] <= opts.max_overflow_skips
                             and not row["min_scale_reached"] and row.get("nonfinite_module") is None)
                results.append(row)
                print(f"{label:<14}{precision:<6}{'ok' if row['ok'] else 'FAILED':<8}"
                      f"loss {row['last_loss']}  overflow skips {row['overflow_skips']}  "
                      f"loss scale {row['final_loss_scale']}  non-finite module {row.get('nonfinite_module')}",
                      flush=True)
                if rc != 0:
                    print(row["log_tail"], file=sys.stderr)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"device": device_name, "settings": {k: v for k, v in vars(opts).items()},
                       "results": results}, f, indent=2)
    sys.exit(0 if all(r["ok"] for r in results) else 1)


if __name__ == "__main__":
    main()
