"""Command-line helpers that the tools share: logging set-up, checkpoint
loading, the ``--tokenizer``/``--bpe`` arguments and the text encoders they
build, the checks of the paths a command is given, and its thread count.

This module imports fairseq only inside its functions, so that a tool's
import of it costs nothing beyond what the package itself imports.

**Paths, checked at the front.** Every command checks the files,
directories and names it is given (:func:`check_data_dir`,
:func:`check_file`, :func:`check_checkpoints`, :func:`check_output`,
:func:`check_encoder_files`) right after parsing its command line, before it
loads a model or reads data: a missing or wrong one is one
``fairseq_ctx: error:`` line naming the flag and the path (docs/errors.md),
never a ``FileNotFoundError`` from deep inside fairseq's task or dataset
code, and never after minutes of work. The checks look only at the file
system, so they do not depend on how the task and datasets read the data.

**Threads, fitted to the machine** (:func:`set_tool_threads`). torch takes a
thread per physical core by default; when another process holds one of
those cores, every parallel step of ours waits for the thread that shares
it (docs/benchmarks.md, "Threads under load"). So the tools use the cores that are idle when they start (:func:`idle_cores`:
the cores' busy time over a short sample of ``/proc/stat``), at least one;
``OMP_NUM_THREADS`` set in the environment is obeyed as it is.
"""
import argparse
import glob
import logging
import os
import sys
import time
from typing import Callable, Iterable, List, Optional, Sequence

from fairseq_ctx.errors import FairseqCtxError, MissingFileError

# fairseq's own CLI format, so our tools' lines interleave readably with its
LOG_FORMAT = "%(asctime)s | %(levelname)s | %(name)s | %(message)s"


def setup_logging(stream=sys.stderr, level=logging.INFO):
    logging.basicConfig(format=LOG_FORMAT, level=level, stream=stream)


# ---------------------------------------------------------------------------
# paths given on the command line
# ---------------------------------------------------------------------------

def split_paths(arg: str) -> List[str]:
    """``arg``'s ':'-separated paths, as fairseq splits ``--path`` and the
    data directory (a URL is one path)."""
    return [arg] if "://" in arg else [p for p in arg.split(os.pathsep) if p]


def splits_in(data_dir: str) -> List[str]:
    """The binarized splits in ``data_dir`` (``test`` of ``test.es-en.es.bin``)."""
    names = {os.path.basename(p).split(".")[0] for p in glob.glob(os.path.join(data_dir, "*.idx"))}
    return sorted(names)


def check_data_dir(data: Optional[str], flag: str = "DATA-BIN", subsets: Iterable[str] = (),
                   subset_flag: str = "--gen-subset"):
    """``data`` (':'-separated shards) is fairseq-preprocess output: a
    directory with ``dict.*.txt``; the first one holds each of ``subsets``."""
    if data is None:
        return
    parts = split_paths(data)
    for part in parts:
        if not os.path.exists(part):
            raise MissingFileError(f"{flag} {part}: no such directory (the binarized data that fairseq-preprocess "
                                   "writes, e.g. data/bible/bin)")
        if not os.path.isdir(part):
            raise MissingFileError(f"{flag} {part}: not a directory (the binarized data that fairseq-preprocess "
                                   "writes, e.g. data/bible/bin)")
        if not glob.glob(os.path.join(part, "dict.*.txt")):
            raise MissingFileError(f"{flag} {part}: no dict.*.txt in it; not binarized data (fairseq-preprocess "
                                   "output, e.g. data/bible/bin)")
    have = splits_in(parts[0])
    for subset in subsets:
        if subset not in have:
            raise MissingFileError(f"{subset_flag} {subset}: no such split in {parts[0]} (it has: "
                                   f"{', '.join(have) or 'none'})")


def check_file(path: Optional[str], flag: str, what: str = "file"):
    """``path`` is an existing file (``None`` and ``-``, stdin, pass)."""
    if path is None or path == "-":
        return
    if os.path.isdir(path):
        raise MissingFileError(f"{flag} {path}: a directory, not a {what}")
    if not os.path.isfile(path):
        raise MissingFileError(f"{flag} {path}: no such {what}")


def check_dir(path: Optional[str], flag: str, what: str = "directory"):
    """``path`` is an existing directory (``None`` passes)."""
    if path is None:
        return
    if not os.path.isdir(path):
        raise MissingFileError(f"{flag} {path}: no such {what}" if not os.path.exists(path)
                               else f"{flag} {path}: not a directory")


