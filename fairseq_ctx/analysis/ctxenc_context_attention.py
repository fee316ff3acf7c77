"""Which source words attend to context most in a transformer_ctxenc model
(Voita et al., ACL 2018, Section 6.1 and its top-10 table: "it", "yours",
"ones", "you", "I", "yes", ...).

In the last source-encoder layer, c = g * c_s + (1 - g) * c_c mixes the
self-attention output c_s with the attention to context c_c through an
element-wise gate g (``CtxEncGatedEncoderLayer``).  The *context share* of a
source token is the mean over the model's channels of ``1 - g`` at that
token: 0 = context ignored, 1 = only context.  For every source token type
(an entry of the model's dictionary, so a subword unit when the data is BPE
or sentencepiece) the script averages the context share and the token's
position in its sentence (0-based) over all its occurrences in a split,
with the context ``--task document_translation`` gives (so the same flags:
``--context-size``, ``--context-mode``, ``--shuffle-context``).  EOS and
padding are left out.

Two rankings, as the paper's analysis needs both: ``ranking`` over every
occurrence, and ``ranking_non_initial`` over the occurrences that are not
sentence-initial (position > 0), since words that open a sentence ("yes",
"yeah", "well") get a high share from their position alone and fill the
first table (the paper names them as ambiguous *because* they are
sentence-initial).  A type is ranked when it has at least ``--min-count``
occurrences counted by that ranking (default 10).  The threshold of 10 and
the second ranking are the paper's Section 5.1 as recalled, NOT checked
against its text: the summary in ``shared/papers`` names neither and the full
text was not at hand.  So the threshold is a flag, both rankings are always
written, and the output states the settings.  A
"word" here is a dictionary entry, i.e. a subword unit with BPE data.

Writes JSON (``--out``; per-type mean share, mean position and count, plus
the overall mean share, the mean share of sentences with and without
context sentences) and prints the ``--top-k`` table.

Usage::

    python3 -m fairseq_ctx.analysis.ctxenc_context_attention DATA-BIN --path CKPT \\
        --task document_translation --gen-subset test --out ctx_attention.json \\
        [--top-k 10] [--min-count 10] [--max-tokens 4000] [--cpu]

Every flag of ``fairseq-generate`` is accepted (``--help-fairseq`` lists them).
"""
from __future__ import annotations  # torch is imported by the analysis, not for --help

import argparse
import json
import logging
import sys
from typing import TYPE_CHECKING, Dict, Optional, Sequence

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

logger = logging.getLogger("fairseq_ctx.analysis.ctxenc_context_attention")


def context_share(gate: torch.Tensor) -> torch.Tensor:
    """Mean over channels of 1 - g: gate T x B x C -> B x T."""
    return (1.0 - gate).mean(dim=-1).transpose(0, 1)


