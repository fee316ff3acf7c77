"""``fairseq-ctx-context-usage``: how much a checkpoint uses its context.

    fairseq-ctx-context-usage DATA-BIN --path CKPT [--gen-subset test] \\
        [--context-size 1] [--concat-context] [--results usage.json] \\
        [--format voita --src S --dst D --json J --bpe sentencepiece --sentencepiece-model M]

The contexts compared are the four conditions of
:mod:`fairseq_ctx.evaluation.conditions` (true, none, shuffled, random),
each loaded as its own context rule (the task's configuration is never
changed).

1. **CXMI** (:mod:`fairseq_ctx.evaluation.cxmi`): every reference token of
   ``--gen-subset`` scored by teacher forcing (fairseq's ``SequenceScorer``,
   the scores ``fairseq-generate --score-reference`` prints) under each
   condition (*none* is the empty context a document's first sentence
   gets, whatever the architecture: no ``ctx_tokens`` rows for the
   context-aware models, the source alone without separator for
   ``--concat-context``). CXMI of the true context against each of the
   other three, in bits and nats, with a bootstrap 95% interval over
   sentences; per sentence; and the ``--top`` tokens with the largest
   point-wise CXMI (against none), with their sentences.
2. **Contrastive accuracy** (given a test set in the flags of
   ``fairseq-ctx-contrastive``): the set scored under each condition (an
   item's shuffled or random context is another item's); broken down by
   every key the set records (antecedent distance for ContraPro).

3. **Generated accuracy** (with the set, unless ``--no-generated``;
   :mod:`fairseq_ctx.evaluation.contrastive.generated`): each item's source translated
   by beam search with its *own* context (the item's context sentences and
   source decoded in order as one document: a ``--target-context`` model
   gets its own previous translations), the *reference* context (the set's
   target context forced as the prefix; ``--target-context`` models only)
   and *none*; an item that differs from its wrong candidates in one word or
   phrase is right when its translation holds the correct form and not the
   wrong one; the "scores right, translates wrong" matrix crosses that with
   the forced-decoding verdicts.

A sentence-level model (plain ``transformer`` under the document task)
ignores its context: every CXMI is exactly 0 and the accuracies do not
change with the context. For a model that takes target context
(``--target-context``) the previous reference sentences are the decoder's
forced prefix and only the current sentence's tokens are scored (as
Fernandes et al.'s ``docmt_cxmi.py`` scores its target-context models): its
CXMI is that of the source and target context together.
"""
import argparse
import json
import logging
import sys
from dataclasses import replace
from typing import Dict, List

import numpy as np

from fairseq_ctx.cli import (BPE_EXAMPLES, TOKENIZER_EXAMPLES, check_checkpoints, check_data_dir, check_encoder_files,
                             check_file, check_output, parse_with_encoders, set_tool_threads)
from fairseq_ctx.errors import FairseqCtxError, install_excepthook
from fairseq_ctx.evaluation.conditions import CONDITIONS, CONTROLS, GENERATION, NONE, TRUE, Condition

