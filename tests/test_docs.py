"""The documentation is true to the letter.

* Every command shown in README.md and docs/*.md (the lines of its bash code
  blocks, and inline ``code`` that starts with one of our tools or
  fairseq's) parses: its tool exists, and its flags are flags of that tool,
  found by running the tool's own argument parser in this process, up to
  the parse (nothing runs). ``$(scripts/ctx-args FILE ...)`` is expanded
  from the argument files (which must exist), so their flags are checked
  too. Placeholders (``DATA-BIN``, ``CKPT``, ``N``, ``...``) may stand for
  values and for flags left out, never for a flag name.
* Every error line the docs quote (a backticked ``... error: ...``) has the
  one prefix of every tool (``fairseq_ctx: error:``, docs/errors.md), and
  each quoted message, and the other program output quoted below, is the
  one the code prints: the test makes the code print it.
"""
import argparse
import contextlib
import io
import re
import runpy
import shlex
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from fairseq_ctx_prep.files import ERROR_PREFIX
from tests.utils import REPO, USER_DIR

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FAIRSEQ_TOOLS = {"fairseq-train": "train", "fairseq-generate": "generate", "fairseq-interactive": "interactive",
                 "fairseq-validate": "validate", "fairseq-preprocess": "preprocess", "fairseq-score": "score"}
OUR_PREFIXES = ("fairseq-", "python3 ", "python ", "bash scripts/", "scripts/", "torchrun ")


def _console_scripts():
    setup = (REPO / "setup.py").read_text()
    return dict(re.findall(r'"(fairseq-ctx-[\w-]+) = ([\w.]+:\w+)"', setup))


CONSOLE_SCRIPTS = _console_scripts()


# ---------------------------------------------------------------------------
# finding the commands
# ---------------------------------------------------------------------------

def _commands_of(path: Path):
    """``(where, command line, inline)`` of every command in a document:
    ``inline`` for code in the prose, which may name a tool and some of its
    flags without the arguments it requires."""
    text = path.read_text(encoding="utf-8")
    out = []
    for block in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
        if block.group(1) not in ("bash", "sh", "shell"):
            continue
        first_line = text[:block.start()].count("\n") + 2
        body = block.group(2)
        joined = re.sub(r"\\\n", " ", body)
        for offset, line in enumerate(joined.splitlines()):
            line = line.strip()
            if line and not line.startswith("#"):
                out.append((f"{path.name}:{first_line + offset}", line, False))
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    for span in re.finditer(r"`([^`\n]+)`", prose):
        code = span.group(1).strip()
        if code.startswith(("fairseq-ctx-", "python3 -m fairseq_ctx", "python3 scripts/", "bash scripts/")) \
                or re.match(r"fairseq-(train|generate|interactive|validate|hydra-train) ", code):
            out.append((f"{path.name}:{text[:span.start()].count(chr(10)) + 1}", code, True))
    return out


ALL_COMMANDS = [c for doc in DOCS for c in _commands_of(doc)]


def _is_placeholder(token: str) -> bool:
    return token == "..." or bool(re.fullmatch(r"\$?[A-Z][A-Z0-9_-]*(=[A-Z][A-Z0-9_-]*)?|[A-Z]+=\.\.\.", token))