class ShareAccumulator:
    """Per-type sums of context share, position and counts (vectorised with
    ``bincount``)."""

    def __init__(self, vocab_size: int):
        import torch

        self.share = torch.zeros(vocab_size, dtype=torch.float64)
        self.position = torch.zeros(vocab_size, dtype=torch.float64)
        self.count = torch.zeros(vocab_size, dtype=torch.float64)
        # the same sums over the non-initial occurrences (position > 0)
        self.share_ni = torch.zeros(vocab_size, dtype=torch.float64)
        self.count_ni = torch.zeros(vocab_size, dtype=torch.float64)
        self.with_ctx = [0.0, 0]
        self.without_ctx = [0.0, 0]

    def add(self, tokens: torch.Tensor, share: torch.Tensor, keep: torch.Tensor,
            has_context: torch.Tensor):
        """tokens, share, keep: B x T (keep: real, non-EOS tokens); has_context: B."""
        import torch

        position = (keep.long().cumsum(dim=1) - 1).double()
        ids = tokens[keep]
        n = self.count.numel()
        self.share += torch.bincount(ids, weights=share[keep].double(), minlength=n).cpu()
        self.position += torch.bincount(ids, weights=position[keep], minlength=n).cpu()
        self.count += torch.bincount(ids, minlength=n).double().cpu()
        later = keep & (position > 0)
        ids_ni = tokens[later]
        self.share_ni += torch.bincount(ids_ni, weights=share[later].double(), minlength=n).cpu()
        self.count_ni += torch.bincount(ids_ni, minlength=n).double().cpu()
        per_sent = (share * keep).sum(1).double()
        per_len = keep.sum(1)
        for flag, acc in ((has_context, self.with_ctx), (~has_context, self.without_ctx)):
            acc[0] += float(per_sent[flag].sum())
            acc[1] += int(per_len[flag].sum())

    def result(self, dictionary, min_count: int) -> Dict:
        import torch

        total = float(self.count.sum())
        if total == 0:
            raise ValueError("no source tokens to analyse")
        types = {}
        for i in torch.nonzero(self.count).flatten().tolist():
            c, c_ni = float(self.count[i]), float(self.count_ni[i])
            types[dictionary[i]] = {
                "mean_context_share": float(self.share[i]) / c,
                "mean_position": float(self.position[i]) / c,
                "count": int(c),
                "mean_context_share_non_initial": float(self.share_ni[i]) / c_ni if c_ni else None,
                "count_non_initial": int(c_ni),
            }

        def rank(share_key, count_key):
            return sorted((w for w, v in types.items() if v[count_key] >= min_count),
                          key=lambda w: -types[w][share_key])
        mean = lambda acc: acc[0] / acc[1] if acc[1] else None  # noqa: E731
        return {
            "num_tokens": int(total),
            "mean_context_share": float(self.share.sum()) / total,
            "mean_context_share_with_context": mean(self.with_ctx),
            "mean_context_share_empty_context": mean(self.without_ctx),
            "min_count": min_count,
            "ranking": rank("mean_context_share", "count"),
            "ranking_non_initial": rank("mean_context_share_non_initial", "count_non_initial"),
            "types": types,
        }


def analyse(model, task, subset: str, cfg, min_count: int = 10, limit: int = 0) -> Dict:
    import torch
    from fairseq import utils

    from fairseq_ctx.modules.readout import reading

    encoder = model.encoder
    if not getattr(model, "accepts_context", False) or not hasattr(encoder, "ctx_layer"):
        raise ValueError("the checkpoint is not a transformer_ctxenc model")
    gated = encoder.layers[-1]  # CtxEncGatedEncoderLayer
    itr = generation_tool_batches(task, cfg, model, subset)
    use_cuda = torch.cuda.is_available() and not cfg.common.cpu
    dictionary = task.source_dictionary
    acc = ShareAccumulator(len(dictionary))
    n_sents = 0
    # the gated layer's last_readout["gate"]: g of the last forward, T x B x C
    # (fairseq_ctx.modules.readout), dropped after the block
    with reading(gated), torch.no_grad():
        for sample in itr:
            sample = task.model_input([model], sample)
            if use_cuda:
                sample = utils.move_to_cuda(sample)
            net = sample["net_input"]
            encoder(net["src_tokens"], src_lengths=net["src_lengths"], ctx_tokens=net.get("ctx_tokens"))
            tokens = net["src_tokens"]
            keep = tokens.ne(dictionary.pad()) & tokens.ne(dictionary.eos())
            ctx = net.get("ctx_tokens")
            has_context = (ctx.ne(dictionary.pad()) & ctx.ne(dictionary.eos())).any(1) if ctx is not None \
                else torch.zeros(tokens.size(0), dtype=torch.bool, device=tokens.device)
            acc.add(tokens, context_share(gated.last_readout["gate"]), keep, has_context)
            n_sents += tokens.size(0)
            if limit and n_sents >= limit:
                break
    res = acc.result(dictionary, min_count)
    res["num_sentences"] = n_sents
    return res


