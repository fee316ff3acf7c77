"""How much a trained GRET model relies on its global representation
(Weng et al., AAAI 2020): the validation loss with the global state fused
into the decoder's top states (Eq. 12-13) and with it removed at test time.

GRET's paper measures what its modules add by training ablated models
(Table 3). A warm-started GRET model (the paper's recipe) also trains more
updates than its baseline, with a fresh optimizer and warm-up, so a gain over
the baseline can come from the restart alone. This diagnostic asks the
trained model directly: for each checkpoint,

* ``loss`` / ``nll_loss``: the checkpoint's criterion on ``--gen-subset``
  (base 2, per target token as fairseq reports them), as trained;
* ``loss_without_global`` / ``nll_loss_without_global``: the same with Eq. 13
  replaced by ``r_bar_j = r_j`` in every context gate (a forward hook returns
  the gate's input states), everything else unchanged. If removing s costs
  nothing, the model has learnt not to use it;
* ``fused_share``: the mean over target positions of ``|g_j * s| / |r_j|``,
  how large the fused term is against the states it is added to;
* the spread of s over sentences: its mean norm, the norm of its mean and
  the mean cosine of each sentence's s to the mean (1: the same vector for
  every sentence, a bias the decoder could hold anyway).

Writes ``OUT/gret_global_state.json``.

Usage::

    python3 -m fairseq_ctx.analysis.gret_global_state DATA-BIN --path CKPT \\
        --gen-subset valid --out DIR [--max-tokens 4000] [--cpu]

Every flag of ``fairseq-generate`` is accepted (``--help-fairseq`` lists them).
"""
from __future__ import annotations  # torch is imported by the analysis, not for --help

import argparse
import json
import logging
import math
import os
import sys
from typing import Dict, Optional, Sequence

from fairseq_ctx.cli import (
    generation_tool_batches,
    generation_tool_models,
    generation_tool_parser,
    print_quick_help,
    quick_generation_parser,
    setup_generation_tool,
    setup_logging,
)
from fairseq_ctx.errors import install_excepthook

logger = logging.getLogger("fairseq_ctx.analysis.gret_global_state")

PROG = "fairseq-ctx-gret-global-state"


def _gates(model):
    from fairseq_ctx.modules.gret_context_gate import ContextGate

    gates = [m for m in model.modules() if isinstance(m, ContextGate)]
    if not gates:
        raise ValueError("the checkpoint is not a transformer_gret model (no context gate)")
    return gates


def _losses(model, criterion, batches) -> Dict[str, float]:
    import torch

    loss = nll = sample_size = ntokens = 0.0
    with torch.no_grad():
        for sample in batches:
            _, _, log = criterion(model, sample)
            loss += float(log["loss"])
            nll += float(log.get("nll_loss", log["loss"]))
            sample_size += float(log["sample_size"])
            ntokens += float(log["ntokens"])
    # fairseq's reporting: loss per sample_size unit, nll per target token, base 2
    return {"loss": loss / sample_size / math.log(2), "nll_loss": nll / ntokens / math.log(2)}


def analyse_model(model, criterion, batches) -> Dict:
    """The numbers of the module docstring for one model over ``batches``."""
    import torch

    gates = _gates(model)
    shares, states = [], []

    def record(gate, inputs, output):
        r, s = inputs[0], inputs[1]  # B x T x C, B x C_s
        # padded positions are included: their r is as large as any other's
        shares.append(((output - r).norm(dim=-1) / r.norm(dim=-1).clamp_min(1e-9)).flatten())
        states.append(s.detach().float())

    hooks = [g.register_forward_hook(record) for g in gates]
    try:
        full = _losses(model, criterion, batches)
    finally:
        for h in hooks:
            h.remove()
    # a forward hook's return value replaces the module's output: r_bar = r
    hooks = [g.register_forward_hook(lambda gate, inputs, output: inputs[0]) for g in gates]
    try:
        ablated = _losses(model, criterion, batches)
    finally:
        for h in hooks:
            h.remove()
    s = torch.cat(states)  # sentences x C_s (each sentence once per gate call)
    mean = s.mean(dim=0)
    cosine = torch.nn.functional.cosine_similarity(s, mean.unsqueeze(0), dim=-1)
    return {
        "loss": full["loss"], "nll_loss": full["nll_loss"],
        "loss_without_global": ablated["loss"], "nll_loss_without_global": ablated["nll_loss"],
        "fused_share": float(torch.cat(shares).mean()),
        "global_state_mean_norm": float(s.norm(dim=-1).mean()),
        "global_state_norm_of_mean": float(mean.norm()),
        "global_state_mean_cosine_to_mean": float(cosine.mean()),
        "num_sentences": int(s.size(0)),
    }


def _add_own_args(parser: argparse.ArgumentParser):
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory for the JSON")


def get_parser() -> argparse.ArgumentParser:
    """fairseq-generate's parser with the analysis' flags (imports fairseq)."""
    return generation_tool_parser(PROG, _add_own_args)


def _quick_parser() -> argparse.ArgumentParser:
    """The flags that matter here, for --help without importing fairseq."""
    return quick_generation_parser(
        PROG, __doc__,
        epilog="example:\n"
               "  fairseq-ctx-gret-global-state data/bin --path runs/gret/checkpoint_best.pt \\\n"
               "      --gen-subset valid --out gret_global/    # gret_global_state.json",
        path_help="checkpoint(s), ':'-separated; each analysed on its own", add_own_args=_add_own_args)


def main(argv: Optional[Sequence[str]] = None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if print_quick_help(argv, _quick_parser, get_parser, "fairseq-generate"):
        return None
    install_excepthook()
    setup_logging(stream=sys.stdout)
    import torch
    from fairseq import utils

    args, cfg, task = setup_generation_tool(get_parser, argv)
    use_cuda = torch.cuda.is_available() and not cfg.common.cpu
    results, batches = [], None
    for path, model, saved_cfg in generation_tool_models(cfg, task):
        if batches is None:
            task.load_dataset(cfg.dataset.gen_subset, task_cfg=saved_cfg.task)
            batches = list(generation_tool_batches(task, cfg, model, cfg.dataset.gen_subset))
            if use_cuda:
                batches = [utils.move_to_cuda(b) for b in batches]
        criterion = task.build_criterion(saved_cfg.criterion)
        res = analyse_model(model, criterion, batches)
        res["path"] = path
        res["criterion"] = saved_cfg.criterion._name
        logger.info("%s: loss %.4f with the global state, %.4f without; |g*s|/|r| = %.3f", path, res["loss"],
                    res["loss_without_global"], res["fused_share"])
        results.append(res)
    os.makedirs(args.out, exist_ok=True)
    summary = {"subset": cfg.dataset.gen_subset, "log_base": 2,
               "ablation": "r_bar_j = r_j in every context gate (Eq. 13 without g_j * s), at test time only",
               "checkpoints": results}
    json_path = os.path.join(args.out, "gret_global_state.json")
    with open(json_path, "w") as f:
        json.dump(summary, f, indent=2)
    for res in results:
        print(f"{res['path']}: loss {res['loss']:.4f} (nll {res['nll_loss']:.4f}) with the global state, "
              f"{res['loss_without_global']:.4f} (nll {res['nll_loss_without_global']:.4f}) without; "
              f"|g*s|/|r| {res['fused_share']:.3f}; s: mean cosine to its mean "
              f"{res['global_state_mean_cosine_to_mean']:.3f}")
    logger.info("wrote %s", json_path)
    return summary


if __name__ == "__main__":
    main()