def _expand(line: str):
    """The command's tokens, with ``$(...)`` substitutions expanded, shell
    comments, brackets of optional parts and environment prefixes dropped,
    and only the first command of a pipeline."""
    def ctx_args(match):
        from fairseq_ctx.tables import config

        files = shlex.split(match.group(1))
        for f in files:
            assert (REPO / f).is_file(), f"$(scripts/ctx-args ...): no such file {f}"
        return " ".join(shlex.quote(t) for t in config.read_many([str(REPO / f) for f in files]))

    line = re.sub(r"\$\(scripts/ctx-args ([^)]*)\)", ctx_args, line)
    line = re.sub(r"\$\(which ([\w-]+)\)", r"\1", line)
    assert "$(python " not in line, "`$(python ...)`: the docs use python3 throughout"
    line = re.sub(r"\$\(python3 -c '[^']*'\)", USER_DIR, line)
    line = re.sub(r"<[^>]*>", "", line)   # <row config>: a placeholder
    line = line.replace("/abs/path/to/fairseq_ctx", USER_DIR)
    line = line.split(" | ")[0]
    tokens = shlex.split(line, comments=True)
    tokens = [t.replace("[", "").replace("]", "") for t in tokens]
    tokens = [t for t in tokens if t]
    while tokens and re.fullmatch(r"[A-Z_]+=\S*", tokens[0]):
        tokens.pop(0)
    if tokens[:1] == ["taskset"]:
        tokens = tokens[3:]
    return tokens


# ---------------------------------------------------------------------------
# parsing a command without running it
# ---------------------------------------------------------------------------

class _Parsed(Exception):
    pass


@contextlib.contextmanager
def _stop_after_parse(argv0, args):
    """Let the next ``ArgumentParser.parse_args`` parse ``args`` as
    ``sys.argv`` and stop the program there (``_Parsed``)."""
    real = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, args=None, namespace=None):
        real(self, args, namespace)
        raise _Parsed()

    old_argv = sys.argv
    sys.argv = [argv0, *args]
    argparse.ArgumentParser.parse_args = parse_then_stop
    try:
        yield
    finally:
        argparse.ArgumentParser.parse_args = real
        sys.argv = old_argv


def _parse_error(run, argv0, args, partial=False):
    """None if ``run()`` gets through its argument parsing, else argparse's
    message; placeholders may fail a value's type, ``...`` (and inline code,
    ``partial``) may leave out required arguments; nothing may be an unknown
    flag."""
    partial = partial or "..." in args
    args = [a for a in args if a != "..."]
    err = io.StringIO()
    with _stop_after_parse(argv0, args), contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            run()
        except _Parsed:
            return None
        except SystemExit as e:
            if e.code in (0, None):  # --help
                return None
            message = err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else str(e.code)
            value = re.search(r"invalid (?:choice|\w+ value): '([^']*)'", message)
            if value and _is_placeholder(value.group(1)):
                return None
            if partial and ("the following arguments are required" in message or "expected one argument" in message):
                return None
            return message
    return "the parser was never reached"


