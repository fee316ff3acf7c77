"""``fairseq-ctx-context-usage``: how much a checkpoint uses its context.

    fairseq-ctx-context-usage DATA-BIN --path CKPT [--gen-subset test] \\
        [--context-size 1] [--concat-context] [--results usage.json] \\
        [--format voita --src S --dst D --json J --bpe sentencepiece --sentencepiece-model M]

1. **CXMI** (:mod:`fairseq_ctx.evaluation.cxmi`): every reference token of
   ``--gen-subset`` scored by teacher forcing (fairseq's ``SequenceScorer``,
   the scores ``fairseq-generate --score-reference`` prints) under four
   contexts the document task builds: the *true* one (``--context-mode
   previous``), *none* (``--context-size 0``: the empty context a
   document's first sentence gets, whatever the architecture: no
   ``ctx_tokens`` rows for the context-aware models, the source alone
   without separator for ``--concat-context``), *shuffled*
   (``--shuffle-context``: a derangement, every sentence gets another
   sentence's context) and *random* (``--context-mode random``). CXMI of
   the true context against each of the other three, in bits and nats,
   with a bootstrap 95% interval over sentences; per sentence; and the
   ``--top`` tokens with the largest point-wise CXMI (against none), with
   their sentences.
2. **Contrastive accuracy** (given a test set in the flags of
   ``fairseq-ctx-contrastive``): the set scored with its true context, with
   every group's context taken from another group (a derangement), and
   with none; broken down by every key the set records (antecedent
   distance for ContraPro).

A sentence-level model (plain ``transformer`` under the document task)
ignores its context: every CXMI is exactly 0 and the three accuracies are
equal. Models that take target context (``--target-context``) are refused:
their reference prefix is scored too, which CXMI does not define.
"""
import argparse
import json
import logging
import sys
from dataclasses import replace
from typing import Dict, List

import numpy as np

from fairseq_ctx.cli import BPE_EXAMPLES, TOKENIZER_EXAMPLES, parse_with_encoders
from fairseq_ctx.errors import FairseqCtxError, install_excepthook

logger = logging.getLogger("fairseq_ctx.context_usage")

# name -> changes to the task's configuration
CONDITIONS = {
    "true": {"context_mode": "previous", "shuffle_context": False},
    "none": {"context_mode": "previous", "shuffle_context": False, "context_size": 0},
    "shuffled": {"context_mode": "previous", "shuffle_context": True},
    "random": {"context_mode": "random", "shuffle_context": False},
}


EXAMPLES = """examples:
  # CXMI of a context model on the test set, report to usage.json
  fairseq-ctx-context-usage data/bible/bin --path runs/study/transformer_ctxenc/checkpoint_last.pt \\
      --task document_translation --context-size 1 --results usage.json
  # with a contrastive set (the flags of fairseq-ctx-contrastive)
  fairseq-ctx-context-usage data/bible/bin --path CKPT --task document_translation --context-size 1 \\
      --format voita --src pronouns.src --dst pronouns.dst --json pronouns.json \\
      --bpe sentencepiece --sentencepiece-model data/bible/spm/spm.model"""


def get_parser():
    p = argparse.ArgumentParser(
        prog="fairseq-ctx-context-usage",
        description="How much a checkpoint uses its context: CXMI (bits) of the true context against none, "
                    "a shuffled and a random one, point-wise CXMI, and contrastive accuracy with true, "
                    "shuffled and no context. See docs/evaluation.md.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", help="data-bin directory (fairseq-preprocess output with .docids or context files)")
    p.add_argument("--path", required=True, help="checkpoint(s), ':'-separated for an ensemble")
    p.add_argument("--gen-subset", default="test", help="split scored for CXMI (default: test)")
    p.add_argument("--results", help="write the report here (JSON)")
    p.add_argument("--top", type=int, default=20, help="tokens with the largest P-CXMI to list (default 20)")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples (default 1000)")
    p.add_argument("--seed", type=int, default=1, help="seed of the bootstrap and of the shuffled/random contexts")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-tokens", type=int)
    p.add_argument("--cpu", action="store_true", help="score on CPU even where CUDA is available")
    g = p.add_argument_group("model and task (overrides of the checkpoint's task flags)")
    g.add_argument("--task", help="must equal the checkpoint's task (checked)")
    g.add_argument("--context-size", type=int, help="context sentences given to the model")
    g.add_argument("--concat-context", action=argparse.BooleanOptionalAction, default=None)
    g.add_argument("--source-lang")
    g.add_argument("--target-lang")
    g.add_argument("--tokenizer", metavar="NAME", help=f"tokenize the contrastive set's raw text before --bpe; "
                   f"{TOKENIZER_EXAMPLES}")
    g.add_argument("--bpe", metavar="NAME", help=f"subword-split the contrastive set's text; {BPE_EXAMPLES}")
    g.add_argument("--source-bpe-model", help="the source side's subword model, if it differs")
    g.add_argument("--target-bpe-model", help="the target side's subword model, if it differs")
    c = p.add_argument_group("contrastive set (optional; the flags of fairseq-ctx-contrastive)")
    c.add_argument("--format", choices=["voita", "contrapro", "bawden"])
    c.add_argument("--src")
    c.add_argument("--dst")
    c.add_argument("--json", help="the test set's JSON")
    c.add_argument("--src-context")
    c.add_argument("--tgt-context")
    c.add_argument("--context-lines", type=int)
    c.add_argument("--segment-separator", default="_eos")
    c.add_argument("--max-groups", type=int)
    return p