def format_table(res: Dict, top_k: int) -> str:
    """Both rankings, each under a line saying its setting."""
    lines = []
    for key, share, count, what in (
            ("ranking", "mean_context_share", "count", "all positions"),
            ("ranking_non_initial", "mean_context_share_non_initial", "count_non_initial",
             "sentence-initial position excluded")):
        if key not in res:  # a JSON written before the second ranking existed
            continue
        lines.append(f"top {top_k}, {what}; types with >= {res['min_count']} such occurrences "
                     f"({len(res[key])} ranked):")
        lines.append(f"{'rank':>4}  {'word':<20} {'context share':>13} {'mean pos':>9} {'count':>7}")
        for rank, word in enumerate(res[key][:top_k], 1):
            v = res["types"][word]
            lines.append(f"{rank:>4}  {word:<20} {v[share]:>13.4f} {v['mean_position']:>9.2f} {v[count]:>7d}")
    lines.append(f"all tokens: {res['mean_context_share']:.4f} over {res['num_tokens']} tokens")
    return "\n".join(lines)


PROG = "fairseq-ctx-ctxenc-context-attention"


def _add_own_args(parser: argparse.ArgumentParser):
    parser.add_argument("--out", required=True, metavar="FILE", help="JSON output file")
    parser.add_argument("--top-k", type=int, default=10, metavar="K", help="rows of the printed table")
    parser.add_argument("--min-count", type=int, default=10, metavar="N",
                        help="rank only types seen at least N times (counted per ranking: all occurrences, "
                             "non-initial ones); default 10, the paper's threshold as recalled (unchecked)")
    parser.add_argument("--limit", type=int, default=0, metavar="N", help="about N sentences at most (0: all)")


def get_parser() -> argparse.ArgumentParser:
    """fairseq-generate's parser with the analysis' flags (imports fairseq)."""
    return generation_tool_parser(PROG, _add_own_args)


def _quick_parser() -> argparse.ArgumentParser:
    """The flags that matter here, for --help without importing fairseq."""
    return quick_generation_parser(
        PROG, __doc__,
        epilog="example:\n"
               "  fairseq-ctx-ctxenc-context-attention data/bin --path runs/ctxenc/checkpoint_best.pt \\\n"
               "      --task document_translation --gen-subset test --out ctx_attention.json --top-k 10",
        path_help="a transformer_ctxenc checkpoint", add_own_args=_add_own_args,
        task_help="document_translation, with its flags (--context-size, --context-mode, --shuffle-context, ...)")


def main(argv: Optional[Sequence[str]] = None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if print_quick_help(argv, _quick_parser, get_parser, "fairseq-generate"):
        return None
    install_excepthook()
    setup_logging()
    args, cfg, task = setup_generation_tool(get_parser, argv)
    if args.top_k < 1:
        raise ValueError(f"--top-k must be >= 1, got {args.top_k}")
    _, model, saved_cfg = next(generation_tool_models(cfg, task))  # the first --path only
    task.load_dataset(cfg.dataset.gen_subset, task_cfg=saved_cfg.task)
    res = analyse(model, task, cfg.dataset.gen_subset, cfg, min_count=args.min_count, limit=args.limit)
    res.update(subset=cfg.dataset.gen_subset, path=cfg.common_eval.path,
               context_mode=cfg.task.context_mode, context_size=cfg.task.context_size,
               shuffle_context=cfg.task.shuffle_context,
               settings={"min_count": args.min_count, "ranking": "all occurrences",
                         "ranking_non_initial": "occurrences at position > 0 only (sentence-initial excluded)"},
               definition="context share = mean over channels of (1 - g), g the gate of the last "
                          "source-encoder layer (Voita et al. 2018)")
    with open(args.out, "w") as f:
        json.dump(res, f, indent=2)
    print(format_table(res, args.top_k))
    logger.info("wrote %s", args.out)
    return res


if __name__ == "__main__":
    main()
