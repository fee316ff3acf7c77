#!/usr/bin/env python3
"""Mixed-precision health check (issue 8): train every architecture with
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
"""
import argparse
import copy
import json
import math
import os
import re
import subprocess
import sys
import tempfile

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
# peakier distributions, so the defaults are wider; they have not yet been
# measured on trained checkpoints (pass --max-prob-diff to tighten them).
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

    def __init__(self, model, watch_grads=False):
        self.forward = None
        self.backward = None
        self.watch_grads = watch_grads
        self.handles = [m.register_forward_hook(self._hook(name or "model")) for name, m in model.named_modules()]

    def _hook(self, name):
        import torch

        def hook(module, inputs, output):
            for t in _tensors(output):
                if not t.is_floating_point():
                    continue
                if self.forward is None and not bool(torch.isfinite(t).all()):
                    self.forward = name
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


def run_precision(model, sample, incremental=True):
    """One model in its own dtype on one batch. Returns a dict with the
    float32 log-probabilities of the full forward (B x T x V), the target NLL,
    the flat float32 gradient, the incremental log-probabilities and the
    first non-finite module of forward / backward / incremental decoding."""
    import torch

    net_input, target = sample["net_input"], sample["target"]
    pad = model.decoder.dictionary.pad()
    keep = target.ne(pad)
    for m in model.modules():  # eval: no dropout, so every dtype computes the same function
        m.train(False)
    model.zero_grad(set_to_none=True)
    watch = NonFiniteWatch(model, watch_grads=True)
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
           "nonfinite_grads": bad_params, "inc_lprobs": None, "incremental_nonfinite": None}
    if incremental:
        prev = net_input["prev_output_tokens"]
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


def compare_precisions(model, sample, precisions, incremental=True, tolerance=None):
    """Run ``model`` (float32) and a copy cast to each of ``precisions`` on
    ``sample``; returns one row per precision (see the module docstring)."""
    import torch

    tolerance = {**PROB_TOLERANCE, **(tolerance or {})}
    model = model.float()
    ref = run_precision(model, sample, incremental=False)  # step-by-step output is compared with the full pass
    keep = ref["keep"]
    rows = []
    for precision in precisions:
        dtype = getattr(torch, DTYPES[precision])
        half = model if precision == "fp32" else copy.deepcopy(model).to(dtype)
        r = run_precision(half, sample, incremental)
        finite = bool(torch.isfinite(r["lprobs"][keep]).all()) and math.isfinite(r["nll"])
        g, g_ref = r["grad"], ref["grad"]
        row = {
            "precision": precision,
            "forward_nonfinite": r["forward_nonfinite"],
            "backward_nonfinite": r["backward_nonfinite"],
            "nonfinite_grads": r["nonfinite_grads"][:5],
            "nll": r["nll"], "nll_fp32": ref["nll"],
            "max_prob_diff": _max_prob_diff(r["lprobs"], ref["lprobs"], keep) if finite else math.inf,
            "grad_cosine": float(torch.nn.functional.cosine_similarity(g.double(), g_ref.double(), dim=0))
            if bool(torch.isfinite(g).all()) else math.nan,
        }
        if incremental:
            inc = r["inc_lprobs"]
            inc_finite = bool(torch.isfinite(inc[keep]).all())
            row["incremental_nonfinite"] = r["incremental_nonfinite"] or (None if inc_finite else "decoder")
            row["inc_vs_full"] = _max_prob_diff(inc, r["lprobs"], keep) if inc_finite else math.inf
            row["inc_vs_fp32"] = _max_prob_diff(inc, ref["lprobs"], keep) if inc_finite else math.inf
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
        raise SystemExit(f"precision_check: error: --gen-subset {subset} of {task.cfg.data} is empty")
    count = min(count, len(batches))
    picks = sorted({round(i * (len(batches) - 1) / max(1, count - 1)) for i in range(count)})
    return [dataset.collater([dataset[i] for i in batches[b]]) for b in picks]


def check_checkpoint(opts):
    """Checkpoint mode: every ``--precision`` against float32 on the picked
    batches; prints one line per batch and precision, returns the rows."""
    import torch
    from fairseq import checkpoint_utils, utils

    utils.import_user_module(argparse.Namespace(user_dir=USER_DIR))  # also allow-lists checkpoint classes
    if not os.path.isfile(opts.path):
        raise SystemExit(f"precision_check: error: --path {opts.path}: no such checkpoint")
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([opts.path], arg_overrides={"data": opts.data})
    model = models[0].float().to(opts.device)
    tolerance = dict(zip(opts.precision, opts.max_prob_diff)) if opts.max_prob_diff else None
    rows = []
    for b, sample in enumerate(pick_batches(task, opts.gen_subset, opts.max_tokens, opts.check_batches)):
        if opts.device == "cuda":
            sample = utils.move_to_cuda(sample)
        src_len = int(sample["net_input"]["src_tokens"].size(1))
        tgt_len = int(sample["target"].size(1))
        for row in compare_precisions(model, sample, opts.precision, not opts.no_incremental, tolerance):
            row.update(batch=b, sentences=int(sample["target"].size(0)), src_len=src_len, tgt_len=tgt_len)
            rows.append(row)
            where = [f"{k}: {row[k]}" for k in ("forward_nonfinite", "backward_nonfinite", "incremental_nonfinite")
                     if row.get(k)]
            print(f"batch {b:<3} src {src_len:<4} tgt {tgt_len:<4} {row['precision']:<5} "
                  f"{'ok' if row['ok'] else 'FAILED':<7} max|dp| {row['max_prob_diff']:.2e}  "
                  f"nll {row['nll']:.4f} (fp32 {row['nll_fp32']:.4f})  grad cos {row['grad_cosine']:.5f}"
                  + (f"  incremental max|dp| {row['inc_vs_full']:.2e} vs full, {row['inc_vs_fp32']:.2e} vs fp32"
                     if "inc_vs_full" in row else "")
                  + (f"  NON-FINITE {'; '.join(where)}" if where else ""), flush=True)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", help="binarized data (with .docids for the document task)")
    p.add_argument("--variants", nargs="+", default=architectures.names(), choices=architectures.names(),
                   metavar="NAME", help="variants of fairseq_ctx/architectures.py (default: all): "
                   + ", ".join(architectures.names()))
    p.add_argument("--precision", nargs="+", default=["fp16", "bf16"], choices=list(PRECISION_FLAGS))
    p.add_argument("--updates", type=int, default=200)
    p.add_argument("--size", choices=["small", "preset"], default="small",
                   help="small: 3+3 layers, d=256; preset: each arch's own (Base) dimensions")
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
    p.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="further fairseq-train flags (last)")
    p.add_argument("--json", help="write the results here")
    opts = p.parse_args()
    if not os.path.isdir(opts.data):
        p.error(f"data directory not found: {opts.data}")
    if opts.updates < 1:
        p.error("--updates must be at least 1")
    if opts.check_batches < 1:
        p.error("--check-batches must be at least 1")
    if opts.max_prob_diff and len(opts.max_prob_diff) != len(opts.precision):
        p.error(f"--max-prob-diff needs one value per --precision ({len(opts.precision)}), "
                f"got {len(opts.max_prob_diff)}")
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
