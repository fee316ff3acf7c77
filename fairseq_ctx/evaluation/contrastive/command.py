"""The ``fairseq-ctx-contrastive`` command (``python3 -m
fairseq_ctx.evaluation.contrastive``): its flags, loading the checkpoint(s) with the
command line's overrides of the task flags, and the run that reads the test
set, scores it (or reads scores made elsewhere) and reports accuracy.
"""
import argparse
import json
import logging
import sys

from fairseq_ctx.cli import (BPE_EXAMPLES, TOKENIZER_EXAMPLES, build_encoders, check_checkpoints, check_data_dir,
                             check_encoder_files, check_file, check_output, parse_with_encoders, set_tool_threads)
from fairseq_ctx.evaluation.contrastive.accuracy import evaluate, format_results
from fairseq_ctx.evaluation.contrastive.groups import FORMATS, TIE_MODES, ContrastiveDataError
from fairseq_ctx.evaluation.contrastive.readers import read_groups
from fairseq_ctx.evaluation.contrastive.scorer import ModelScorer, score_groups
from fairseq_ctx.evaluation.contrastive.scores import read_scores, write_scores
from fairseq_ctx.errors import FairseqCtxError, install_excepthook

logger = logging.getLogger("fairseq_ctx.evaluation.contrastive")

EXAMPLES = """examples:
  # a model on Voita et al.'s deixis set (context size and task from the checkpoint)
  fairseq-ctx-contrastive data/bin --path runs/doc/checkpoint_best.pt --format voita \\
      --src deixis_dev.src --dst deixis_dev.dst --json deixis_dev.json \\
      --bpe sentencepiece --sentencepiece-model spm.model --results deixis.json
  # scores made elsewhere (losses, one per candidate line), no model
  fairseq-ctx-contrastive --format contrapro --json contrapro.json --src contrapro.text.en \\
      --dst contrapro.text.de --scores-in scores.txt"""


def get_parser():
    """The command line; builds without importing torch or fairseq (the
    --tokenizer/--bpe names are checked by :func:`parse_args`)."""
    p = argparse.ArgumentParser(
        prog="fairseq-ctx-contrastive",
        description="Accuracy of a fairseq model on contrastive test sets (Voita et al. 2019, "
                    "ContraPro, Bawden et al. 2018), or of scores made elsewhere (--scores-in). "
                    "See docs/evaluation.md and the module docstring (python3 -m pydoc "
                    "fairseq_ctx.evaluation.contrastive) for the formats.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", nargs="?", help="data-bin directory with the model's dictionaries")
    p.add_argument("--path", help="checkpoint(s), ':'-separated for an ensemble")
    p.add_argument("--format", required=True, choices=FORMATS)
    p.add_argument("--src", help="source lines, one per candidate")
    p.add_argument("--dst", help="target lines, one per candidate")
    p.add_argument("--json", help="the test set's JSON (grouping, true candidate, metadata)")
    p.add_argument("--src-context", help="contrapro/bawden: source context lines (K per candidate line)")
    p.add_argument("--tgt-context", help="contrapro/bawden: target context lines, e.g. contrapro.context.de, "
                   "anaphora.prev.fr (K per candidate line)")
    p.add_argument("--context-lines", type=int, help="contrapro: context lines per candidate line "
                   "(default: inferred from the line counts)")
    p.add_argument("--segment-separator", default="_eos", help="voita: token joining the sentences of a line")
    p.add_argument("--max-groups", type=int, help="score only the first N groups")
    g = p.add_argument_group("model and task (the checkpoint's task flags unless given)")
    g.add_argument("--task", help="must equal the checkpoint's task (checked)")
    g.add_argument("--context-size", type=int, help="context sentences given to the model (the newest; a warning "
                   "when it differs from the training)")
    g.add_argument("--concat-context", action=argparse.BooleanOptionalAction, default=None,
                   help="glue the context to the source (document_translation); must be as the checkpoint was "
                   "trained (checked)")
    g.add_argument("--source-lang")
    g.add_argument("--target-lang")
    g.add_argument("--tokenizer", metavar="NAME",
                   help=f"tokenize raw text before --bpe (default: input is tokenized); {TOKENIZER_EXAMPLES}")
    g.add_argument("--bpe", metavar="NAME", help=f"subword-split the text (default: none); {BPE_EXAMPLES}")
    g.add_argument("--source-bpe-model", help="--bpe's model file for the source side (one subword model "
                   "per language); replaces --sentencepiece-model/--bpe-codes/... there")
    g.add_argument("--target-bpe-model", help="--bpe's model file for the target side")
    g = p.add_argument_group("scoring")
    g.add_argument("--batch-size", type=int, default=32, help="candidates per forward pass")
    g.add_argument("--max-tokens", type=int, help="tokens per forward pass (padded, as fairseq's "
                   "--max-tokens), context tokens included")
    g.add_argument("--length-normalize", action="store_true",
                   help="divide a candidate's log-probability by its number of target tokens")
    g.add_argument("--ties", choices=TIE_MODES, default="official",
                   help="credit when the true candidate ties for the best score: official (default) "
                        "as each suite's script (voita: the first tied candidate wins, as np.argmin; "
                        "contrapro, bawden: wrong), or wrong/right/half for every format")
    g.add_argument("--tie-tolerance", type=float, default=0.0,
                   help="scores closer than this count as tied (default 0: exact, as the official "
                        "scripts compare the scores they are given)")
    g.add_argument("--no-share-encoder", action="store_true",
                   help="run the whole model per candidate instead of encoding each distinct "
                        "source + context once per batch")
    g.add_argument("--cpu", action="store_true", help="score on CPU even if CUDA is available")
    g = p.add_argument_group("scores made elsewhere")
    g.add_argument("--scores-in", help="evaluate these scores (one per candidate line, in the order of "
                   "the text files) instead of a model's: no DATA-BIN or --path")
    g.add_argument("--maximize", action="store_true",
                   help="--scores-in/--scores-out hold log-probabilities (higher is better) instead of "
                        "losses (lower is better, what the official scripts expect by default)")
    g = p.add_argument_group("output")
    g.add_argument("--results", help="write the results as JSON here")
    g.add_argument("--scores-out", help="write one score per candidate (input order) here: losses, "
                   "or log-probabilities with --maximize")
    return p