logger = logging.getLogger("fairseq_ctx.evaluation.context_usage")


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
    c.add_argument("--ties", choices=["official", "wrong", "right", "half"], default="official",
                   help="credit of a tie for the best score (as fairseq-ctx-contrastive; default official)")
    gen = p.add_argument_group("generated accuracy (with a contrastive set): the decoding of each item")
    gen.add_argument("--beam", type=int, default=5, help="beam size (default 5, as fairseq-generate)")
    gen.add_argument("--max-len-a", type=float, default=0.0, help="as fairseq-generate (default 0)")
    gen.add_argument("--max-len-b", type=int, default=200, help="as fairseq-generate (default 200)")
    gen.add_argument("--lenpen", type=float, default=1.0, help="as fairseq-generate (default 1)")
    gen.add_argument("--no-generated", action="store_true",
                     help="score the contrastive set only: no translating, no generated accuracy")
    a = p.add_argument_group("attribution: which context words each context-sensitive token relies on "
                             "(PECoRe; fairseq_ctx/evaluation/attribution.py)")
    a.add_argument("--attribution", metavar="JSON",
                   help="write the attribution report here: the contrastive set's items (their true "
                        "candidates), else the first --attribution-max-items sentences of --gen-subset")
    a.add_argument("--attribution-html", metavar="HTML", help="and a self-contained page of it here")
    a.add_argument("--attribution-metric", choices=["kl", "pcxmi"], default="kl",
                   help="what makes a target token context-sensitive (default kl, as PECoRe)")
    a.add_argument("--attribution-std", type=float, default=1.0,
                   help="sensitive: metric over mean + this many standard deviations (default 1)")
    a.add_argument("--attribution-scope", choices=["set", "item"], default="set",
                   help="the mean and deviation over every analysed token (set, default) or each item's")
    a.add_argument("--attribution-min-bits", type=float, default=1e-4,
                   help="and over this floor (bits; default 1e-4: a model that ignores its context gets none)")
    a.add_argument("--attribution-aggregate", choices=["norm", "sum"], default="norm",
                   help="a token's score from its gradient x input vector: L2 norm (default, as PECoRe) or sum (signed)")
    a.add_argument("--attribution-max-items", type=int, default=200,
                   help="sentences of --gen-subset analysed without a contrastive set (default 200)")
    a.add_argument("--attribution-groups", choices=["all", "context-decided"], default="all",
                   help="with a contrastive set: every group (default), or those the model scores right with "
                        "the true context and wrong with none (the items its context decides)")
    return p


