"""Read out the context gates of trained transformer_ctxsan models (Yang et
al., AAAI 2019, Figures 2-4).

Runs each model teacher-forced over a binarized subset and writes, in ``--out``:

* ``gates.json``: per model, side and layer the mean lambda_Q and lambda_K
  (Eq. 5-6) over all non-padding positions of the subset (Figure 2; with
  ``--ctxsan-side both``, Figure 3's source vs target comparison). A layer
  without context (layer 1 of a deep-only model) has ``null`` means.
* ``gates.png``: the same as line plots, one panel per model and side,
  lambda_Q blue and lambda_K red, like Figure 2.
* ``tokens.jsonl``: one line per model and sentence with the per-token
  lambdas of every layer, for Figure 4 (weights by part of speech): join it
  with a tagger's output on ``tokens`` (the source subwords as in the
  dictionary, end-of-sentence included). Decoder-side lambdas are listed
  against ``decoder_tokens``, the decoder *input* at each step (the
  end-of-sentence start symbol, then the reference target shifted right),
  which is the token whose representation the gate weighs.

Usage::

    python3 -m fairseq_ctx.analysis.ctxsan_gates --path CKPT[:CKPT2...] DATA-BIN \\
        --gen-subset valid --out DIR [--max-tokens 4000] [--cpu]

Several checkpoints separated by ``:`` (say, one per context type) become
several panels of one figure.
"""
from __future__ import annotations  # torch and fairseq are imported by the analysis, not for --help

import argparse
import json
import os
from typing import TYPE_CHECKING, Dict, List

from fairseq_ctx.cli import check_checkpoints, check_data_dir, load_checkpoint, set_tool_threads
from fairseq_ctx.errors import CheckpointMismatchError, install_excepthook

if TYPE_CHECKING:
    import torch

SLOTS = ("q", "k")