def parse_args(argv=None):
    """Two passes, as fairseq's own parsers: the chosen --tokenizer/--bpe are
    checked and add their options (e.g. --sentencepiece-model)."""
    parser = get_parser()
    args = parse_with_encoders(parser, argv)
    if args.scores_in is not None:
        given = [f for f, v in (("DATA-BIN", args.data), ("--path", args.path)) if v is not None]
        if given:
            parser.error(f"--scores-in evaluates scores made elsewhere; it takes no {' or '.join(given)}")
        if args.max_groups is not None:
            parser.error("--max-groups: --scores-in needs the whole set (one score per candidate line)")
    elif args.data is None or args.path is None:
        parser.error("give DATA-BIN and --path CHECKPOINT to score with a model, or --scores-in FILE")
    if args.context_size is not None and args.context_size < 0:
        parser.error(f"--context-size must be >= 0, got {args.context_size}")
    if args.max_groups is not None and args.max_groups < 1:
        parser.error(f"--max-groups must be >= 1, got {args.max_groups}")
    if args.context_lines is not None and args.context_lines < 0:
        parser.error(f"--context-lines must be >= 0, got {args.context_lines}")
    if args.batch_size < 1:
        parser.error(f"--batch-size must be >= 1, got {args.batch_size}")
    if args.max_tokens is not None and args.max_tokens < 1:
        parser.error(f"--max-tokens must be >= 1, got {args.max_tokens}")
    if args.tie_tolerance < 0:
        parser.error(f"--tie-tolerance must be >= 0, got {args.tie_tolerance}")
    for side in ("source", "target"):
        if getattr(args, f"{side}_bpe_model") is not None and BPE_MODEL_OPTION.get(args.bpe) is None:
            parser.error(f"--{side}-bpe-model needs --bpe with one model file "
                         f"({', '.join(sorted(BPE_MODEL_OPTION))}), got --bpe {args.bpe}")
    return args


# the option holding each --bpe's model file, replaced per side by --source-bpe-model/--target-bpe-model
BPE_MODEL_OPTION = {"sentencepiece": "sentencepiece_model", "subword_nmt": "bpe_codes", "fastbpe": "bpe_codes",
                    "byte_bpe": "sentencepiece_model_path", "bert": "bpe_vocab_file"}


def side_args(args, side: str):
    """``args`` with ``--{side}-bpe-model`` (when given) as --bpe's model
    file: one subword model per language."""
    model = getattr(args, f"{side}_bpe_model", None)
    if model is None or not args.bpe:
        return args
    out = argparse.Namespace(**vars(args))
    setattr(out, BPE_MODEL_OPTION[args.bpe], model)
    return out


def build_side_encoders(args):
    """(encode_source, encode_target): the tokenizer and --bpe of
    :func:`build_encoders`, with --source-bpe-model / --target-bpe-model as
    that side's subword model when given."""
    return tuple(build_encoders(side_args(args, side)) for side in ("source", "target"))


def target_text_space(args):
    """(to_space, from_subwords): the target side's text after --tokenizer,
    before --bpe, the space in which generated translations are compared
    with the candidates: ``to_space`` tokenizes a candidate, ``from_subwords``
    undoes --bpe (--target-bpe-model when given) on a decoded hypothesis."""
    from fairseq.data import encoders

    tokenizer = encoders.build_tokenizer(args) if args.tokenizer else None
    bpe = encoders.build_bpe(side_args(args, "target")) if args.bpe else None
    return ((lambda text: tokenizer.encode(text)) if tokenizer is not None else (lambda text: text),
            (lambda text: bpe.decode(text)) if bpe is not None else (lambda text: text))


