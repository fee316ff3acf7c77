"""Operations per training update: how many non-view ATen operations one
``Trainer.train_step`` of each architecture dispatches, in float32 and in
bfloat16, with ``--optimizer adam`` (fairseq's) and ``--optimizer
adam_foreach`` (fairseq_ctx/foreach_optim.py).

A small model's update on a GPU costs about one kernel launch per operation
whatever its size, so this count, taken on CPU, is the number that bounds a
small model's updates per second on a GPU. Counted with a
``TorchDispatchMode`` around the second update of a fresh trainer (the first
creates the optimizer state): every operation that reaches the dispatcher
from Python or autograd, views (reshapes, slices, ``detach``) left out
because they launch nothing; a ``torch._foreach_`` call is one operation,
as it is one (or a few) multi-tensor kernels on a GPU. "after backward" is
what follows fairseq's ``reduce-grads`` marker: gradient scaling, clipping,
the optimizer step and the precision copies.

The model is the study's (``fairseq_ctx/study/runs.py`` SIZE and RECIPE, the
document task with one sentence of context); the counts do not depend on
the data's vocabulary or sentence lengths, so any binarized corpus with
docids does (the tests use a toy one). bfloat16 runs fairseq's
``FP16Optimizer`` path of ``fairseq-train --bf16`` on CPU (``--tpu``, which
fairseq's parser derives from ``--bf16``, is turned off as on a GPU).

    python3 scripts/update_ops.py data/bible/bin --json benchmarks/update-ops.json

``--ctxenc-one-pass`` counts the context encoder with its contexts in one
pass (``transformer_ctxenc.contexts_in_one_pass``): without the length
groups it forms where real context tokens would fill less than 80% of the
padded context batch, which save the padding's FLOPs at the cost of more,
smaller calls. Either way the context encoder's count follows the batch's
context lengths (the only count here that depends on the data).

``--decoding-step`` counts one incremental decoding step instead (the
third, as fairseq's beam search calls the model: decoder and log-softmax,
no autograd), and the model's part of the move of the beams before the
next (its cached states and encoder output reordered), of every
architecture and decoder-side option (``STEP_VARIANTS``, the catalogue's
names).
"""
import argparse
import collections
import json
import os
import sys

ARCHS = ("transformer", "transformer_ctxsan", "transformer_dc", "transformer_gret", "transformer_ctxenc")
PRECISIONS = ("fp32", "bf16")
OPTIMIZERS = ("adam", "adam_foreach")
USER_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fairseq_ctx")


def trainer_args(data_bin, arch, precision="fp32", optimizer="adam_foreach", extra=()):
    """fairseq-train's command line for one update of the study's model."""
    from fairseq_ctx.study.runs import DOC_TASK, RECIPE, SIZE

    recipe = list(RECIPE)
    recipe[recipe.index("--optimizer") + 1] = optimizer
    argv = [str(data_bin), "--user-dir", USER_DIR, "--arch", arch, *SIZE, *recipe, *DOC_TASK,
            "--cpu", "--seed", "1", "--max-update", "100", "--lr-scheduler", "inverse_sqrt",
            "--warmup-updates", "10", *extra]
    if precision == "bf16":
        argv.append("--bf16")
    elif precision == "fp16":
        # fairseq's flat float32 masters need CUDA; the per-parameter ones do not
        argv += ["--fp16", "--fp16-no-flatten-grads"]
    elif precision != "fp32":
        raise SystemExit(f"scripts/update_ops.py: error: --precision: unknown {precision!r}")
    return argv


def build_trainer(argv):
    """A fairseq Trainer and the first training batch, as fairseq-train builds them."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.trainer import Trainer

    args = options.parse_args_and_arch(options.get_training_parser(), [str(a) for a in argv])
    args.tpu = False  # fairseq's parser turns --bf16 into --tpu; on a GPU fairseq_ctx turns it back off
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    task.load_dataset(cfg.dataset.train_subset, combine=True, epoch=1)
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    trainer = Trainer(cfg, task, model, criterion)
    batches = task.get_batch_iterator(
        dataset=task.dataset(cfg.dataset.train_subset), max_tokens=cfg.dataset.max_tokens,
        max_positions=(1024, 1024), required_batch_size_multiple=1, seed=1,
    ).next_epoch_itr(shuffle=False)
    return trainer, next(iter(batches))


def _counter():
    """A ``TorchDispatchMode`` counting non-view operations, in ``before``
    until fairseq's ``reduce-grads`` marker and in ``after`` from it."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.before, self.after = collections.Counter(), collections.Counter()
            self.backward_done = False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.overloadpacket.__name__ == "_record_function_enter_new" and args and args[0] == "reduce-grads":
                self.backward_done = True
            if not func.is_view:
                (self.after if self.backward_done else self.before)[str(func.overloadpacket)] += 1
            return func(*args, **(kwargs or {}))

    return Count()


def count_update(trainer, sample):
    """{"total", "after_backward", "ops"} of one ``trainer.train_step([sample])``."""
    with _counter() as count:
        trainer.train_step([sample])
    after = sum(count.after.values())
    return {"total": sum(count.before.values()) + after, "after_backward": after,
            "ops": dict((count.before + count.after).most_common())}


