"""Jensen-Shannon divergence between the two feature-interaction attentions
of the DC module, per encoder layer (Ampomah et al. 2021, Sect. 7.2,
Eq. 10-13, Figure 4).

For every DC encoder layer l and every real (non-pad) source token t:

* Eq. 10: alpha_g, alpha_l are reduced over the n_h heads to one
  distribution per query ("the attention head with the maximum weight
  distribution"). The paper leaves the reduction open; two readings, chosen
  with ``--head-reduction``:

  - ``max`` (default): the element-wise maximum over heads, renormalised over
    the keys so that it is a distribution again (without renormalising the
    JS divergence is undefined). It keeps every head's strongest key, so it
    reads "maximum weight distribution" as a maximum of weights, and it is
    the reading the earlier results of this tool used.
  - ``peak``: for each query, the one head whose largest weight is highest,
    taken whole (already a distribution; no renormalisation). It reads the
    phrase as a choice of head.
* Eq. 11-12: dv = JS(alpha_g || alpha_l) = KL(alpha_g || m)/2 + KL(alpha_l || m)/2,
  m = (alpha_g + alpha_l)/2, natural logarithm (so 0 <= dv <= ln 2), over the
  real source positions only.

dv^l is the mean over all real tokens of the data set; Eq. 13, E_d, is the
mean of dv^l over the L layers (over the DC layers when only a subset of the
encoder carries the module, Table 5).

Several checkpoints (e.g. models trained with different ``--dc-kernel-size``,
Figure 4) can be given as ``--path a.pt:b.pt``; each is analysed on its own,
not as an ensemble. Writes ``OUT/dc_divergence.json`` and
``OUT/dc_divergence.png`` ((a) dv^l per layer, (b) E_d per checkpoint).

Usage::

    python3 -m fairseq_ctx.analysis.dc_divergence --path CKPT DATA-BIN \\
        --gen-subset valid --out DIR [--head-reduction max|peak] [--max-tokens 4000] [--limit N] [--cpu]

Every flag of ``fairseq-generate`` is accepted (``--help-fairseq`` lists them).
"""
from __future__ import annotations  # torch is imported by the analysis, not for --help

import argparse
import json
import logging
import math
import os
import sys
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence

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

if TYPE_CHECKING:
    import torch

logger = logging.getLogger("fairseq_ctx.analysis.dc_divergence")


HEAD_REDUCTIONS = {
    "max": "element-wise max over heads, renormalised over keys (Eq. 10)",
    "peak": "per query, the head with the highest peak weight, taken whole (Eq. 10)",
}


def head_max_distribution(alpha: torch.Tensor) -> torch.Tensor:
    """Eq. 10, ``max`` reading: element-wise max over heads, renormalised over
    keys. alpha: B x H x T x S -> B x T x S."""
    a = alpha.max(dim=1).values
    return a / a.sum(dim=-1, keepdim=True).clamp_min(1e-12)


def head_peak_distribution(alpha: torch.Tensor) -> torch.Tensor:
    """Eq. 10, ``peak`` reading: for every query the distribution of the head
    whose largest weight is highest (the first such head on a tie).
    alpha: B x H x T x S -> B x T x S."""
    head = alpha.max(dim=-1).values.argmax(dim=1)  # B x T
    index = head[:, None, :, None].expand(-1, 1, -1, alpha.size(-1))
    return alpha.gather(1, index).squeeze(1)


def reduce_heads(alpha: torch.Tensor, how: str = "max") -> torch.Tensor:
    if how == "max":
        return head_max_distribution(alpha)
    if how == "peak":
        return head_peak_distribution(alpha)
    raise ValueError(f"head reduction {how!r}: choose among {', '.join(HEAD_REDUCTIONS)}")