def _task_name(state) -> str:
    if state.get("cfg") is not None:
        return state["cfg"]["task"]["_name"]
    return getattr(state["args"], "task", None)


def load(args):
    """Models and task from the checkpoint(s), with the command line's
    overrides of the task flags."""
    models, _, task = load_with_cfg(args)
    return models, task


def load_with_cfg(args):
    """:func:`load` with the first checkpoint's configuration:
    ``(models, cfg, task)``, what fairseq's hub interface is built from."""
    import fairseq_ctx

    fairseq_ctx.register()  # archs, tasks, weights-only checkpoint loading
    from fairseq import checkpoint_utils, utils

    paths = utils.split_paths(args.path)
    overrides = {"data": args.data}
    for name in ("context_size", "concat_context", "source_lang", "target_lang"):
        if getattr(args, name) is not None:
            overrides[name] = getattr(args, name)
    # read the first checkpoint once: its task is checked, then it is reused
    state = checkpoint_utils.load_checkpoint_to_cpu(paths[0], overrides)
    saved = _task_name(state)
    if args.task is not None and saved != args.task:
        raise FairseqCtxError(
            f"--task {args.task}: {paths[0]} was trained with --task {saved}; a checkpoint only "
            "loads with its own task (document_translation adds a separator to the dictionaries)")
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
        paths[:1], arg_overrides=overrides, state=state)
    if len(paths) > 1:
        more, _, _ = checkpoint_utils.load_model_ensemble_and_task(paths[1:], arg_overrides=overrides, task=task)
        models += more
    for name in ("context_size", "concat_context"):
        if getattr(args, name) is not None and not hasattr(task.cfg, name):
            raise FairseqCtxError(f"--{name.replace('_', '-')}: the checkpoint's task "
                                  f"'{saved}' has no such option")
    return models, cfg, task


def main(argv=None):
    install_excepthook()  # our errors as one line (python3 -m as well as the console script)
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
                        level=logging.INFO, stream=sys.stderr)
    args = parse_args(argv)
    # every path before the set is read or a model loaded
    check_checkpoints(args.path)
    check_data_dir(args.data)
    for name in ("src", "dst", "json", "src_context", "tgt_context", "scores_in"):
        check_file(getattr(args, name), "--" + name.replace("_", "-"))
    check_encoder_files(args)
    check_output(args.results, "--results")
    check_output(args.scores_out, "--scores-out")
    groups = read_groups(args)
    if not groups:
        raise ContrastiveDataError("the test set has no groups")
    n_cands = sum(len(g.candidates) for g in groups)
    if args.scores_in is not None:
        scores = read_scores(args.scores_in, groups, maximize=args.maximize)
        res = evaluate(groups, scores, ties=args.ties, tolerance=args.tie_tolerance)
        res.update(format=args.format, scores_in=args.scores_in, maximize=args.maximize, candidates=n_cands)
        header = (f"{args.format}: {len(groups)} groups, {n_cands} candidates, scores from {args.scores_in} "
                  f"({'higher' if args.maximize else 'lower'} is better)")
    else:
        import torch

        set_tool_threads(logger)
        models, task = load(args)
        context_size = getattr(task.cfg, "context_size", 0)
        target_context_size = context_size if getattr(task.cfg, "target_context", False) else 0
        if getattr(task.cfg, "context_mode", "previous") != "previous":
            logger.warning(f"the model was trained with --context-mode {task.cfg.context_mode}; the test sets "
                           "give the preceding sentences as context")
        use_cuda = torch.cuda.is_available() and not args.cpu
        encode_source, encode_target = build_side_encoders(args)
        scorer = ModelScorer(models, task, encode_source, encode_target, context_size=context_size,
                             batch_size=args.batch_size, length_normalize=args.length_normalize,
                             device="cuda" if use_cuda else "cpu", share_encoder=not args.no_share_encoder,
                             target_context_size=target_context_size, max_tokens=args.max_tokens)
        if target_context_size and not any(c.target_context for g in groups for c in g.candidates):
            logger.warning("the model takes target context but the test set gives none "
                           "(--tgt-context for contrapro/bawden text files)")
        scores = score_groups(scorer, groups)
        res = evaluate(groups, scores, ties=args.ties, tolerance=args.tie_tolerance)
        from fairseq_ctx.data.context_input import input_mode

        mode = input_mode(task.cfg, models).meaning
        if target_context_size:
            mode += ", target context as a forced decoder prefix"
        res.update(format=args.format, path=args.path, context_size=context_size, context=mode,
                   target_context_size=target_context_size, length_normalize=args.length_normalize,
                   candidates=n_cands, unk_rates=scorer.unk_rates)
        header = (f"{args.format}: {len(groups)} groups, {n_cands} candidates, "
                  f"context {context_size} sentence(s), {mode}")
    print(header)
    print(format_results(res))
    if args.results:
        with open(args.results, "w", encoding="utf-8") as f:
            json.dump(res, f, indent=2)
    if args.scores_out:
        write_scores(args.scores_out, scores, maximize=args.maximize)
    return res