def get_parser():
    p = argparse.ArgumentParser(
        prog="fairseq-ctx-ctxsan-gates", description=__doc__.split("\n\n")[0],
        epilog="example (one panel per checkpoint, e.g. one per context type):\n"
               "  fairseq-ctx-ctxsan-gates data/bin --path runs/global/ckpt.pt:runs/deep/ckpt.pt \\\n"
               "      --gen-subset valid --out gates/    # gates.json, gates.png, tokens.jsonl",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", help="binarized data directory (fairseq-preprocess output)")
    p.add_argument("--path", required=True, help="checkpoint(s), separated by ':'")
    p.add_argument("--gen-subset", default="valid", help="subset to run over (default: valid)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--max-tokens", type=int, default=4000, help="tokens per batch")
    p.add_argument("--max-sentences", type=int, default=None, help="sentences per batch")
    p.add_argument("--cpu", action="store_true", help="run on CPU even if CUDA is available")
    return p


def _strip(seq: torch.Tensor, keep: torch.Tensor) -> List[float]:
    return [round(float(v), 5) for v in seq[keep].tolist()]


def analyse_model(path: str, data: str, subset: str, max_tokens: int, max_sentences, use_cuda: bool,
                  token_out) -> Dict:
    """Run one checkpoint over ``subset``; write its per-token lines to
    ``token_out`` and return its per-layer means."""
    import torch
    from fairseq import utils

    from fairseq_ctx.modules.readout import reading

    model, task, _ = load_checkpoint(path, data, "cuda" if use_cuda else "cpu")
    from fairseq_ctx.models.transformer_ctxsan import TransformerCtxSanModel

    if not isinstance(model, TransformerCtxSanModel):
        raise CheckpointMismatchError(f"--path {path}: not a transformer_ctxsan checkpoint ({type(model).__name__})")
    if model.args.ctxsan_no_gate:
        raise CheckpointMismatchError(f"--path {path}: trained with --ctxsan-no-gate, so it has no gates to read")
    attentions = model.ctxsan_attentions()

    # sums[side][layer][slot] and token counts, over non-padding positions;
    # seen[side][layer]: the gates the layer has (its contextualised Q / K)
    sums = {side: [{s: 0.0 for s in SLOTS} for _ in mods] for side, mods in attentions.items()}
    counts = {side: [0 for _ in mods] for side, mods in attentions.items()}
    seen = {side: [set() for _ in mods] for side, mods in attentions.items()}

    task.load_dataset(subset)
    dataset = task.dataset(subset)
    itr = task.get_batch_iterator(
        dataset=dataset, max_tokens=max_tokens, max_sentences=max_sentences,
        max_positions=utils.resolve_max_positions(task.max_positions(), model.max_positions()),
        ignore_invalid_inputs=True, required_batch_size_multiple=1,
    ).next_epoch_itr(shuffle=False)
    src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
    # each attention module's last_readout: {"q": T x B, "k": T x B} of the
    # last forward (fairseq_ctx.modules.readout), dropped after the block
    with reading(model), torch.no_grad():
        for sample in itr:
            if not sample:
                continue
            if use_cuda:
                sample = utils.move_to_cuda(sample)
            net_input = sample["net_input"]
            model(**net_input)
            keep = {
                "encoder": net_input["src_tokens"].ne(src_dict.pad()).t(),  # T x B
                "decoder": net_input["prev_output_tokens"].ne(tgt_dict.pad()).t(),
            }
            gates = {side: [dict(att.last_readout) if att.has_context else {} for att in mods]
                     for side, mods in attentions.items()}
            for side, layers in gates.items():
                for li, g in enumerate(layers):
                    if not g:
                        continue
                    seen[side][li].update(g)
                    counts[side][li] += int(keep[side].sum())
                    for s, lam in g.items():
                        sums[side][li][s] += float(lam[keep[side]].sum())
            for b, sid in enumerate(sample["id"].tolist()):
                src = net_input["src_tokens"][b]
                prev = net_input["prev_output_tokens"][b]
                line = {
                    "id": sid,
                    "model": path,
                    "tokens": [src_dict[t] for t in src[src.ne(src_dict.pad())].tolist()],
                    "decoder_tokens": [tgt_dict[t] for t in prev[prev.ne(tgt_dict.pad())].tolist()],
                }
                for side, layers in gates.items():
                    kb = keep[side][:, b]
                    line[side] = {
                        f"lambda_{s}": [(_strip(g[s][:, b], kb) if s in g else None) for g in layers]
                        for s in SLOTS
                    }
                token_out.write(json.dumps(line) + "\n")

    args = model.args
    result = {
        "path": path,
        "context": args.ctxsan_context,
        "side": args.ctxsan_side,
        "contextualize": args.ctxsan_contextualize,
        "sides": {},
    }
    for side in attentions:
        rows = []
        for li in range(len(attentions[side])):
            n = counts[side][li]
            row = {"layer": li + 1, "positions": n}
            for s in SLOTS:
                contextualised = s in seen[side][li]
                row[f"lambda_{s}"] = (sums[side][li][s] / n) if (n and contextualised) else None
            rows.append(row)
        result["sides"][side] = rows
    return result


def plot(summary: Dict, png: str):
    import logging

    import matplotlib

    logging.getLogger("matplotlib").setLevel(logging.WARNING)  # its font search logs at DEBUG
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(m, side) for m in summary["models"] for side in m["sides"]]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 3.2), squeeze=False)
    for ax, (m, side) in zip(axes[0], panels):
        rows = m["sides"][side]
        for s, colour in (("q", "tab:blue"), ("k", "tab:red")):
            pts = [(r["layer"], r[f"lambda_{s}"]) for r in rows if r[f"lambda_{s}"] is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=colour,
                        label=f"$\\lambda_{s.upper()}$")
        ax.set_title(f"{m['context']} ({side})", fontsize=9)
        ax.set_xlabel("layer")
        ax.set_ylim(0, 1)
        ax.set_xticks([r["layer"] for r in rows])
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("mean gate")
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)


def main(argv=None):
    install_excepthook()
    args = get_parser().parse_args(argv)
    check_checkpoints(args.path)
    check_data_dir(args.data, subsets=[args.gen_subset])
    os.makedirs(args.out, exist_ok=True)
    import torch

    set_tool_threads()
    use_cuda = torch.cuda.is_available() and not args.cpu
    summary = {"subset": args.gen_subset, "data": args.data, "models": []}
    tokens = os.path.join(args.out, "tokens.jsonl")
    try:  # a checkpoint refused after others were read leaves no partial tokens.jsonl
        with open(tokens + ".part", "w") as token_out:
            for path in args.path.split(":"):
                summary["models"].append(
                    analyse_model(path, args.data, args.gen_subset, args.max_tokens, args.max_sentences, use_cuda,
                                  token_out)
                )
    except BaseException:
        os.remove(tokens + ".part")
        raise
    os.replace(tokens + ".part", tokens)
    with open(os.path.join(args.out, "gates.json"), "w") as f:
        json.dump(summary, f, indent=2)
    plot(summary, os.path.join(args.out, "gates.png"))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