def _run_module(module):
    """``python3 -m module``, in this process where the module may have been
    imported already (runpy's warning about it is no news here)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*found in sys.modules after import of package",
                                category=RuntimeWarning)
        runpy.run_module(module, run_name="__main__", alter_sys=True)


def _fairseq_run(tool):
    import importlib

    module = importlib.import_module(f"fairseq_cli.{tool}")
    return module.cli_main


def _check_hydra(args):
    """``fairseq-hydra-train --config-dir D --config-name NAME key=value ...``:
    the config and the groups exist, and every key is a field of fairseq's
    config (of the task or model dataclass the config names)."""
    from omegaconf import OmegaConf

    from fairseq.dataclass.configs import FairseqConfig
    from fairseq.models import MODEL_DATACLASS_REGISTRY
    from fairseq.registry import REGISTRIES
    from fairseq.tasks import TASK_DATACLASS_REGISTRY

    registries = {"task": TASK_DATACLASS_REGISTRY, "model": MODEL_DATACLASS_REGISTRY,
                  **{name: r["dataclass_registry"] for name, r in REGISTRIES.items()}}

    opts = dict(zip(args[0::2], args[1::2]))
    config_dir = REPO / opts["--config-dir"]
    name = opts["--config-name"]
    assert (config_dir / f"{name}.yaml").is_file(), f"no config {config_dir / name}.yaml"
    cfg = OmegaConf.load(config_dir / f"{name}.yaml")
    for override in args[4:]:
        key, _, value = override.lstrip("+").partition("=")
        if "." not in key:
            assert (config_dir / key / f"{value}.yaml").is_file(), f"no config group {key}/{value}.yaml"
            continue
        section, field = key.split(".", 1)
        assert section in FairseqConfig.__dataclass_fields__, f"{override}: no section {section}"
        if section in registries:
            dataclass = registries[section][cfg[section]["_name"]]
        else:
            spec = FairseqConfig.__dataclass_fields__[section]
            dataclass = type(spec.default_factory() if callable(spec.default_factory) else spec.default)
        assert field in dataclass.__dataclass_fields__, f"{override}: {dataclass.__name__} has no {field}"


def _check_pytest(args):
    help_text = subprocess.run([sys.executable, "-m", "pytest", "--help"], capture_output=True, text=True,
                               cwd=REPO).stdout
    for arg in args:
        if arg.startswith("-"):
            assert re.search(rf"(^|[\s,]){re.escape(arg)}([\s=,]|$)", help_text, re.M), f"pytest has no {arg}"


def _check_tokens(tokens, partial=False):
    """None if the command parses, else why not (``partial``: see
    :func:`_parse_error`)."""
    tool, args = tokens[0], tokens[1:]
    if tool in ("python", "pip"):
        return f"`{tool}`: the docs use python3 (and python3 -m pip) throughout"
    if tool == "torchrun":
        from torch.distributed.run import get_args_parser

        parsed, _ = get_args_parser().parse_known_args(["1" if a.startswith("$") else a for a in args])
        rest = [parsed.training_script, *parsed.training_script_args]
        return _check_tokens(rest, partial)
    if tool == "bash":
        script = REPO / args[0]
        if not script.is_file():
            return f"no such script {args[0]}"
        module = re.search(r'-m (\S+) "\$@"', script.read_text())
        if module:
            return _check_tokens(["python3", "-m", module.group(1), *args[1:]], partial)
        target = re.search(r'(scripts/\w+\.py)"? "\$@"', script.read_text())
        if target:
            return _check_tokens(["python3", target.group(1), *args[1:]], partial)
        return None   # a shell script of its own (its flags are not argparse's)
    if tool == "python3":
        if args[:2] == ["-m", "pytest"]:
            _check_pytest(args[2:])
            return None
        if args[:1] == ["-m"]:
            module, rest = args[1], args[2:]
            if re.search(r"\.[A-Z]+$", module):   # fairseq_ctx.analysis.NAME: a family of modules
                return None
            return _parse_error(lambda: _run_module(module), module, rest, partial)
        script = REPO / args[0]
        if not script.is_file():
            return f"no such script {args[0]}"
        return _parse_error(lambda: runpy.run_path(str(script), run_name="__main__"), str(script), args[1:], partial)
    if tool in CONSOLE_SCRIPTS:
        module, func = CONSOLE_SCRIPTS[tool].split(":")
        if tool == "fairseq-ctx-translate":  # parses only once the checkpoint is read: fairseq's parser here
            from fairseq import options

            from fairseq_ctx import translate

            task = args[args.index("--task") + 1] if "--task" in args else "translation"
            return _parse_error(lambda: options.parse_args_and_arch(translate._parser(task), args), tool, args,
                                partial)

        def run():
            import importlib

            getattr(importlib.import_module(module), func)()

        return _parse_error(run, tool, args, partial)
    if tool == "fairseq-hydra-train":
        _check_hydra(args)
        return None
    if tool in FAIRSEQ_TOOLS:
        if tool == "fairseq-train" and "--arch" not in args and (partial or "..." in args):
            # --arch left out: any one, so that fairseq builds its parser
            args = [*args, "--arch", "transformer"]
        return _parse_error(_fairseq_run(FAIRSEQ_TOOLS[tool]), tool, args, partial)
    if tool == "scripts/ctx-args":
        return None if all((REPO / a).is_file() for a in args if not a.startswith("-")) else "no such file"
    if "*" in tool:   # fairseq-ctx-*: a family of tools
        return None
    if tool.startswith(("fairseq", "scripts/")):
        return f"no tool {tool}"
    return None if shutil.which(tool) else f"{tool}: not installed"


@pytest.fixture(scope="module")
def registered():
    import fairseq_ctx

    fairseq_ctx.register()


@pytest.mark.unit
def test_docs_show_commands():
    """The extraction finds what it should (a check of the check)."""
    assert len(ALL_COMMANDS) > 40
    tools = {_expand(c)[0] for _, c, _ in ALL_COMMANDS}
    assert {"fairseq-train", "fairseq-ctx-translate", "fairseq-hydra-train", "python3", "bash"} <= tools


@pytest.mark.parametrize("where,line,inline", ALL_COMMANDS, ids=[w for w, _, _ in ALL_COMMANDS])
def test_command_parses(registered, where, line, inline):
    problem = _check_tokens(_expand(line), partial=inline)
    assert problem is None, f"{where}: {line}\n-> {problem}"


def test_an_unknown_flag_is_caught(registered):
    assert "unrecognized arguments: --no-such-flag" in _check_tokens(
        ["fairseq-ctx-score", "--ref", "r", "--hyp", "a=b", "--no-such-flag"])
    assert "unrecognized arguments: --beamm" in _check_tokens(
        ["fairseq-ctx-translate", "DATA-BIN", "--path", "CKPT", "--beamm", "4"])
    assert "unrecognized arguments" in _check_tokens(["fairseq-train", "DATA-BIN", "--user-dir", "fairseq_ctx",
                                                      "--arch", "transformer_ctxsan", "--ctxsan-nope", "1"])
    assert _check_tokens(["python3", "-m", "fairseq_ctx.tables", "TABLE", "--gpus", "N"]) is None
    assert "python3" in _check_tokens(["python", "-c", "print(1)"])
    assert "required" in _check_tokens(["fairseq-ctx-score", "--hyp", "a=b"])   # a whole command needs them
    assert _check_tokens(["fairseq-ctx-score", "--hyp", "a=b"], partial=True) is None   # prose may name a flag
    with pytest.raises(AssertionError, match="python3"):
        _expand("fairseq-train D --user-dir $(python -c 'print(1)')")


# ---------------------------------------------------------------------------
# quoted messages
# ---------------------------------------------------------------------------

def _quoted_error_lines():
    """Every backticked span of the docs holding ``error:``."""
    out = []
    for doc in DOCS:
        text = re.sub(r"\s*\n\s*", " ", doc.read_text(encoding="utf-8"))
        out += [(doc.name, m.group(1)) for m in re.finditer(r"`([^`]*\berror:[^`]*)`", text)]
    return out


def _matches(quote: str, printed: str) -> bool:
    """``printed`` is ``quote``, where the quote's ``...`` stands for any
    text and a one-letter placeholder (``N``, ``D``) for one word; the
    printed line may go on after it. A quote with the error prefix must be
    printed with it; one without is the message after it."""
    if quote.startswith(ERROR_PREFIX):
        if not printed.startswith(ERROR_PREFIX):
            return False
        quote, printed = quote[len(ERROR_PREFIX):], printed[len(ERROR_PREFIX):]
    elif printed.startswith(ERROR_PREFIX):
        printed = printed[len(ERROR_PREFIX):]
    parts = [".*" if word == "..." else r"\S+" if re.fullmatch(r"[A-Z]", word) else re.escape(word)
             for word in quote.split()]
    return re.match(r"\s+".join(parts), printed, re.S) is not None


def _printed_refused(tmp_path):
    import torch

    from fairseq import checkpoint_utils

    from fairseq_ctx.errors import CheckpointLoadError

    class Smuggled:
        def __reduce__(self):
            return (print, ("ran",))

    path = tmp_path / "evil.pt"
    torch.save({"model": Smuggled()}, path)
    with pytest.raises(CheckpointLoadError) as e:
        checkpoint_utils.load_checkpoint_to_cpu(str(path))
    return ERROR_PREFIX + str(e.value)


def _printed_truncated(tmp_path):
    import torch

    from fairseq import checkpoint_utils

    from fairseq_ctx.errors import CheckpointLoadError

    path = tmp_path / "cut.pt"
    torch.save({"model": {"w": torch.zeros(1000)}}, path)
    path.write_bytes(path.read_bytes()[:2000])
    with pytest.raises(CheckpointLoadError) as e:
        checkpoint_utils.load_checkpoint_to_cpu(str(path))
    return ERROR_PREFIX + str(e.value)


def _corpus(tmp_path, monkeypatch, src_lines, tgt_lines):
    """fairseq-ctx-prepare-corpus on corpus/{train,valid,test}.{de,en} (tsv)
    in tmp_path; its stderr."""
    from fairseq_ctx_prep import user_corpus

    monkeypatch.chdir(tmp_path)
    (tmp_path / "corpus").mkdir()
    for split in ("train", "valid", "test"):
        (tmp_path / "corpus" / f"{split}.de").write_text("".join(f"d1\tw{i}\n" for i in range(3)))
        (tmp_path / "corpus" / f"{split}.en").write_text("".join(f"d1\tW{i}\n" for i in range(3)))
    (tmp_path / "corpus" / "train.de").write_text("".join(line + "\n" for line in src_lines))
    (tmp_path / "corpus" / "train.en").write_text("".join(line + "\n" for line in tgt_lines))
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert user_corpus.main(["--source-lang", "de", "--target-lang", "en", "--train", "corpus/train",
                                 "--valid", "corpus/valid", "--test", "corpus/test", "--dest", "out"]) == 1
    return err.getvalue().strip()


def _printed_no_docid(tmp_path, monkeypatch):
    lines = [f"d{i // 3}\tw{i}" for i in range(10)]
    broken = list(lines)
    broken[6] = "W6 without its id"
    return _corpus(tmp_path, monkeypatch, lines, broken)


def _printed_line_counts(tmp_path, monkeypatch):
    lines = [f"d{i // 3}\tw{i}" for i in range(42)]
    return _corpus(tmp_path, monkeypatch, lines, lines[:41])


def _printed_size_check(tmp_path, monkeypatch):
    from fairseq_ctx_prep import pipeline, wmt16_ro_en

    spec = wmt16_ro_en.COMMAND.make_spec(wmt16_ro_en.COMMAND.parse_args(["--from", str(tmp_path)]))
    with pytest.raises(pipeline.PrepError) as e:
        pipeline.check_sizes(spec, {"train": 10, "valid": 7, "test": 1999}, False)
    return str(e.value)


def _printed_missing_data(tmp_path, monkeypatch):
    from fairseq_ctx.cli import check_data_dir
    from fairseq_ctx.errors import MissingFileError

    monkeypatch.chdir(tmp_path)
    with pytest.raises(MissingFileError) as e:
        check_data_dir("data/bibel/bin")
    return ERROR_PREFIX + str(e.value)


def _printed_other_document_flags(tmp_path):
    """The document task building a model from a checkpoint trained without
    --concat-context, on a command line that gives it."""
    from argparse import Namespace

    from fairseq_ctx.errors import ConfigError
    from fairseq_ctx.tasks.document_translation import DocumentTranslationTask

    task = DocumentTranslationTask.__new__(DocumentTranslationTask)  # only its flags are read
    task.cfg = Namespace(concat_context=True, target_context=False, context_separator="<sep>", context_size=1,
                         context_mode="previous")
    trained = dict(concat_context=False, target_context=False, context_separator="<sep>", context_size=1,
                   context_mode="previous")
    with pytest.raises(ConfigError) as e:
        task._check_trained_flags(trained)
    return ERROR_PREFIX + str(e.value)


# quote in the docs -> how to make the code print it (the first line it prints)
QUOTED = {
    "fairseq_ctx: error: --concat-context: the checkpoint was trained with no --concat-context, this command gives "
    "--concat-context; decode with the document-task flags it was trained with": _printed_other_document_flags,
    "fairseq_ctx: error: DATA-BIN data/bibel/bin: no such directory ...": _printed_missing_data,
    "fairseq_ctx: error: refusing to load checkpoint ...": _printed_refused,
    "fairseq_ctx: error: cannot read checkpoint ...": _printed_truncated,
    "fairseq_ctx: error: corpus/train.en line 7: no document id (expected DOCID<TAB>sentence)": _printed_no_docid,
    "corpus/train.en has 41 lines, corpus/train.de has more (line 42)": _printed_line_counts,
    "valid has N sentence pairs, but newsdev2016 has 1999 (published size); ...": _printed_size_check,
}
PREFIX_ONLY = {ERROR_PREFIX.strip(), ERROR_PREFIX + "...", ERROR_PREFIX + "MESSAGE"}
ARGPARSE_FORM = "COMMAND: error: ..."   # argparse's usage errors, the documented exception (docs/errors.md)
# documented exceptions to the prefix, to remove once their tool prints it
NOT_YET = set()  # quoted error lines the code does not print yet


@pytest.mark.unit
def test_quoted_error_lines_have_the_one_prefix_and_are_known():
    quotes = _quoted_error_lines()
    assert quotes, "no quoted error line found"
    for doc, quote in quotes:
        if quote == ARGPARSE_FORM or quote in NOT_YET:
            continue
        assert quote.startswith(ERROR_PREFIX.strip()), f"{doc}: `{quote}` does not start with {ERROR_PREFIX!r}"
        assert quote in PREFIX_ONLY or quote in QUOTED, f"{doc}: `{quote}` is not checked against the code"


@pytest.mark.unit
def test_every_checked_quote_is_in_the_docs():
    text = " ".join(re.sub(r"\s*\n\s*", " ", doc.read_text(encoding="utf-8")) for doc in DOCS)
    for quote in QUOTED:
        assert f"`{quote}`" in text, f"`{quote}` is no longer quoted: remove it here"


@pytest.mark.unit
@pytest.mark.parametrize("quote", list(QUOTED))
def test_quoted_message_is_what_the_code_prints(registered, tmp_path, monkeypatch, quote):
    produce = QUOTED[quote]
    printed = produce(tmp_path, monkeypatch) if "monkeypatch" in produce.__code__.co_varnames else produce(tmp_path)
    printed = printed.splitlines()[0]
    assert _matches(quote, printed), (quote, printed)


@pytest.mark.unit
def test_matching_is_strict():
    assert _matches("valid has N sentence pairs, but x ...", "valid has 7 sentence pairs, but x y z")
    assert not _matches("valid has N sentence pairs", "valid has 7 pairs")
    assert not _matches(ERROR_PREFIX + "cannot read checkpoint ...", "other: error: cannot read checkpoint a")
    assert not _matches("refusing to load checkpoint ...", ERROR_PREFIX + "cannot read checkpoint a")


def test_the_plugin_and_the_preparation_package_share_the_error_prefix_without_importing_each_other():
    """One prefix for every tool; the plugin (what --user-dir loads, every
    model, the task, the study) never imports fairseq_ctx_prep, so a copy of
    fairseq_ctx stands alone."""
    import subprocess
    import sys

    from fairseq_ctx.errors import ERROR_PREFIX as plugin

    assert plugin == ERROR_PREFIX == "fairseq_ctx: error: "
    code = ("import sys, fairseq_ctx, fairseq_ctx.models, fairseq_ctx.tasks.document_translation, "
            "fairseq_ctx.study.__main__, fairseq_ctx.study.data, fairseq_ctx.translate, fairseq_ctx.evaluation.context_usage; "
            "print(sorted(m for m in sys.modules if m.startswith('fairseq_ctx_prep')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
