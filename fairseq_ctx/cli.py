"""Command-line helpers that the tools share: logging set-up, checkpoint
loading, the ``--tokenizer``/``--bpe`` arguments and the text encoders they
build.

This module imports fairseq only inside its functions, so that a tool's
import of it costs nothing beyond what the package itself imports.
"""
import argparse
import logging
import os
import sys
from typing import Callable, List, Optional, Sequence

from fairseq_ctx.errors import FairseqCtxError

# fairseq's own CLI format, so our tools' lines interleave readably with its
LOG_FORMAT = "%(asctime)s | %(levelname)s | %(name)s | %(message)s"


def setup_logging(stream=sys.stderr, level=logging.INFO):
    logging.basicConfig(format=LOG_FORMAT, level=level, stream=stream)


# ---------------------------------------------------------------------------
# arguments
# ---------------------------------------------------------------------------

def registry_choices(name: str) -> List[str]:
    """The names registered in one of fairseq's registries (``tokenizer``,
    ``bpe``, ...). Imports fairseq."""
    from fairseq.data import encoders  # noqa: F401  (registering happens at this import)
    from fairseq.registry import REGISTRIES

    return sorted(REGISTRIES[name]["registry"].keys())


# fairseq 0.12's, for the help text only (the registry decides what is valid)
TOKENIZER_EXAMPLES = "fairseq's tokenizers: moses, nltk, space"
BPE_EXAMPLES = ("fairseq's BPEs: sentencepiece (--sentencepiece-model), subword_nmt (--bpe-codes), fastbpe, "
                "gpt2, bert, byte_bpe, bytes, characters, hf_byte_bpe")


def add_text_encoder_args(parser, title: str = "preprocessing (as the model's training data)",
                          tokenizer_help: str = "tokenize raw text before --bpe (default: input is tokenized)",
                          bpe_help: str = "subword-split the text (default: none)"):
    """``--tokenizer`` and ``--bpe``, in a group of their own (returned, for
    callers that add more options to it). Their names are checked against
    fairseq's registries by :func:`parse_with_encoders`, not here, so that
    building the parser (and ``--help``) does not import fairseq."""
    group = parser.add_argument_group(title)
    group.add_argument("--tokenizer", metavar="NAME", help=f"{tokenizer_help}; {TOKENIZER_EXAMPLES}")
    group.add_argument("--bpe", metavar="NAME", help=f"{bpe_help}; {BPE_EXAMPLES}")
    return group


def add_encoder_options(parser, argv=None):
    """Check the ``--tokenizer``/``--bpe`` named in ``argv`` against fairseq's
    registries (an unknown one is a usage error listing the valid ones) and
    add their options (e.g. ``--sentencepiece-model``, ``--bpe-codes``), as
    fairseq's own parsers do in their first pass. fairseq is imported only
    when one of them is given."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--tokenizer")
    pre.add_argument("--bpe")
    known, _ = pre.parse_known_args(argv)
    chosen = {name: getattr(known, name) for name in ("tokenizer", "bpe") if getattr(known, name)}
    if not chosen:
        return
    from fairseq.dataclass.utils import gen_parser_from_dataclass
    from fairseq.registry import REGISTRIES

    for name, choice in chosen.items():
        valid = registry_choices(name)
        if choice not in valid:
            parser.error(f"argument --{name}: invalid choice: {choice!r} (choose from {', '.join(valid)})")
        dc = REGISTRIES[name]["dataclass_registry"].get(choice)
        if dc is not None:
            gen_parser_from_dataclass(parser.add_argument_group(f"--{name} {choice}"), dc())


def parse_with_encoders(parser, argv=None):
    """Two passes: the chosen ``--tokenizer``/``--bpe`` are checked and add
    their options, then the whole command line is parsed."""
    add_encoder_options(parser, argv)
    return parser.parse_args(argv)


def build_encoders(args) -> Callable[[str], str]:
    """Text -> model input: ``--tokenizer``, then ``--bpe`` (either may be
    absent), as ``fairseq-interactive`` prepares its input."""
    from fairseq.data import encoders

    tokenizer = encoders.build_tokenizer(args) if args.tokenizer else None
    bpe = encoders.build_bpe(args) if args.bpe else None

    def encode(text: str) -> str:
        if tokenizer is not None:
            text = tokenizer.encode(text)
        if bpe is not None:
            text = bpe.encode(text)
        return text

    return encode


def comma_list(cast, valid, what: str):
    """An argparse ``type`` for comma-separated values: each converted by
    ``cast`` and accepted by ``valid``; ``what`` names them in the error."""
    def parse(text: str):
        try:
            values = [cast(v) for v in text.split(",") if v.strip()]
        except ValueError:
            values = []
        if not values or not all(valid(v) for v in values):
            raise argparse.ArgumentTypeError(f"expected comma-separated {what}, got {text!r}")
        return values

    return parse


def wants_help(argv: Sequence[str]) -> bool:
    """Whether the command line asks for ``-h``/``--help``."""
    return any(a in ("-h", "--help") for a in argv)


def print_quick_help(argv: Sequence[str], quick_parser: Callable[[], argparse.ArgumentParser],
                     full_parser: Callable[[], argparse.ArgumentParser], fairseq_command: str) -> bool:
    """Help for a tool whose parser extends one of fairseq's (hundreds of
    flags, and building it imports fairseq): ``--help`` prints
    ``quick_parser()``'s help (the tool's own flags and an example; nothing
    imported) with a ``--help-fairseq`` line, ``--help-fairseq`` the full
    parser's. Returns whether help was printed (the tool then stops)."""
    if "--help-fairseq" in argv:
        import fairseq_ctx

        fairseq_ctx.register()  # the document task's flags
        full_parser().print_help()
        return True
    if wants_help(argv):
        parser = quick_parser()
        parser.add_argument("--help-fairseq", action="store_true",
                            help=f"list every flag (all of {fairseq_command}'s are accepted)")
        parser.print_help()
        return True
    return False