def kl_divergence(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Eq. 12 with 0 log 0 = 0, over the last dimension (nats)."""
    import torch

    return (torch.xlogy(p, p) - torch.xlogy(p, q)).sum(dim=-1)


def js_divergence(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Eq. 11 over the last dimension (nats, in [0, ln 2])."""
    m = 0.5 * (p + q)
    return 0.5 * kl_divergence(p, m) + 0.5 * kl_divergence(q, m)


def layer_divergences(alphas: List[torch.Tensor], src_mask: torch.Tensor, head_reduction: str = "max"):
    """Sum of per-token JS divergences for each DC layer of one batch.

    alphas: per DC layer, B x 2 x H x T x T ([alpha_l, alpha_g]: the
    ``last_readout["alpha"]`` of its DC module, fairseq_ctx.modules.readout);
    src_mask: B x T, True at real tokens (the queries counted; pad keys carry
    no weight already). Returns (sums per layer, #tokens)."""
    import torch

    sums = []
    mask = src_mask.to(torch.float64)
    for alpha in alphas:
        a = alpha.to(torch.float64)
        alpha_l = reduce_heads(a[:, 0], head_reduction)
        alpha_g = reduce_heads(a[:, 1], head_reduction)
        dv = js_divergence(alpha_g, alpha_l)  # B x T
        sums.append(float((dv * mask).sum()))
    return sums, int(src_mask.sum())


def analyse_model(model, task, subset: str, cfg, limit: int = 0, head_reduction: str = "max") -> Dict:
    import torch
    from fairseq import utils

    from fairseq_ctx.modules.readout import reading

    encoder = model.encoder
    if not hasattr(encoder, "dc_modules"):
        raise ValueError("the checkpoint is not a transformer_dc model (no DC encoder)")
    dc_layers = list(encoder.dc_layers)
    if not dc_layers:
        raise ValueError("the checkpoint has no DC encoder layers (--dc-encoder-layers none): nothing to analyse")
    itr = generation_tool_batches(task, cfg, model, subset)
    use_cuda = torch.cuda.is_available() and not cfg.common.cpu
    totals = [0.0] * len(dc_layers)
    n_tokens = n_sents = 0
    modules = encoder.dc_modules()  # one per DC layer, bottom to top
    # each module's last_readout["alpha"]: B x 2 x H x T x T of the last
    # forward (fairseq_ctx.modules.readout), dropped after the block
    with reading(encoder), torch.no_grad():
        for sample in itr:
            if use_cuda:
                sample = utils.move_to_cuda(sample)
            src_tokens = sample["net_input"]["src_tokens"]
            encoder(src_tokens, src_lengths=sample["net_input"]["src_lengths"])
            alphas = [m.last_readout["alpha"] for m in modules]
            sums, ntok = layer_divergences(alphas, src_tokens.ne(encoder.padding_idx), head_reduction)
            totals = [t + s for t, s in zip(totals, sums)]
            n_tokens += ntok
            n_sents += src_tokens.size(0)
            if limit and n_sents >= limit:
                break
    if n_tokens == 0:
        raise ValueError(f"subset {subset!r} has no source tokens")
    dv = {str(layer + 1): totals[i] / n_tokens for i, layer in enumerate(dc_layers)}
    return {
        "kernel_size": encoder.dc_modules()[0].kernel_size,
        "encoder_layers": len(encoder.layers),
        "dc_encoder_layers": [layer + 1 for layer in dc_layers],
        "dv": dv,
        "E_d": sum(dv.values()) / len(dv),
        "num_sentences": n_sents,
        "num_tokens": n_tokens,
    }


def plot(results: List[Dict], path: str):
    import matplotlib

    matplotlib.use("Agg")
    logging.getLogger("matplotlib").setLevel(logging.WARNING)  # font-manager debug noise
    import matplotlib.pyplot as plt

    fig, (ax_a, ax_b) = plt.subplots(1, 2, figsize=(10, 4))
    labels = []
    for res in results:
        label = f"f={res['kernel_size']} ({os.path.basename(res['path'])})"
        labels.append(label)
        layers = [int(k) for k in res["dv"]]
        ax_a.plot(layers, list(res["dv"].values()), marker="o", label=label)
    ax_a.set_xticks(sorted({int(k) for r in results for k in r["dv"]}))
    ax_a.set_xlabel("encoder layer l")
    ax_a.set_ylabel("dv^l = JS(alpha_g || alpha_l) [nats]")
    ax_a.set_title("(a) divergence per encoder layer")
    ax_a.legend(fontsize=7)
    ax_b.bar(range(len(results)), [r["E_d"] for r in results])
    ax_b.set_xticks(range(len(results)))
    ax_b.set_xticklabels([f"f={r['kernel_size']}" for r in results])
    ax_b.set_ylabel("E_d [nats]")
    ax_b.set_title("(b) mean divergence E_d (Eq. 13)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


PROG = "fairseq-ctx-dc-divergence"


def _add_own_args(parser: argparse.ArgumentParser):
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory for the JSON and PNG")
    parser.add_argument("--limit", type=int, default=0, metavar="N",
                        help="analyse at most about N sentences per checkpoint (0: all)")
    parser.add_argument("--head-reduction", choices=list(HEAD_REDUCTIONS), default="max",
                        help="Eq. 10's reduction over heads: max = element-wise maximum over heads, renormalised "
                             "(default); peak = per query the head with the highest peak weight")


def get_parser() -> argparse.ArgumentParser:
    """fairseq-generate's parser with the analysis' flags (imports fairseq)."""
    return generation_tool_parser(PROG, _add_own_args)


def _quick_parser() -> argparse.ArgumentParser:
    """The flags that matter here, for --help without importing fairseq."""
    return quick_generation_parser(
        PROG, __doc__,
        epilog="example (one curve per checkpoint, e.g. one per --dc-kernel-size, as Figure 4):\n"
               "  fairseq-ctx-dc-divergence data/bin --path runs/dc-k3/ckpt.pt:runs/dc-k5/ckpt.pt \\\n"
               "      --gen-subset valid --out dc_div/    # dc_divergence.json, dc_divergence.png",
        path_help="checkpoint(s), ':'-separated; each analysed on its own", add_own_args=_add_own_args)


def main(argv: Optional[Sequence[str]] = None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if print_quick_help(argv, _quick_parser, get_parser, "fairseq-generate"):
        return None
    install_excepthook()
    setup_logging(stream=sys.stdout)
    args, cfg, task = setup_generation_tool(get_parser, argv)
    results = []
    loaded_subset = False
    for path, model, saved_cfg in generation_tool_models(cfg, task):
        if not loaded_subset:
            task.load_dataset(cfg.dataset.gen_subset, task_cfg=saved_cfg.task)
            loaded_subset = True
        res = analyse_model(model, task, cfg.dataset.gen_subset, cfg, limit=args.limit,
                            head_reduction=args.head_reduction)
        res["path"] = path
        logger.info("%s: E_d = %.4f, dv^l = %s", path, res["E_d"],
                    ", ".join(f"{k}: {v:.4f}" for k, v in res["dv"].items()))
        results.append(res)

    os.makedirs(args.out, exist_ok=True)
    summary = {
        "subset": cfg.dataset.gen_subset,
        "log_base": "e (divergences in nats, bounded by ln 2 = %.4f)" % math.log(2),
        "head_reduction": args.head_reduction,
        "head_reduction_meaning": HEAD_REDUCTIONS[args.head_reduction],
        "checkpoints": results,
    }
    json_path = os.path.join(args.out, "dc_divergence.json")
    with open(json_path, "w") as f:
        json.dump(summary, f, indent=2)
    png_path = os.path.join(args.out, "dc_divergence.png")
    plot(results, png_path)
    logger.info("wrote %s and %s", json_path, png_path)
    return summary


if __name__ == "__main__":
    main()