def parse_args(argv=None):
    parser = get_parser()
    args = parse_with_encoders(parser, argv)
    for name in ("top", "bootstrap", "batch_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.context_size is not None and args.context_size < 1:
        parser.error(f"--context-size must be >= 1 (the true context; 'none' is measured anyway), "
                     f"got {args.context_size}")
    given = [f for f in ("src", "dst", "json") if getattr(args, f)]
    if given and args.format is None:
        parser.error(f"--{given[0]}: a contrastive set needs --format")
    return args


def _configured(task, changes: Dict):
    """Set ``changes`` on the task's configuration; returns the old values."""
    old = {k: getattr(task.cfg, k) for k in changes}
    for k, v in changes.items():
        setattr(task.cfg, k, v)
    return old


def score_subset(models, task, subset: str, condition: str, args, use_cuda: bool) -> List[np.ndarray]:
    """Log-probabilities (nats) of every reference token of ``subset``
    (``</s>`` included), one array per sentence in id order, with the
    context of ``condition``."""
    import torch
    from fairseq import utils
    from fairseq.sequence_scorer import SequenceScorer

    from fairseq_ctx.progress import bar

    changes = dict(CONDITIONS[condition])
    changes["context_seed"] = args.seed
    if condition != "none":
        changes.pop("context_size", None)
    old = _configured(task, changes)
    try:
        task.load_dataset(subset)
        dataset = task.dataset(subset)
        itr = task.get_batch_iterator(
            dataset=dataset, max_tokens=args.max_tokens, max_sentences=args.batch_size,
            max_positions=utils.resolve_max_positions(task.max_positions(), *[m.max_positions() for m in models]),
            required_batch_size_multiple=1, num_workers=0, seed=args.seed).next_epoch_itr(shuffle=False)
        scorer = SequenceScorer(task.target_dictionary)
        out: Dict[int, np.ndarray] = {}
        with torch.no_grad(), bar(len(dataset), f"scoring, {condition} context", unit="sent") as progress:
            for sample in itr:
                sample = utils.move_to_cuda(sample) if use_cuda else sample
                hypos = scorer.generate(models, task.model_input(models, sample))
                for sid, h in zip(sample["id"].cpu().tolist(), hypos):
                    out[sid] = h[0]["positional_scores"].float().cpu().numpy()
                progress.update(len(hypos))
    finally:
        _configured(task, old)
    if sorted(out) != list(range(len(dataset))):
        raise FairseqCtxError(f"--gen-subset {subset}: {len(out)} of {len(dataset)} sentences scored "
                              "(a sentence longer than the model takes?)")
    return [out[i] for i in range(len(dataset))]


def cxmi_report(models, task, args, use_cuda) -> Dict:
    from fairseq_ctx.evaluation.cxmi import cxmi, top_pcxmi

    scores = {c: score_subset(models, task, args.gen_subset, c, args, use_cuda) for c in CONDITIONS}
    report = {c: cxmi(scores["true"], scores[c], args.bootstrap, args.seed) for c in ("none", "shuffled", "random")}
    dataset = task.dataset(args.gen_subset)  # the last one loaded: the true context's configuration restored
    tgt_dict, src_dict = task.target_dictionary, task.source_dictionary
    top = top_pcxmi(scores["true"], scores["none"], args.top)
    for t in top:
        item = dataset[t["sentence"]]
        tokens = item["target"].tolist()
        t["token"] = tgt_dict[tokens[t["position"]]]
        t["target"] = tgt_dict.string(item["target"])
        t["source"] = src_dict.string(item["source"])
    report["top_pcxmi_vs_none"] = top
    return report


def _deranged_groups(groups, seed: int):
    """Every group's candidates with the source and target context of
    another group (a derangement of the groups, seeded)."""
    from fairseq_ctx.data.document_context_dataset import derange

    order = derange(np.arange(len(groups)), np.random.default_rng(seed))
    out = []
    for g, donor in zip(groups, order):
        ctx = groups[int(donor)].candidates[0]
        out.append(replace(g, candidates=[replace(c, source_context=list(ctx.source_context),
                                                  target_context=list(ctx.target_context))
                                          for c in g.candidates]))
    return out


def contrastive_report(models, task, args, use_cuda) -> Dict:
    from fairseq_ctx.contrastive.accuracy import evaluate
    from fairseq_ctx.contrastive.command import build_side_encoders
    from fairseq_ctx.contrastive.readers import read_groups
    from fairseq_ctx.contrastive.scorer import ModelScorer, score_groups

    args.ties, args.tie_tolerance = "official", 0.0
    groups = read_groups(args)
    encode_source, encode_target = build_side_encoders(args)
    scorer = ModelScorer(models, task, encode_source, encode_target, context_size=task.cfg.context_size,
                         batch_size=args.batch_size, device="cuda" if use_cuda else "cpu",
                         max_tokens=args.max_tokens)
    variants = {
        "true": groups,
        "shuffled": _deranged_groups(groups, args.seed),
        "none": [replace(g, candidates=[replace(c, source_context=[], target_context=[]) for c in g.candidates])
                 for g in groups],
    }
    return {name: evaluate(gs, score_groups(scorer, gs)) for name, gs in variants.items()}


def format_report(res: Dict) -> str:
    lines = [f"{res['path']} on {res['gen_subset']}: {res['sentences']} sentences, {res['tokens']} reference "
             f"tokens; context {res['context']}",
             "CXMI of the true context (bits per token, 95% bootstrap interval over sentences):"]
    for c in ("none", "shuffled", "random"):
        r = res["cxmi"][c]
        lines.append(f"  against {c:<8} {r['cxmi_bits']:+.4f} [{r['ci95_bits'][0]:+.4f}, {r['ci95_bits'][1]:+.4f}]"
                     f"  ({r['cxmi_nats']:+.4f} nats)")
    lines.append(f"tokens with the largest P-CXMI against no context (bits):")
    for t in res["cxmi"]["top_pcxmi_vs_none"]:
        lines.append(f"  {t['pcxmi_bits']:+.3f}  '{t['token']}'  sentence {t['sentence']}: {t['target']}")
    if "contrastive" in res:
        lines.append("contrastive accuracy: " + ", ".join(
            f"{name} context {r['accuracy']:.4f} ({r['correct']:g}/{r['groups']})"
            for name, r in res["contrastive"].items()))
    return "\n".join(lines)


def main(argv=None):
    install_excepthook()
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
                        level=logging.WARNING, stream=sys.stderr)
    args = parse_args(argv)
    import torch

    from fairseq_ctx.contrastive.command import load
    from fairseq_ctx.data.context_input import input_mode

    models, task = load(args)
    if not hasattr(task.cfg, "context_size"):
        raise FairseqCtxError(f"--path {args.path}: trained without the document task; context usage "
                              "needs --task document_translation")
    if getattr(task.cfg, "target_context", False):
        raise FairseqCtxError(f"--path {args.path}: a --target-context model scores its reference prefix "
                              "too; CXMI is not defined for it here")
    if task.cfg.context_size < 1:
        raise FairseqCtxError("--context-size: the checkpoint's task gives no context (0); pass "
                              "--context-size 1 or more")
    use_cuda = torch.cuda.is_available() and not args.cpu
    models = [m.eval().cuda() if use_cuda else m.eval() for m in models]
    mode = input_mode(task.cfg, models)
    res = {"path": args.path, "gen_subset": args.gen_subset, "context_size": task.cfg.context_size,
           "context": {"concat": "concatenated to the source", "separate": "separate input",
                       "none": "ignored (sentence-level model)"}[mode],
           "reference": "Fernandes et al. 2021 (CXMI), 2023 (P-CXMI)",
           "units": "bits per reference token (nats beside); </s> included"}
    res["cxmi"] = cxmi_report(models, task, args, use_cuda)
    res["sentences"], res["tokens"] = res["cxmi"]["none"]["sentences"], res["cxmi"]["none"]["tokens"]
    if args.format:
        res["contrastive"] = contrastive_report(models, task, args, use_cuda)
    print(format_report(res))
    if args.results:
        with open(args.results, "w", encoding="utf-8") as f:
            json.dump(res, f, indent=1)
    return res


def cli_main():
    """The console script: the report is printed and written, nothing returned
    (setuptools' wrapper would print a returned value)."""
    main()


if __name__ == "__main__":
    cli_main()