def check_checkpoints(path_arg: Optional[str], flag: str = "--path"):
    """Every ':'-separated checkpoint of ``path_arg`` is a file."""
    for path in split_paths(path_arg or ""):
        check_file(path, flag, "checkpoint file")


def check_output(path: Optional[str], flag: str):
    """A file to be written: its directory exists (checked before the work,
    not when the results are written at the end)."""
    if path is None or path == "-":
        return
    if os.path.isdir(path):
        raise MissingFileError(f"{flag} {path}: a directory, not a file to write")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise MissingFileError(f"{flag} {path}: no such directory {parent}")


# the file options of fairseq's --bpe and --tokenizer choices, and of our per-side models
ENCODER_FILE_OPTIONS = ("sentencepiece_model", "bpe_codes", "bpe_vocab", "bpe_merges", "gpt2_encoder_json",
                        "gpt2_vocab_bpe", "sentencepiece_model_path", "bpe_vocab_file", "source_bpe_model",
                        "target_bpe_model")


def check_encoder_files(args):
    """The model files of ``--bpe`` (``--sentencepiece-model``, ``--bpe-codes``,
    ...) and ``--source-bpe-model``/``--target-bpe-model`` exist."""
    for name in ENCODER_FILE_OPTIONS:
        value = getattr(args, name, None)
        if isinstance(value, str) and value and value != "???" and "://" not in value:
            check_file(value, "--" + name.replace("_", "-"))


# ---------------------------------------------------------------------------
# threads
# ---------------------------------------------------------------------------

def _cpu_times():
    """{cpu number: (busy, total)} jiffies of every CPU, from /proc/stat."""
    times = {}
    with open("/proc/stat") as f:
        for line in f:
            name, *values = line.split()
            if name.startswith("cpu") and name != "cpu":
                v = [int(x) for x in values[:8]]  # user nice system idle iowait irq softirq steal
                times[int(name[3:])] = (sum(v) - v[3] - v[4], sum(v))
    return times


def idle_cores(sample_seconds: float = 0.2) -> int:
    """The cores this process may run on, less those other processes kept
    busy over ``sample_seconds`` (at least 1). Without ``/proc/stat`` (not
    Linux): every core it may run on."""
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    try:
        before = _cpu_times()
        time.sleep(sample_seconds)
        after = _cpu_times()
    except (OSError, ValueError):
        return len(allowed)
    busy = 0.0
    for cpu in allowed:
        if cpu in before and cpu in after:
            ran, total = after[cpu][0] - before[cpu][0], after[cpu][1] - before[cpu][1]
            busy += ran / total if total > 0 else 0.0
    return max(1, len(allowed) - int(round(busy)))


def set_tool_threads(log: Optional[logging.Logger] = None) -> int:
    """torch's thread count for an inference or analysis tool: the
    ``OMP_NUM_THREADS`` of the environment where it is set (torch reads it
    itself), else the idle cores, at most torch's default (a thread per
    physical core). Returns the count; logs it at INFO."""
    import torch

    if os.environ.get("OMP_NUM_THREADS"):
        n = torch.get_num_threads()
        why = "OMP_NUM_THREADS"
    else:
        idle = idle_cores()
        n = max(1, min(torch.get_num_threads(), idle))
        torch.set_num_threads(n)
        why = f"{idle} idle core{'' if idle == 1 else 's'} at start; OMP_NUM_THREADS sets it"
    (log or logging.getLogger("fairseq_ctx")).info(f"{n} thread{'' if n == 1 else 's'} ({why})")
    return n


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
    given, ``--user-dir`` imported), its paths checked (the checkpoints, the
    data directory and its ``--gen-subset``, the ``--bpe`` files), its
    threads set, and its task set up. Returns ``(args, cfg, task)``;
    ``--path`` is required."""
    from fairseq import options, tasks, utils
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    import fairseq_ctx

    fairseq_ctx.register()  # the architectures and task; weights-only checkpoint loading
    args = options.parse_args_and_arch(get_parser(), input_args=list(argv))
    if args.path is None:
        raise FairseqCtxError("--path CKPT is required")
    check_checkpoints(args.path)
    check_data_dir(args.data, subsets=[args.gen_subset])
    check_encoder_files(args)
    set_tool_threads()
    if args.max_tokens is None and args.batch_size is None:
        args.max_tokens = 4000
    cfg = convert_namespace_to_omegaconf(args)
    utils.import_user_module(cfg.common)
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
    paths = [p for arg in path_args for p in split_paths(arg)]
    if not paths:
        raise FairseqCtxError("--path: no checkpoint given")
    for p in paths:
        check_file(p, "--path", "checkpoint file")
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
    _console("fairseq_ctx.evaluation.contrastive")


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