def generation_tool_parser(prog: str, add_own_args: Callable[[argparse.ArgumentParser], None]):
    """fairseq-generate's parser (imports fairseq) with a tool's own flags."""
    from fairseq import options

    parser = options.get_generation_parser()
    parser.prog = prog
    add_own_args(parser)
    return parser


def quick_generation_parser(prog: str, doc: str, epilog: str, path_help: str,
                            add_own_args: Callable[[argparse.ArgumentParser], None],
                            task_help: Optional[str] = None) -> argparse.ArgumentParser:
    """The flags that matter to a tool built on :func:`generation_tool_parser`
    (data, ``--path``, ``--gen-subset``, ``--max-tokens``, ``--cpu``, the
    task where it matters, and its own), for ``--help`` without importing
    fairseq; ``doc``'s first paragraph is the description, ``epilog`` the
    example."""
    p = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0], epilog=epilog,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", metavar="DATA-BIN", help="binarized data directory (fairseq-preprocess output)")
    p.add_argument("--path", required=True, help=path_help)
    if task_help:
        p.add_argument("--task", help=task_help)
    p.add_argument("--gen-subset", default="test", help="subset to analyse (default: test)")
    p.add_argument("--max-tokens", type=int, help="tokens per batch (default 4000)")
    p.add_argument("--cpu", action="store_true", help="run on CPU even if CUDA is available")
    add_own_args(p)
    return p


# ---------------------------------------------------------------------------
# checkpoints
# ---------------------------------------------------------------------------

def setup_generation_tool(get_parser: Callable[[], argparse.ArgumentParser], argv: Sequence[str]):
    """An analysis tool's command line parsed as fairseq-generate parses its
    own (the plugin registered, ``--max-tokens`` 4000 unless a batch size is
    given, ``--user-dir`` imported), and its task set up. Returns
    ``(args, cfg, task)``; ``--path`` is required."""
    from fairseq import options, tasks, utils
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    import fairseq_ctx

    fairseq_ctx.register()  # the architectures and task; weights-only checkpoint loading
    args = options.parse_args_and_arch(get_parser(), input_args=list(argv))
    if args.max_tokens is None and args.batch_size is None:
        args.max_tokens = 4000
    cfg = convert_namespace_to_omegaconf(args)
    utils.import_user_module(cfg.common)
    if cfg.common_eval.path is None:
        raise ValueError("--path is required")
    return args, cfg, tasks.setup_task(cfg.task)


