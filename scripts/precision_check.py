#!/usr/bin/env python3
"""Mixed-precision health check (issue 8): train every architecture with
fairseq's ``--fp16`` and ``--bf16`` and show that it neither diverges nor
loops on overflow, and that every module's output stays finite.

For each variant and precision this runs a real ``fairseq-train`` for
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
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
USER_DIR = os.path.join(REPO, "fairseq_ctx")
DOC_TASK = ["--task", "document_translation", "--context-size", "1"]
# label -> (arch, flags); the same variants as the benchmark's table.
VARIANTS = {
    "transformer": ("transformer", []),
    "ctxsan": ("transformer_ctxsan", []),
    "ctxsan_both": ("transformer_ctxsan", ["--ctxsan-side", "both"]),
    "dc": ("transformer_dc", []),
    "dc_full": ("transformer_dc_full", []),
    "gret": ("transformer_gret", []),
    "ctxenc": ("transformer_ctxenc", DOC_TASK),
}
SMALL = ["--encoder-layers", "3", "--decoder-layers", "3", "--encoder-embed-dim", "256",
         "--decoder-embed-dim", "256", "--encoder-ffn-embed-dim", "1024", "--decoder-ffn-embed-dim", "1024",
         "--encoder-attention-heads", "4", "--decoder-attention-heads", "4"]
PRECISION_FLAGS = {"fp32": [], "fp16": ["--fp16"], "bf16": ["--bf16"]}


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


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", help="binarized data (with .docids for the document task)")
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
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
    p.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="further fairseq-train flags (last)")
    p.add_argument("--json", help="write the results here")
    opts = p.parse_args()
    if not os.path.isdir(opts.data):
        p.error(f"data directory not found: {opts.data}")
    if opts.updates < 1:
        p.error("--updates must be at least 1")
    if opts.device == "cpu" and set(opts.precision) - {"fp32"}:
        p.error("--precision fp16/bf16 need --device cuda (fairseq's --fp16 requires CUDA and its --bf16 "
                "without CUDA takes the TPU path)")

    import torch

    device_name = torch.cuda.get_device_name(0) if opts.device == "cuda" else "cpu"
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for label in opts.variants:
            arch, flags = VARIANTS[label]
            for precision in opts.precision:
                save = os.path.join(tmp, f"{label}-{precision}")
                rc, log = train(opts, arch, flags, precision, save)
                row = {"variant": label, "arch": arch, "precision": precision, "device": device_name,
                       "updates": opts.updates, "train_rc": rc, **parse_log(log)}
                if rc == 0:
                    row["nonfinite_module"], row["batches_checked"] = check_modules(
                        opts, os.path.join(save, "checkpoint_last.pt"), precision, "--task" in flags)
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
