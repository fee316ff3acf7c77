"""``fairseq-ctx-translate``: translate raw-text documents with a trained
checkpoint and write one detokenized translation per input line.

::

    fairseq-ctx-translate DATA-BIN --path CKPT [--input FILE] [--docids FILE] [--output FILE]
        [--bpe sentencepiece --sentencepiece-model spm.model] [--beam 4] [fairseq-interactive flags]

Input (``--input``, default stdin): UTF-8 text, one sentence a line.
Documents are runs of non-empty lines separated by one or more empty lines,
or, with ``--docids FILE`` (one id per input line, the task's ``.docids``
format), runs of lines with the same id.  Output (stdout or ``--output``):
exactly one line per input line, empty where the input line was empty, so
``paste input output`` lines them up.

Every sentence gets the context the task gives it in training and in
``fairseq-generate`` (Voita et al., ACL 2018: the preceding ``--context-size``
sentences of its document; the checkpoint's ``--context-mode``), through
:class:`fairseq_ctx.hub.DocumentHubInterface`, so the output equals
``fairseq-generate``'s on the same text binarized with the same document ids.
Source context is known up front, so all sentences batch together, sorted by
length (``--max-tokens``, ``--batch-size``; fairseq-generate's default of
12000 tokens when neither is given).

A 2-to-2 model (trained with ``--concat-context --target-context``,
Tiedemann and Scherrer 2017) also takes the previous ``--context-size``
*target* sentences of the document: here its own previous translations,
forced as the decoder's prefix (``t_prev <sep>``), and each output line keeps
only what follows the last separator.  Sentence ``i`` of a document can be
decoded only once sentence ``i-1`` is, so the documents are translated in
rounds: round ``i`` batches the ``i``-th sentence of every document (sorted by
length, cut by ``--max-tokens``/``--batch-size``), after round ``i-1``; this is
slower than free batching (more, smaller batches, and the prefix is decoded
again).  ``--max-len-a``/``--max-len-b`` bound the whole decoder output,
prefix included, as in training and ``fairseq-generate``.

Flags are fairseq-interactive's (``--beam``, ``--lenpen``, ``--max-len-b``,
``--tokenizer``, ``--bpe`` and their options, ``--post-process``, ``--cpu``,
``--fp16``, ``--task`` and its flags, ...).  Defaults come from the
checkpoint where fairseq stores them: its task and every task flag
(``--context-size``, ``--concat-context``, ...), its ``--tokenizer`` and
``--bpe`` with their options; a flag given on the command line wins.

Bad input stops before anything is written, with one line naming the file
and line: a binary or non-UTF-8 input, a docids file whose line count differs
from the input's, a sentence longer than the model's
``--max-source-positions`` after tokenization and BPE (never truncated; with
``--skip-invalid-size-inputs-valid-test`` it is left untranslated, an empty
output line, and counted in a warning).  A progress bar (tqdm, on stderr
when it is a terminal; ``--no-progress-bar``) and a one-line summary (sentences, documents,
sentences/s of the translation loop) go to stderr.
"""
import argparse
import logging
import os
import sys
import time
from typing import List, Optional, Sequence, Tuple

logger = logging.getLogger("fairseq_ctx.translate")

PROG = "fairseq-ctx-translate"
DEFAULT_MAX_TOKENS = 12000  # fairseq-generate's when neither --max-tokens nor --batch-size is given


def _add_own_args(parser: argparse.ArgumentParser):
    group = parser.add_argument_group("fairseq-ctx-translate")
    group.add_argument("--docids", metavar="FILE",
                       help="one document id per input line (documents: runs of equal ids); default: documents "
                            "are separated by empty lines")
    group.add_argument("--output", metavar="FILE", help="write the translations here (default: stdout)")


