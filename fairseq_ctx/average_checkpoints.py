"""Average the parameters of several fairseq checkpoints (Vaswani et al. 2017
average the last 5 or 20 checkpoints; the papers reproduced here do the same).

fairseq ships this as ``scripts/average_checkpoints.py``, which is not part of
its wheel; this is our installed equivalent, with the same flags::

    fairseq-ctx-average-checkpoints --inputs CKPT_DIR --num-epoch-checkpoints 5 --output avg.pt
    fairseq-ctx-average-checkpoints --inputs a.pt b.pt c.pt --output avg.pt

Checkpoints are read with fairseq's weights-only loader (the plugin's
allow-list applies). Every input must hold the same parameter names and shapes;
otherwise the error names the first file and parameter that differ.
"""
import argparse
import os
import re
import sys

from fairseq_ctx.cli import check_dir, check_file, check_output
from fairseq_ctx.errors import FairseqCtxError, install_excepthook


def average_checkpoints(paths):
    """Return the first checkpoint's state with ``model`` replaced by the mean
    of all inputs' parameters (accumulated in fp32, stored in the first
    checkpoint's dtypes)."""
    import fairseq_ctx

    fairseq_ctx.register()  # the allow-list for weights-only loading
    from fairseq import checkpoint_utils

    if not paths:
        raise FairseqCtxError("no checkpoints to average")
    first, sums = None, None
    for path in paths:
        state = checkpoint_utils.load_checkpoint_to_cpu(path)
        params = state["model"]
        if first is None:
            first, sums = state, {k: v.detach().float().clone() for k, v in params.items()}
            continue
        if list(params) != list(sums):
            missing = sorted(set(sums) ^ set(params))
            raise FairseqCtxError(f"{path} has other parameters than {paths[0]} (e.g. {missing[:3]})")
        for name, value in params.items():
            if value.shape != sums[name].shape:
                raise FairseqCtxError(
                    f"{path}: parameter {name} has shape {tuple(value.shape)}, "
                    f"but {tuple(sums[name].shape)} in {paths[0]}"
                )
            sums[name] += value.float()
    first["model"] = {k: (v / len(paths)).to(first["model"][k].dtype) for k, v in sums.items()}
    return first


def last_checkpoints(directory, count, update_based=False, upper_bound=None):
    """The ``count`` newest ``checkpointN.pt`` (or ``checkpoint_E_U.pt``) files in ``directory``."""
    pattern = re.compile(r"checkpoint_\d+_(\d+)\.pt" if update_based else r"checkpoint(\d+)\.pt")
    found = []
    for name in os.listdir(directory):
        m = pattern.fullmatch(name)
        if m and (upper_bound is None or int(m.group(1)) <= upper_bound):
            found.append((int(m.group(1)), os.path.join(directory, name)))
    if len(found) < count:
        kind = "checkpoint_E_U.pt (--save-interval-updates)" if update_based else "checkpointN.pt"
        raise FairseqCtxError(f"found {len(found)} {kind} files in {directory}, need {count}")
    return [path for _, path in sorted(found, reverse=True)[:count]]


def cli_main(argv=None):
    install_excepthook()
    p = argparse.ArgumentParser(
        prog="fairseq-ctx-average-checkpoints", description="Average the parameters of fairseq checkpoints.",
        epilog="examples:\n"
               "  fairseq-ctx-average-checkpoints --inputs runs/ctxsan --num-epoch-checkpoints 5 --output avg.pt\n"
               "  fairseq-ctx-average-checkpoints --inputs a.pt b.pt c.pt --output avg.pt",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--inputs", required=True, nargs="+", help="checkpoint files, or one directory with --num-*")
    p.add_argument("--output", required=True, help="where to write the averaged checkpoint")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--num-epoch-checkpoints", type=int, help="average the last N checkpointN.pt in the directory")
    group.add_argument("--num-update-checkpoints", type=int, help="average the last N checkpoint_E_U.pt")
    p.add_argument("--checkpoint-upper-bound", type=int, help="ignore checkpoints after this epoch/update")
    args = p.parse_args(argv)
    count = args.num_epoch_checkpoints or args.num_update_checkpoints
    check_output(args.output, "--output")
    if count is not None:
        if len(args.inputs) == 1:
            check_dir(args.inputs[0], "--inputs", "checkpoint directory")
        if len(args.inputs) != 1 or not os.path.isdir(args.inputs[0]):
            p.error("--num-epoch-checkpoints/--num-update-checkpoints take one directory in --inputs")
        if count < 1:
            p.error("the number of checkpoints to average must be at least 1")
        inputs = last_checkpoints(args.inputs[0], count, args.num_update_checkpoints is not None,
                                  args.checkpoint_upper_bound)
    elif args.checkpoint_upper_bound is not None:
        p.error("--checkpoint-upper-bound needs --num-epoch-checkpoints or --num-update-checkpoints")
    else:
        inputs = args.inputs
        for path in inputs:
            check_file(path, "--inputs", "checkpoint file")
    print("averaging " + ", ".join(inputs), file=sys.stderr)
    import torch

    torch.save(average_checkpoints(inputs), args.output)
    print(f"wrote {args.output}", file=sys.stderr)


if __name__ == "__main__":
    cli_main()