def measure(data_bin, arch, precision="fp32", optimizer="adam_foreach", ctxenc_one_pass=False):
    import contextlib

    from fairseq_ctx.models.transformer_ctxenc import contexts_in_one_pass

    trainer, sample = build_trainer(trainer_args(data_bin, arch, precision, optimizer))
    with contexts_in_one_pass() if ctxenc_one_pass else contextlib.nullcontext():
        trainer.train_step([sample])  # creates the optimizer state
        result = count_update(trainer, sample)
    result["parameters"] = sum(1 for p in trainer.model.parameters() if p.requires_grad)
    return result


# the catalogue's variants (fairseq_ctx.architectures) whose decoding step is
# measured: every architecture, and each decoder-side option of one
STEP_VARIANTS = ("transformer", "ctxsan", "ctxsan_both", "dc", "dc_full", "gret", "ctxenc")


def measure_step(data_bin, name, step=3):
    """{"total", "ops", "reorder", "reorder_ops"} of one incremental decoding
    step (the ``step``-th) of the catalogue variant ``name`` at the study's
    size, in eval mode without autograd, as fairseq's beam search calls it
    (``EnsembleModel.forward_decoder``: the decoder and the log-softmax),
    on the first training batch with its reference prefix; ``reorder``: the
    model's part of the search's move of the beams between two steps
    (``reorder_incremental_state`` and ``reorder_encoder_out``, which the
    search calls before every step after the first; the search's own
    bookkeeping, the same for every model, left out)."""
    import torch
    from fairseq.sequence_generator import EnsembleModel

    from fairseq_ctx.architectures import variant

    v = variant(name)
    trainer, sample = build_trainer(trainer_args(data_bin, v.arch, extra=v.flags))
    ensemble = EnsembleModel([trainer.model]).eval()
    net_input = {k: x for k, x in sample["net_input"].items() if k != "prev_output_tokens"}
    prefix = sample["net_input"]["prev_output_tokens"]
    states = [{}]  # one incremental state per model
    # a permutation in which no row keeps its place, as a beam move can be
    order = torch.roll(torch.arange(prefix.size(0), device=prefix.device), 1)
    with torch.no_grad():
        encoder_outs = ensemble.forward_encoder(net_input)
        for t in range(1, step + 1):
            count = _counter()
            with count:
                ensemble.forward_decoder(prefix[:, :t], encoder_outs, states)
        reorder = _counter()
        with reorder:
            ensemble.reorder_incremental_state(states, order)
            ensemble.reorder_encoder_out(encoder_outs, order)
    return {"total": sum(count.before.values()), "ops": dict(count.before.most_common()),
            "reorder": sum(reorder.before.values()), "reorder_ops": dict(reorder.before.most_common())}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_bin", help="binarized corpus with docids (any: the counts do not depend on it, but "
                                         "for transformer_ctxenc's, which follows its first batch's context lengths)")
    parser.add_argument("--archs", nargs="+", default=list(ARCHS), choices=ARCHS)
    parser.add_argument("--precision", nargs="+", default=list(PRECISIONS), choices=("fp32", "bf16", "fp16"))
    parser.add_argument("--optimizers", nargs="+", default=list(OPTIMIZERS), choices=OPTIMIZERS)
    parser.add_argument("--decoding-step", action="store_true",
                        help="count one incremental decoding step of each of STEP_VARIANTS instead")
    parser.add_argument("--ctxenc-one-pass", action="store_true",
                        help="transformer_ctxenc with its contexts in one pass, not in length groups")
    parser.add_argument("--json", help="write the counts here")
    args = parser.parse_args(argv)
    if args.ctxenc_one_pass and (args.decoding_step or "transformer_ctxenc" not in args.archs):
        parser.error("--ctxenc-one-pass: counts transformer_ctxenc's training update; give it without "
                     "--decoding-step and with transformer_ctxenc among --archs")
    if not os.path.isdir(args.data_bin):
        parser.error(f"data_bin: no directory {args.data_bin}")
    import torch

    torch.manual_seed(1)
    import fairseq_ctx

    fairseq_ctx.register()
    rows = []
    if args.decoding_step:
        print("| variant | ops per decoding step | ops per reorder of the beams |")
        print("|---|---|---|")
        for name in STEP_VARIANTS:
            r = measure_step(args.data_bin, name)
            rows.append({"variant": name, **r})
            print(f"| {name} | {r['total']:,} | {r['reorder']:,} |", flush=True)
    else:
        print("| architecture | precision | optimizer | parameter tensors | ops per update | after backward |")
        print("|---|---|---|---|---|---|")
    for arch in ([] if args.decoding_step else args.archs):
        for precision in args.precision:
            for optimizer in args.optimizers:
                one_pass = args.ctxenc_one_pass and arch == "transformer_ctxenc"
                r = measure(args.data_bin, arch, precision, optimizer, ctxenc_one_pass=one_pass)
                rows.append({"arch": arch, "precision": precision, "optimizer": optimizer, **r,
                             **({"ctxenc_one_pass": True} if one_pass else {})})
                name = f"{arch} (contexts in one pass)" if one_pass else arch
                print(f"| {name} | {precision} | {optimizer} | {r['parameters']} | {r['total']:,} | "
                      f"{r['after_backward']:,} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