def _quick_help() -> str:
    """--help without importing torch or fairseq."""
    p = argparse.ArgumentParser(
        prog=PROG, description="Translate raw-text documents (one sentence a line, documents separated by empty "
                               "lines or given by --docids) with a fairseq_ctx checkpoint; one detokenized "
                               "translation per input line.",
        epilog="Every flag of fairseq-interactive is accepted (--help-fairseq lists them): --beam, --lenpen,\n"
               "--max-len-a/-b, --max-tokens, --batch-size, --tokenizer, --bpe and their options, --post-process,\n"
               "--cpu, --fp16, --skip-invalid-size-inputs-valid-test, --no-progress-bar, --task and its flags.\n"
               "The task, its flags and the tokenizer/BPE default to the checkpoint's. Ten stop in one line\n"
               "naming the flag instead of being ignored: --nbest, --print-alignment, --score-reference,\n"
               "--prefix-size, --print-step, --retain-iter-history, --lm-path, --replace-unk, --constraints,\n"
               "--results-path.\n\n"
               "example:\n"
               "  fairseq-ctx-translate data/bible/bin --path runs/ctxenc/checkpoint_best.pt \\\n"
               "      --input test.es --docids test.docids --beam 4 \\\n"
               "      --bpe sentencepiece --sentencepiece-model data/bible/spm/spm.model --output test.ctxenc.en",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", metavar="DATA", help="binarized data directory with the dictionaries")
    p.add_argument("--path", required=True, metavar="CKPT", help="checkpoint file (several: joined by ':')")
    p.add_argument("--input", default="-", metavar="FILE", help="input text (default: stdin)")
    _add_own_args(p)
    p.add_argument("--help-fairseq", action="store_true", help="list every fairseq-interactive flag")
    return p.format_help()


# ---------------------------------------------------------------------------
# input
# ---------------------------------------------------------------------------

def _read_text_lines(path: str, what: str) -> List[str]:
    """Lines of a UTF-8 text file (``-``: stdin), split on ``\\n`` only; a
    binary file or invalid UTF-8 stops with the file and line."""
    from fairseq_ctx.errors import DataError, MissingFileError

    name = "<stdin>" if path == "-" else path
    try:
        if path == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as f:
                data = f.read()
    except FileNotFoundError:
        raise MissingFileError(f"{what} {path}: no such file") from None
    except IsADirectoryError:
        raise DataError(f"{what} {path}: is a directory, not a text file") from None
    nul = data.find(b"\x00")
    if nul >= 0:
        lineno = data.count(b"\n", 0, nul) + 1
        raise DataError(f"{name}:{lineno}: binary data (a NUL byte); {what} must be UTF-8 text, one sentence "
                        "a line")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        lineno = data.count(b"\n", 0, e.start) + 1
        raise DataError(f"{name}:{lineno}: not UTF-8 text ({e.reason} at byte {e.start}); {what} must be "
                        "UTF-8, one sentence a line") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def documents_of(lines: Sequence[str], docids: Optional[Sequence[str]] = None) -> Tuple[List[int], List[int]]:
    """Indices of the non-empty lines and a document number for each: the
    documents of :func:`fairseq_ctx.data.context_selection.split_documents`
    (with ``docids``, runs of equal ids among the non-empty lines; without,
    an empty line ends a document)."""
    from fairseq_ctx.data.context_selection import split_documents

    keep, doc = split_documents([not line.strip() for line in lines], docids)
    return keep.tolist(), doc.tolist()


# ---------------------------------------------------------------------------
# configuration
# ---------------------------------------------------------------------------

def _saved_cfg(state):
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    if state.get("args") is not None:
        return convert_namespace_to_omegaconf(state["args"])
    return state["cfg"]


def _parser(default_task: str):
    from fairseq import options

    parser = options.get_interactive_generation_parser(default_task=default_task)
    parser.prog = PROG
    _add_own_args(parser)
    return parser


def parse_args(argv: Sequence[str]):
    """fairseq-interactive's flags plus ours; task flags, tokenizer and BPE
    not given on the command line are taken from the first checkpoint.
    Returns ``(args, state of the first checkpoint, explicitly given dests)``."""
    import ast

    import fairseq_ctx

    fairseq_ctx.register()  # the checkpoint's arch and task, weights-only loading
    from fairseq import checkpoint_utils, options, utils

    from fairseq_ctx.errors import ConfigError

    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--path")
    pre.add_argument("--model-overrides", default="{}")
    known, _ = pre.parse_known_args(argv)
    if not known.path:
        raise ConfigError(f"{PROG}: --path CKPT is required")
    first = utils.split_paths(known.path)[0]
    if not os.path.isfile(first):
        raise ConfigError(f"--path {first}: no such checkpoint file")
    state = checkpoint_utils.load_checkpoint_to_cpu(first, ast.literal_eval(known.model_overrides))
    saved = _saved_cfg(state)
    saved_task = saved.task._name if saved.get("task") is not None else "translation"

    args = options.parse_args_and_arch(_parser(saved_task), list(argv))
    explicit = set(vars(options.parse_args_and_arch(_parser(saved_task), list(argv), suppress_defaults=True)))
    if args.task == saved_task:
        for key, value in saved.task.items():
            if key not in ("_name", "data") and key not in explicit and hasattr(args, key):
                setattr(args, key, value)
    for registry in ("tokenizer", "bpe"):
        stored = saved.get(registry)
        if registry in explicit or stored is None or stored.get("_name") is None:
            continue
        setattr(args, registry, stored._name)
        for key, value in stored.items():
            if key != "_name" and key not in explicit:
                setattr(args, key, value)
        logger.info(f"--{registry} {stored._name} from the checkpoint")
    return args, state, explicit


# ---------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------

def _ignored_flags(cfg):
    """``(flag, given, where it is taken)`` for the flags of ``cfg`` that
    fairseq's parser accepts here and this tool would otherwise ignore: the
    generation flags that change the translations or ask for more than one
    per input line or print what it does not (``--print-step``,
    ``--retain-iter-history``), and
    ``--results-path``, where fairseq-generate writes.
    Refused rather than dropped."""
    generation = cfg.generation
    both = "fairseq-generate and fairseq-interactive print it"
    steps = "fairseq-generate prints the steps of iterative refinement models, which these models are not"
    return [
        ("--replace-unk", generation.replace_unk is not None,
         "fairseq-interactive takes it, and fairseq-generate on raw text"),
        ("--constraints", bool(generation.constraints), "fairseq-interactive takes it"),
        ("--lm-path", generation.lm_path is not None, "fairseq-generate takes it"),
        ("--nbest", generation.nbest != 1, both),
        ("--print-alignment", generation.print_alignment is not None, both),
        ("--score-reference", bool(generation.score_reference), "fairseq-generate scores its references"),
        ("--prefix-size", generation.prefix_size > 0, "fairseq-generate forces its references' first tokens"),
        ("--print-step", bool(generation.print_step), steps),
        ("--retain-iter-history", bool(generation.retain_iter_history), steps),
        ("--results-path", cfg.common_eval.results_path is not None, "this tool writes its translations to --output"),
    ]


def main(argv: Optional[Sequence[str]] = None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if "-h" in argv or "--help" in argv:
        print(_quick_help(), end="")
        return None
    from fairseq_ctx.cli import (check_checkpoints, check_data_dir, check_encoder_files, check_file, check_output,
                                 set_tool_threads, setup_logging)
    from fairseq_ctx.errors import install_excepthook

    setup_logging(level=os.environ.get("LOGLEVEL", "INFO").upper())
    install_excepthook()
    if "--help-fairseq" in argv:
        import fairseq_ctx

        fairseq_ctx.register()  # the document task's flags
        _parser("translation").print_help()
        return None

    import ast

    import numpy as np
    import torch
    from fairseq import checkpoint_utils, tasks, utils
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from tqdm import tqdm

    import fairseq_ctx
    from fairseq_ctx.errors import ConfigError, DataError
    from fairseq_ctx.hub import DocumentHubInterface

    fairseq_ctx.register()  # archs, task, weights-only loading

    args, state, _ = parse_args(argv)
    # every path before any input is read or a model built
    check_checkpoints(args.path)
    check_data_dir(args.data)
    check_file(args.input, "--input")
    check_file(args.docids, "--docids")
    check_encoder_files(args)
    check_output(args.output, "--output")
    set_tool_threads(logger)
    cfg = convert_namespace_to_omegaconf(args)
    for flag, given, where in _ignored_flags(cfg):
        if given:
            raise ConfigError(f"{PROG}: {flag} is not supported ({where})")
    if cfg.dataset.max_tokens is None and cfg.dataset.batch_size is None:
        cfg.dataset.max_tokens = DEFAULT_MAX_TOKENS
    utils.import_user_module(cfg.common)
    if cfg.common.seed is not None and not cfg.generation.no_seed_provided:
        np.random.seed(cfg.common.seed)
        utils.set_torch_seed(cfg.common.seed)

    # read and check all input before loading the model
    input_name = "<stdin>" if cfg.interactive.input == "-" else cfg.interactive.input
    lines = [line.strip() for line in _read_text_lines(cfg.interactive.input, "input")]
    docids = None
    if args.docids:
        docids = _read_text_lines(args.docids, "--docids")
        if len(docids) != len(lines):
            raise DataError(f"--docids {args.docids}: {len(docids)} lines, but the input {input_name} has "
                            f"{len(lines)}; give one document id per input line")
    keep, doc = documents_of(lines, docids)

    task = tasks.setup_task(cfg.task)
    paths = utils.split_paths(cfg.common_eval.path)
    overrides = ast.literal_eval(cfg.common_eval.model_overrides)
    models, _, _ = checkpoint_utils.load_model_ensemble_and_task(paths[:1], arg_overrides=overrides, task=task,
                                                                 state=state)
    if len(paths) > 1:
        more, _, _ = checkpoint_utils.load_model_ensemble_and_task(paths[1:], arg_overrides=overrides, task=task)
        models += more
    use_cuda = torch.cuda.is_available() and not cfg.common.cpu
    for model in models:
        if cfg.common.fp16:
            model.half()
    translator = DocumentHubInterface(cfg, task, models)
    if use_cuda:
        translator.cuda()

    sources = [translator.encode(lines[i]) for i in keep]
    limit = translator.max_positions[0] if isinstance(translator.max_positions, tuple) else translator.max_positions
    too_long = [k for k, t in enumerate(sources) if limit is not None and len(t) > limit]
    skip = cfg.dataset.skip_invalid_size_inputs_valid_test
    if too_long and not skip:
        k = too_long[0]
        raise DataError(f"{input_name}:{keep[k] + 1}: {len(sources[k])} tokens after tokenization and BPE, more "
                        f"than the model's source limit of {limit} (--max-source-positions); {len(too_long)} "
                        "line(s) are too long. Split them, or pass --skip-invalid-size-inputs-valid-test to leave "
                        "them untranslated (empty output lines)")
    if too_long:
        logger.warning(f"{len(too_long)} line(s) longer than the model's source limit of {limit} tokens are left "
                       f"untranslated (empty output), first: {', '.join(str(keep[k] + 1) for k in too_long[:10])}")

    generator = translator.build_generator()
    # all sentences batch freely, or, for a 2-to-2 model, round by round with the
    # previous translations as the forced prefix (DocumentHubInterface.document_dataset)
    dataset = translator.document_dataset(sources, doc)
    outputs = [""] * len(lines)
    start = time.perf_counter()
    # drawn on a terminal only (disable=None), as fairseq_ctx.progress does:
    # a log file gets the summary line, not every redraw of the bar
    with tqdm(total=len(sources), desc=PROG, unit="sent", file=sys.stderr,
              disable=True if cfg.common.no_progress_bar else None) as bar:
        for ids, hypos, _ in translator.iterate(dataset, generator, skip_invalid_size_inputs=skip):
            for k, h in zip(ids, hypos):
                outputs[keep[k]] = translator.decode(h[0]["tokens"]) if h else ""
            bar.update(len(ids))
    elapsed = time.perf_counter() - start

    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    try:
        for line in outputs:
            out.write(line + "\n")
    finally:
        if args.output:
            out.close()
        else:
            out.flush()
    n_docs = len(set(doc))
    rate = len(sources) / elapsed if elapsed > 0 else float("inf")
    def count(n, noun):
        return f"{n} {noun}" + ("" if n == 1 else "s")

    print(f"{PROG}: {count(len(sources), 'sentence')} in {count(n_docs, 'document')} "
          f"({count(len(lines) - len(keep), 'empty line')}) "
          f"translated in {elapsed:.1f} s, {rate:.1f} sentences/s; context: {translator.context_input}"
          f"{f' x{translator.context_size}' if translator.context_size else ''}"
          f"{', target: previous translations' if translator.target_context else ''}", file=sys.stderr)
    return outputs


def cli_main():
    main()


if __name__ == "__main__":
    cli_main()