def parse_args(argv=None):
    parser = get_parser()
    args = parse_with_encoders(parser, argv)
    if args.attribution_html and not args.attribution:
        parser.error("--attribution-html: give --attribution JSON too")
    if args.attribution_groups != "all" and not args.format:
        parser.error(f"--attribution-groups {args.attribution_groups}: needs a contrastive set (--format ...)")
    for name in ("top", "bootstrap", "batch_size", "beam", "attribution_max_items"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.context_size is not None and args.context_size < 1:
        parser.error(f"--context-size must be >= 1 (the true context; 'none' is measured anyway), "
                     f"got {args.context_size}")
    args.tie_tolerance = 0.0  # scores compared exactly, as the suites' scripts do
    given = [f for f in ("src", "dst", "json") if getattr(args, f)]
    if given and args.format is None:
        parser.error(f"--{given[0]}: a contrastive set needs --format")
    return args


def score_subset(models, task, subset: str, condition: Condition, args, use_cuda: bool):
    """``(scores, dataset)``: the log-probabilities (nats) of every reference
    token of ``subset`` (``</s>`` included), one array per sentence in id
    order, with the context of ``condition``, and the dataset scored. With
    target context the target is ``t_prev <sep> y </s>``: only the tokens of
    ``y </s>`` are kept (the prefix is the condition's context)."""
    import torch
    from fairseq import utils
    from fairseq.sequence_scorer import SequenceScorer

    from fairseq_ctx.progress import bar

    task.load_dataset(subset, context_rule=condition.rule(task.context_rule, args.seed))
    dataset = task.dataset(subset)
    itr = task.get_batch_iterator(
        dataset=dataset, max_tokens=args.max_tokens, max_sentences=args.batch_size,
        max_positions=utils.resolve_max_positions(task.max_positions(), *[m.max_positions() for m in models]),
        required_batch_size_multiple=1, num_workers=0, seed=args.seed).next_epoch_itr(shuffle=False)
    scorer = SequenceScorer(task.target_dictionary)
    out: Dict[int, np.ndarray] = {}
    with torch.no_grad(), bar(len(dataset), f"scoring, {condition.name} context", unit="sent") as progress:
        for sample in itr:
            sample = utils.move_to_cuda(sample) if use_cuda else sample
            hypos = scorer.generate(models, task.model_input(models, sample))
            for sid, h in zip(sample["id"].cpu().tolist(), hypos):
                out[sid] = h[0]["positional_scores"].float().cpu().numpy()
            progress.update(len(hypos))
    if sorted(out) != list(range(len(dataset))):
        raise FairseqCtxError(f"--gen-subset {subset}: {len(out)} of {len(dataset)} sentences scored "
                              "(a sentence longer than the model takes?)")
    # the current sentence, y </s>: the last tokens of a target whatever its prefix (cut from the left if long)
    current = np.asarray(getattr(dataset, "pair", dataset).tgt_sizes, dtype=np.int64)
    return [out[i][len(out[i]) - current[i]:] for i in range(len(dataset))], dataset


def cxmi_report(models, task, args, use_cuda) -> Dict:
    from fairseq_ctx.evaluation.cxmi import cxmi, top_pcxmi

    scored = {c.name: score_subset(models, task, args.gen_subset, c, args, use_cuda) for c in CONDITIONS}
    scores = {name: s for name, (s, _) in scored.items()}
    report = {c.name: cxmi(scores[TRUE.name], scores[c.name], args.bootstrap, args.seed) for c in CONTROLS}
    dataset = scored[TRUE.name][1]  # the sentences shown with their true context
    tgt_dict, src_dict = task.target_dictionary, task.source_dictionary
    top = top_pcxmi(scores[TRUE.name], scores[NONE.name], args.top)
    for t in top:
        item = dataset[t["sentence"]]
        tokens = item["target"][len(item["target"]) - len(scores[TRUE.name][t["sentence"]]):]  # y </s>
        t["token"] = tgt_dict[int(tokens[t["position"]])]
        t["target"] = tgt_dict.string(tokens)
        t["source"] = src_dict.string(item["source"])
    report["top_pcxmi_vs_none"] = top
    return report


def with_context_of(groups, donors):
    """Every group's candidates with the source and target context of group
    ``donors[i]`` (none where -1): a condition's contexts for items that carry
    their own (:meth:`~fairseq_ctx.evaluation.conditions.Condition.donors`)."""
    out = []
    for g, donor in zip(groups, donors.tolist()):
        ctx = groups[donor].candidates[0] if donor >= 0 else None
        source, target = (list(ctx.source_context), list(ctx.target_context)) if ctx else ([], [])
        out.append(replace(g, candidates=[replace(c, source_context=source, target_context=target)
                                          for c in g.candidates]))
    return out


def contrastive_report(models, task, args, use_cuda, groups) -> Dict:
    """Accuracy under every condition; ``verdicts`` holds, per condition,
    whether each group's true candidate was scored best (the forced-decoding
    side of the generated matrix)."""
    from fairseq_ctx.evaluation.contrastive.accuracy import evaluate, group_credit
    from fairseq_ctx.evaluation.contrastive.command import build_side_encoders
    from fairseq_ctx.evaluation.contrastive.scorer import ModelScorer, score_groups

    encode_source, encode_target = build_side_encoders(args)
    size = task.cfg.context_size
    scorer = ModelScorer(models, task, encode_source, encode_target, context_size=size,
                         target_context_size=size if getattr(task.cfg, "target_context", False) else 0,
                         batch_size=args.batch_size, device="cuda" if use_cuda else "cpu",
                         max_tokens=args.max_tokens)
    out, verdicts = {}, {}
    for condition in CONDITIONS:
        name, gs = condition.name, with_context_of(groups, condition.donors(len(groups), args.seed))
        scores = score_groups(scorer, gs)
        out[name] = evaluate(gs, scores, ties=args.ties, tolerance=args.tie_tolerance)
        verdicts[name] = [group_credit(s, g.true_index, args.ties, args.tie_tolerance, g.rule)[0] == 1.0
                          for g, s in zip(gs, scores)]
    return out, verdicts


def translate_items(hub, task, args, groups, generation, encode_source, encode_target,
                    from_subwords) -> List[str]:
    """One translation (in the candidates' text space) of each group's
    source, decoded by ``hub`` with the context ``generation`` says (one of
    :data:`~fairseq_ctx.evaluation.conditions.GENERATION`: the source
    context or none; the reference target context as a forced prefix; a
    model with target context fed its own translations of the item's context
    sentences, decoded before it as one document).  Groups with the same
    source and context are decoded once."""
    import numpy as np

    from fairseq_ctx.data.context_selection import ContextRule
    from fairseq_ctx.evaluation.contrastive.groups import text_tokens as tokens
    from fairseq_ctx.progress import bar

    src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
    rule = ContextRule(size=task.cfg.context_size)  # an item's context: the newest of its sentences

    chain = generation.own_translations and hub.target_context

    def key(g):
        c = g.candidates[0]
        ctx = tuple(rule.newest(c.source_context)) if generation.source_context else ()
        tctx = tuple(rule.newest(c.target_context)) if generation.reference_prefix else ()
        if chain:
            ctx = tuple(c.source_context)  # the whole chain: each sentence's translation feeds the next
        return c.source, ctx, tctx

    keys = list(dict.fromkeys(key(g) for g in groups))
    texts: Dict[tuple, str] = {}
    gen = dict(beam=args.beam, max_len_a=args.max_len_a, max_len_b=args.max_len_b, lenpen=args.lenpen)

    def text_of(hypos) -> str:
        if not hypos:
            return ""
        # on the host: Dictionary.string reads the tensor token by token
        return from_subwords(tgt_dict.string(hypos[0]["tokens"].cpu(), extra_symbols_to_ignore={tgt_dict.eos()}))

    chunk = 64
    with bar(len(keys), f"translating, {generation.name} context", unit="item") as progress:
        for start in range(0, len(keys), chunk):
            part = keys[start:start + chunk]
            if chain:
                sources, docids, last = [], [], []
                for d, (src, ctx, _) in enumerate(part):
                    sources += [tokens(src_dict, encode_source, t) for t in (*ctx, src)]
                    docids += [d] * (len(ctx) + 1)
                    last.append(len(sources) - 1)
                hypos = hub.generate(sources, docids=np.array(docids, dtype=np.int64), **gen)
                hypos = [hypos[i] for i in last]
            else:
                sources = [tokens(src_dict, encode_source, src) for src, _, _ in part]
                contexts = None
                if generation.source_context:
                    contexts = [[tokens(src_dict, encode_source, t) for t in ctx] for _, ctx, _ in part]
                targets = None
                if generation.reference_prefix:
                    targets = [[tokens(tgt_dict, encode_target, t) for t in tctx] for _, _, tctx in part]
                hypos = hub.generate(sources, contexts=contexts, target_contexts=targets, **gen)
            for k, h in zip(part, hypos):
                texts[k] = text_of(h)
            progress.update(len(part))
    return [texts[key(g)] for g in groups]


def generated_report(models, cfg, task, args, use_cuda, groups, verdicts) -> Dict:
    """Generated accuracy of the qualifying groups under each generation
    condition, with its matrix against the forced-decoding verdicts and the
    translations (:mod:`fairseq_ctx.evaluation.contrastive.generated`)."""
    from omegaconf import open_dict

    from fairseq_ctx.evaluation.contrastive.command import build_side_encoders, target_text_space
    from fairseq_ctx.evaluation.contrastive.generated import check, qualifying, summarize
    from fairseq_ctx.hub import DocumentHubInterface

    to_space, from_subwords = target_text_space(args)
    spaced = [replace(g, candidates=[replace(c, target=to_space(c.target)) for c in g.candidates]) for g in groups]
    keep, forms, why = qualifying(spaced)
    res = {"qualified": len(keep), "items": len(groups), "not_qualified": why,
           "beam": args.beam, "conditions": {}}
    if not keep:
        return res
    with open_dict(cfg):
        cfg.dataset.batch_size, cfg.dataset.max_tokens = args.batch_size, args.max_tokens
    hub = DocumentHubInterface(cfg, task, models)
    if use_cuda:
        hub.cuda()
    encode_source, encode_target = build_side_encoders(args)
    items = [groups[i] for i in keep]
    generations = [g for g in GENERATION if hub.target_context or not g.reference_prefix]
    if not hub.target_context:
        res["reference_note"] = ("the model takes no target context, so neither the reference nor its own "
                                 "previous translations reach it: own = the source context only")
    translations = {}
    for gen in generations:
        cond = gen.name
        outs = translate_items(hub, task, args, items, gen, encode_source, encode_target, from_subwords)
        labels = [check(f, o) for f, o in zip(forms, outs)]
        scored = [verdicts[gen.scored_with.name][i] for i in keep]
        res["conditions"][cond] = summarize(groups, keep, labels, scored)
        res["conditions"][cond]["matrix_against"] = f"forced decoding with {gen.scored_with.name} context"
        translations[cond] = list(zip(outs, labels))
    res["per_item"] = [
        {"group": g, "where": groups[g].where,
         "correct_forms": [" ".join(c) for c, _ in f.pairs], "wrong_forms": [" ".join(w) for _, w in f.pairs],
         **{cond: {"translation": translations[cond][n][0], "label": translations[cond][n][1]}
            for cond in (g.name for g in generations)}}
        for n, (g, f) in enumerate(zip(keep, forms))]
    return res


def attribution(models, task, args, groups, mode, verdicts=None) -> Dict:
    """The attribution report (:mod:`fairseq_ctx.evaluation.attribution_report`),
    written to ``--attribution`` (and ``--attribution-html``); returns its
    summary.  With a contrastive set, each item names its group and whether
    the model scored it right under each context condition (``verdicts``,
    from :func:`contrastive_report`); ``--attribution-groups context-decided``
    keeps the groups right with the true context and wrong with none."""
    from fairseq_ctx.evaluation import attribution_page
    from fairseq_ctx.evaluation.attribution import ContextAttributor
    from fairseq_ctx.evaluation.attribution_report import analyse, items_from_groups, items_from_split
    from fairseq_ctx.evaluation.contrastive.command import build_side_encoders

    size = task.cfg.context_size
    labels = None
    if groups is not None:
        keep = list(range(len(groups)))
        if args.attribution_groups == "context-decided":
            keep = [i for i in keep if verdicts[TRUE.name][i] and not verdicts[NONE.name][i]]
        encode_source, encode_target = build_side_encoders(args)
        items = items_from_groups([groups[i] for i in keep], task, encode_source, encode_target, size,
                                  size if getattr(task.cfg, "target_context", False) else 0)
        labels = [{"group": i, "where": groups[i].where, "meta": groups[i].meta,
                   "scored_right": {c: bool(v[i]) for c, v in verdicts.items()}} for i in keep]
        source = (f"the contrastive set's {len(items)} items (true candidates)" if args.attribution_groups == "all"
                  else f"the {len(items)} of the contrastive set's {len(groups)} items scored right with the "
                       "true context and wrong with none (true candidates)")
    else:
        items = items_from_split(task, args.gen_subset, TRUE.rule(task.context_rule, args.seed),
                                 args.attribution_max_items)
        source = f"the first {len(items)} sentences of {args.gen_subset} (references)"
    attributor = ContextAttributor(models[0], task, batch_size=args.batch_size, aggregate=args.attribution_aggregate)
    report = analyse(attributor, items, metric=args.attribution_metric, std=args.attribution_std,
                     scope=args.attribution_scope, min_bits=args.attribution_min_bits, labels=labels)
    report.update(path=args.path, context_size=size, context=mode.meaning, items_from=source,
                  translation="reference" if groups is None else "each group's true candidate")
    with open(args.attribution, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1, ensure_ascii=False)
    if args.attribution_html:
        attribution_page.write(report, args.attribution_html)
    return {"items_from": source, **report["summary"], "json": args.attribution, "html": args.attribution_html}


def format_report(res: Dict) -> str:
    lines = [f"{res['path']} on {res['gen_subset']}: {res['sentences']} sentences, {res['tokens']} reference "
             f"tokens; context {res['context']}" + (", with the previous reference sentences as the target's "
                                                     "forced prefix" if res["target_context"] else ""),
             "CXMI of the true context (bits per token, 95% bootstrap interval over sentences):"]
    for c in (c.name for c in CONTROLS):
        r = res["cxmi"][c]
        lines.append(f"  against {c:<8} {r['cxmi_bits']:+.4f} [{r['ci95_bits'][0]:+.4f}, "
                     f"{r['ci95_bits'][1]:+.4f}]  ({r['cxmi_nats']:+.4f} nats)")
    lines.append("  as docmt_cxmi.py (neulab/contextual-mt) estimates it, the mean over sentences of their "
                 "token means, nats: " + ", ".join(
                     f"{c} {res['cxmi'][c]['cxmi_sentence_mean_nats']:+.4f}"
                     for c in (c.name for c in CONTROLS)))
    lines.append("tokens with the largest P-CXMI against no context (bits):")
    for t in res["cxmi"]["top_pcxmi_vs_none"]:
        lines.append(f"  {t['pcxmi_bits']:+.3f}  '{t['token']}'  sentence {t['sentence']}: {t['target']}")
    if "contrastive" in res:
        lines.append("contrastive accuracy: " + ", ".join(
            f"{name} context {r['accuracy']:.4f} ({r['correct']:g}/{r['groups']})"
            for name, r in res["contrastive"].items()))
    if "generated" in res:
        g = res["generated"]
        why = "; ".join(f"{n} {reason}" for reason, n in g["not_qualified"].items())
        lines.append(f"generated accuracy (translate, then check; beam {g['beam']}): {g['qualified']} of "
                     f"{g['items']} items qualify" + (f" (not: {why})" if why else ""))
        for cond, r in g["conditions"].items():
            m = r["matrix"]
            lines.append(f"  {cond:<9} context {r['accuracy']:.4f} ({r['right']}/{r['items']} right, "
                         f"{r['wrong']} wrong, {r['both']} both, {r['neither']} neither); "
                         f"scores right but translates wrong: {m['scores right, translates wrong']}, "
                         f"scores wrong but translates right: {m['scores wrong, translates right']}")
        if "reference_note" in g:
            lines.append(f"  reference context: not applicable ({g['reference_note']})")
    if "attribution" in res:
        a = res["attribution"]
        lines.append(f"attribution ({a['items_from']}): {a['sensitive_tokens']} context-sensitive of "
                     f"{a['target_tokens']} target tokens; top attributed context token = top erasure for "
                     f"{a['top_attribution_equals_top_erasure']} of {a['with_context_tokens']}; written to "
                     f"{a['json']}" + (f" and {a['html']}" if a["html"] else ""))
    return "\n".join(lines)


def main(argv=None):
    install_excepthook()
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
                        level=logging.WARNING, stream=sys.stderr)
    args = parse_args(argv)
    check_checkpoints(args.path)
    check_data_dir(args.data, subsets=[args.gen_subset])
    for name in ("src", "dst", "json", "src_context", "tgt_context"):
        check_file(getattr(args, name), "--" + name.replace("_", "-"))
    check_encoder_files(args)
    check_output(args.results, "--results")
    check_output(args.attribution, "--attribution")
    check_output(args.attribution_html, "--attribution-html")
    import torch

    set_tool_threads(logger)
    from fairseq_ctx.evaluation.contrastive.command import load_with_cfg
    from fairseq_ctx.evaluation.contrastive.readers import read_groups
    from fairseq_ctx.data.context_input import input_mode

    models, cfg, task = load_with_cfg(args)
    if args.attribution and len(models) > 1:
        raise FairseqCtxError(f"--attribution: --path {args.path} is an ensemble; attribute one model")
    if not hasattr(task.cfg, "context_size"):
        raise FairseqCtxError(f"--path {args.path}: trained without the document task; context usage "
                              "needs --task document_translation")
    target_context = bool(getattr(task.cfg, "target_context", False))
    if task.cfg.context_size < 1:
        raise FairseqCtxError("--context-size: the checkpoint's task gives no context (0); pass "
                              "--context-size 1 or more")
    groups = read_groups(args) if args.format else None
    if groups is not None and not groups:
        raise FairseqCtxError(f"--json {args.json}: the contrastive set has no groups")
    use_cuda = torch.cuda.is_available() and not args.cpu
    models = [m.eval().cuda() if use_cuda else m.eval() for m in models]
    mode = input_mode(task.cfg, models)
    res = {"path": args.path, "gen_subset": args.gen_subset, "context_size": task.cfg.context_size,
           "context": mode.meaning,
           "target_context": target_context,
           "reference": "Fernandes et al. 2021 (CXMI), 2023 (P-CXMI)",
           "units": "bits per reference token (nats beside); </s> included"
                    + ("; the current sentence's tokens only, the previous reference sentences a forced prefix"
                       if target_context else "")}
    res["cxmi"] = cxmi_report(models, task, args, use_cuda)
    res["sentences"], res["tokens"] = res["cxmi"]["none"]["sentences"], res["cxmi"]["none"]["tokens"]
    verdicts = None
    if groups is not None:
        res["contrastive"], verdicts = contrastive_report(models, task, args, use_cuda, groups)
        if not args.no_generated:
            res["generated"] = generated_report(models, cfg, task, args, use_cuda, groups, verdicts)
    if args.attribution:
        res["attribution"] = attribution(models, task, args, groups, mode, verdicts)
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