def generation_tool_models(cfg, task):
    """``(path, model, saved_cfg)`` for each ``--path`` checkpoint (``:``-separated),
    loaded one at a time with ``--model-overrides``, in eval mode, on CUDA
    unless ``--cpu``."""
    import torch
    from fairseq import checkpoint_utils, utils

    overrides = eval(cfg.common_eval.model_overrides)
    for path in utils.split_paths(cfg.common_eval.path):
        models, saved_cfg = checkpoint_utils.load_model_ensemble([path], arg_overrides=overrides, task=task)
        model = models[0].eval()
        if torch.cuda.is_available() and not cfg.common.cpu:
            model = model.cuda()
        yield path, model, saved_cfg


def generation_tool_batches(task, cfg, model, subset: str):
    """Batches of ``subset`` (loaded) as fairseq-generate makes them from
    ``cfg`` (``--max-tokens``, ``--batch-size``, ``--seed``,
    ``--num-workers``), in order, every sentence kept: fairseq drops a last
    batch smaller than ``--required-batch-size-multiple``, so it is 1 here."""
    from fairseq import utils

    return task.get_batch_iterator(
        dataset=task.dataset(subset),
        max_tokens=cfg.dataset.max_tokens,
        max_sentences=cfg.dataset.batch_size,
        max_positions=utils.resolve_max_positions(task.max_positions(), model.max_positions()),
        ignore_invalid_inputs=cfg.dataset.skip_invalid_size_inputs_valid_test,
        required_batch_size_multiple=1,
        seed=cfg.common.seed,
        num_workers=cfg.dataset.num_workers,
    ).next_epoch_itr(shuffle=False)


def add_checkpoint_args(parser):
    """DATA-BIN, ``--path`` (repeatable), ``--max-tokens``, ``--cpu``: the
    arguments of a tool that analyses each checkpoint on its own."""
    parser.add_argument("data", nargs="?", help="data-bin directory with the model's dictionaries "
                        "(default: the one recorded in the checkpoint)")
    parser.add_argument("--path", action="append", required=True,
                        help="checkpoint(s): ':'-separated and/or repeated; each is analysed on its own")
    parser.add_argument("--max-tokens", type=int, default=4000, help="tokens per encoder batch")
    parser.add_argument("--cpu", action="store_true", help="run on CPU even if CUDA is available")


def checkpoint_paths(path_args: Sequence[str]) -> List[str]:
    """Every checkpoint of ``--path`` (repeated and/or ':'-separated); a
    missing file stops here, before any model is built."""
    from fairseq import utils

    paths = [p for arg in path_args for p in utils.split_paths(arg) if p]
    if not paths:
        raise FairseqCtxError("--path: no checkpoint given")
    for p in paths:
        if not os.path.isfile(p):
            raise FairseqCtxError(f"--path: {p}: no such checkpoint file")
    return paths


def load_checkpoint(path: str, data: Optional[str], device: str):
    """One frozen model (eval mode, no gradients, on ``device``), its task
    and its arch name; ``data`` replaces the checkpoint's data directory."""
    import fairseq_ctx

    fairseq_ctx.register()  # archs, tasks, weights-only checkpoint loading
    from fairseq import checkpoint_utils

    overrides = {"data": data} if data else {}
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides=overrides)
    model = models[0].eval().to(device)
    for p in model.parameters():
        p.requires_grad_(False)
    arch = getattr(cfg.model, "arch", None) or getattr(cfg.model, "_name", None)
    return model, task, arch


# ---------------------------------------------------------------------------
# console scripts (setup.py)
# ---------------------------------------------------------------------------

def _console(module: str):
    """Run ``module.main()`` as an installed command. The ``main`` functions
    return their results for the tests and for Python callers; the console
    script wrapper would pass that to ``sys.exit`` and turn a result into
    exit status 1, so it is dropped here."""
    import importlib

    from fairseq_ctx.errors import install_excepthook

    install_excepthook()
    importlib.import_module(module).main()


def contrastive():
    _console("fairseq_ctx.contrastive")


def ctxsan_gates():
    _console("fairseq_ctx.analysis.ctxsan_gates")


def ctxsan_pos():
    _console("fairseq_ctx.analysis.ctxsan_pos")


def dc_divergence():
    _console("fairseq_ctx.analysis.dc_divergence")


def ctxenc_context_attention():
    _console("fairseq_ctx.analysis.ctxenc_context_attention")


def gret_global_state():
    _console("fairseq_ctx.analysis.gret_global_state")


def probing():
    _console("fairseq_ctx.analysis.probing")


def bow_prediction():
    _console("fairseq_ctx.analysis.bow_prediction")
