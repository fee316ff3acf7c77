"""The training configs as hydra YAML, for ``fairseq-hydra-train``.

``configs/**/*.args`` stay the one source of truth; ``configs/hydra/`` is
generated from them (and checked in, so that ``fairseq-hydra-train`` works
from a checkout)::

    python3 -m fairseq_ctx.tables.hydra_configs           # (re)write configs/hydra/
    python3 -m fairseq_ctx.tables.hydra_configs --check   # exit 1 and name the stale files

``tests/test_hydra.py`` fails while a generated file is stale. What is
generated:

* ``configs/hydra/<dir>_<name>.yaml`` for every training config (an argument
  file that names ``--arch``; ``dc/table5/03_layers_1_3.args`` becomes
  ``dc_table5_03_layers_1_3.yaml``: fairseq's hydra entry point finds the
  schema of a primary config only when its name has no ``/``). It holds the
  flags the argument file gives (includes expanded, later flags win), each
  in the section fairseq-train's own conversion puts it (``--lr`` in
  ``optimization``, ``--dropout`` in ``model``, ``--context-size`` in
  ``task`` ...), plus the ``_name`` of the task, model, criterion,
  optimizer and learning-rate scheduler. Everything a flag does not set is
  what fairseq-train leaves to defaults: the model's architecture function
  (``model._name``) fills the unset model fields, as for ``--arch``.
* ``configs/hydra/data/<dataset>.yaml`` for every ``configs/data/<dataset>.args``
  (the language direction), selected with ``data=<dataset>``.

Generation and averaging configs have no hydra counterpart
(``fairseq-hydra-train`` only trains). Run from the repository root::

    fairseq-hydra-train --config-dir configs/hydra --config-name dc_wmt14_en_de_enc_dc \\
        data=wmt14_en_de task.data=data/wmt14-en-de/bin

Paths in the configs (``common.user_dir: fairseq_ctx``,
``checkpoint.save_dir``) are relative to the directory the command runs in,
as with the argument files: the configs keep hydra from changing directory
(``hydra.job.chdir: false``) and put hydra's own output (``.hydra/``, the
log) in the save directory.
"""
import argparse
import os
import sys
from dataclasses import fields, is_dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import ERROR_PREFIX
from .config import ArgLine, ArgsFileError, read_arg_lines

OUT_DIR = "hydra"
DATA_GROUP = "data"
PROG = "python3 -m fairseq_ctx.tables.hydra_configs"
REGISTRY_GROUPS = ("task", "model", "criterion", "optimizer", "lr_scheduler")
# flags whose value names another registry entry: they become that section's _name
NAME_FLAGS = {"arch": "model", "task": "task", "criterion": "criterion", "optimizer": "optimizer",
              "lr_scheduler": "lr_scheduler"}
HYDRA_SECTION = {"run": {"dir": "${checkpoint.save_dir}"}, "job": {"chdir": False}}


def is_training_config(lines: Sequence[ArgLine]) -> bool:
    return any(a.flag == "--arch" or a.flag.startswith("--arch=") for a in lines)


def config_name(rel: Path) -> str:
    """``dc/table5/03_layers_1_3.args`` -> ``dc_table5_03_layers_1_3``."""
    return "_".join(rel.with_suffix("").parts)


def training_configs(configs: Path) -> List[Path]:
    """Every argument file under ``configs`` that is a complete
    fairseq-train config (names ``--arch``), in path order."""
    out = []
    for path in sorted(configs.rglob("*.args")):
        generation = path.name.endswith(".generate.args") or path.name.startswith("generate")
        if path.relative_to(configs).parts[0] in (OUT_DIR, "data") or generation:
            continue
        if is_training_config(read_arg_lines(path)):
            out.append(path)
    return out


def data_configs(configs: Path) -> List[Path]:
    return sorted(p for p in (configs / "data").glob("*.args") if not p.name.endswith(".generate.args"))


# ---------------------------------------------------------------------------
# flags -> sections


def _parse(tokens: List[str]):
    """fairseq-train's parser (the architecture's and task's flags included)
    and the namespace of ``tokens``; raises ValueError with argparse's message."""
    import contextlib
    import io

    from fairseq import options

    import fairseq_ctx

    fairseq_ctx.register()
    parser = options.get_training_parser()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = options.parse_args_and_arch(parser, ["DATA-BIN", *tokens])
    except SystemExit:
        raise ValueError((err.getvalue().strip().splitlines() or ["argparse error"])[-1]) from None
    return parser, args


def _section_dataclasses(args) -> Dict[str, Any]:
    """Section name -> the dataclass of that section for the namespace
    ``args`` (the chosen task, model, criterion ... for the registry
    sections; None for a model without one, such as fairseq's
    ``transformer``)."""
    from fairseq.dataclass.configs import FairseqConfig
    from fairseq.models import ARCH_MODEL_NAME_REGISTRY, MODEL_DATACLASS_REGISTRY
    from fairseq.registry import REGISTRIES
    from fairseq.tasks import TASK_DATACLASS_REGISTRY

    out = {}
    for f in fields(FairseqConfig):
        if f.name.startswith("_"):
            continue
        if is_dataclass(f.type):
            out[f.name] = f.type
        elif f.name == "model":
            arch = getattr(args, "arch", None)
            out[f.name] = MODEL_DATACLASS_REGISTRY.get(ARCH_MODEL_NAME_REGISTRY.get(arch, arch))
        elif f.name == "task":
            out[f.name] = TASK_DATACLASS_REGISTRY.get(getattr(args, "task", None))
        elif f.name in REGISTRIES:
            out[f.name] = REGISTRIES[f.name]["dataclass_registry"].get(getattr(args, f.name, None))
    return out


def _legacy_model_keys(args) -> frozenset:
    """The model flags of an architecture without a dataclass (fairseq's own
    ``transformer``): what its ``add_args`` defines. fairseq-train keeps
    such a model's arguments as a flat namespace, and fairseq-hydra-train
    passes its ``model:`` section to the architecture function likewise."""
    from fairseq.models import ARCH_MODEL_REGISTRY

    parser = argparse.ArgumentParser(argument_default=argparse.SUPPRESS, add_help=False)
    ARCH_MODEL_REGISTRY[args.arch].add_args(parser)
    return frozenset(a.dest for a in parser._actions)


def _field_value(f, value):
    """``value`` as fairseq-train's conversion stores it in field ``f``
    (``fairseq.dataclass.utils._override_attr``: tuples become lists, numbers
    and booleans take the field's type)."""
    import ast
    import inspect

    from fairseq.dataclass.utils import interpret_dc_type

    from fairseq_ctx.models.model_config import plain_value

    field_type = interpret_dc_type(f.type)
    if isinstance(value, str) and not value.startswith("${") and field_type is not str and not (
            inspect.isclass(field_type) and issubclass(field_type, Enum)):
        value = ast.literal_eval(value)
    if isinstance(value, tuple):
        value = list(value)
    if value is not None and field_type in (int, float, bool):
        value = field_type(value)
    return plain_value(value)


def sections(lines: Sequence[ArgLine], repo: Path, names: bool = True) -> Dict[str, Dict[str, Any]]:
    """The hydra sections of an argument file's flags: each flag that the
    file gives, in every section whose dataclass has its field (where
    fairseq-train's ``convert_namespace_to_omegaconf`` puts it), with the
    value fairseq-train parses; a field whose default is an interpolation of
    another section (``optimizer.lr: ${optimization.lr}``) follows that one
    and is not written. ``names``: also the ``_name`` of the task, model,
    criterion, optimizer and scheduler fairseq-train would use (its defaults
    included). Raises ValueError naming the file and line of a flag that no
    section takes."""
    from fairseq_ctx.models.model_config import plain_value

    tokens = [tok for a in lines for tok in a.tokens]
    if not is_training_config(lines):
        tokens = ["--arch", "transformer", *tokens]  # a partial config (the direction of a dataset)
    parser, args = _parse(tokens)
    dataclasses = _section_dataclasses(args)
    legacy_model = _legacy_model_keys(args) if dataclasses.get("model") is None else frozenset()
    out: Dict[str, Dict[str, Any]] = {}
    if names:
        for flag_dest, section in NAME_FLAGS.items():
            value = getattr(args, flag_dest, None)
            if value is not None:
                out.setdefault(section, {})["_name"] = value
    for a in lines:
        option = a.flag.split("=", 1)[0]
        action = parser._option_string_actions.get(option)
        if action is None:
            raise ValueError(f"{a.origin}: {option} is not a fairseq-train flag")
        dest = action.dest
        if dest in NAME_FLAGS:
            if names:
                out.setdefault(NAME_FLAGS[dest], {})["_name"] = getattr(args, dest)
            continue
        value = getattr(args, dest)
        if dest == "user_dir" and value and os.path.isabs(value):
            rel = os.path.relpath(value, repo)
            value = value if rel.startswith("..") else rel
        placed = False
        for section, dc in dataclasses.items():
            if dc is None:
                if section == "model" and dest in legacy_model:
                    out.setdefault(section, {})[dest] = plain_value(value)
                    placed = True
                continue
            f = next((f for f in fields(dc) if f.name == dest), None)
            if f is None:
                continue
            placed = True
            if isinstance(f.default, str) and f.default.startswith("${"):
                continue
            out.setdefault(section, {})[dest] = _field_value(f, value)
        if not placed:
            raise ValueError(f"{a.origin}: {option} has no place in fairseq's hydra config")
    return {s: out[s] for s in dataclasses if s in out}


# ---------------------------------------------------------------------------
# rendering


def _yaml(data: Dict[str, Any]) -> str:
    from omegaconf import OmegaConf

    return OmegaConf.to_yaml(OmegaConf.create(data))


def render_training(path: Path, configs: Path) -> str:
    rel = path.relative_to(configs)
    repo = configs.parent
    body = sections(read_arg_lines(path), repo)
    body.setdefault("task", {})["data"] = "???"
    name = config_name(rel)
    head = [
        f"# Generated from configs/{rel.as_posix()} by `{PROG}`: edit that file (the source of truth)",
        "# and regenerate. Train from the repository root (paths are relative to it, as with the .args file):",
        f"#   fairseq-hydra-train --config-dir configs/hydra --config-name {name} \\",
        "#       data=DATASET task.data=DATA-BIN",
        "# (DATASET: one of configs/hydra/data/, the language direction). docs/hydra.md",
    ]
    defaults = {"defaults": ["_self_", {DATA_GROUP: None}], "hydra": HYDRA_SECTION}
    return "\n".join(head) + "\n" + _yaml(defaults) + _yaml(body)


def render_data(path: Path, configs: Path) -> str:
    rel = path.relative_to(configs)
    body = sections(read_arg_lines(path), configs.parent, names=False)
    head = [
        "# @package _global_",
        f"# Generated from configs/{rel.as_posix()} by `{PROG}`: edit that file and regenerate.",
        f"# Select with data={path.stem} beside a training config of configs/hydra/.",
    ]
    return "\n".join(head) + "\n" + _yaml(body)


def generate(configs: Path) -> Dict[Path, str]:
    """Generated file (relative to ``configs/hydra``) -> its text."""
    out: Dict[Path, str] = {}
    origin: Dict[Path, Path] = {}
    for path in training_configs(configs):
        target = Path(config_name(path.relative_to(configs)) + ".yaml")
        if target in origin:
            raise ValueError(f"{path} and {origin[target]} both become configs/{OUT_DIR}/{target}")
        origin[target] = path
        out[target] = render_training(path, configs)
    for path in data_configs(configs):
        out[Path(DATA_GROUP) / (path.stem + ".yaml")] = render_data(path, configs)
    return out


def stale(configs: Path, generated: Optional[Dict[Path, str]] = None) -> List[str]:
    """Files of ``configs/hydra`` that differ from what would be generated
    (missing, changed, or left over from a removed argument file)."""
    generated = generate(configs) if generated is None else generated
    root = configs / OUT_DIR
    problems = []
    for rel, text in generated.items():
        path = root / rel
        if not path.is_file():
            problems.append(f"configs/{OUT_DIR}/{rel.as_posix()}: missing")
        elif path.read_text(encoding="utf-8") != text:
            problems.append(f"configs/{OUT_DIR}/{rel.as_posix()}: differs from its .args file")
    for path in sorted(root.rglob("*.yaml")) if root.is_dir() else []:
        if path.relative_to(root) not in generated:
            problems.append(f"configs/{OUT_DIR}/{path.relative_to(root).as_posix()}: no .args file generates it")
    return problems


def write(configs: Path, generated: Optional[Dict[Path, str]] = None) -> Tuple[int, int]:
    """Write ``configs/hydra``; returns (files written, files removed)."""
    generated = generate(configs) if generated is None else generated
    root = configs / OUT_DIR
    written = removed = 0
    for rel, text in generated.items():
        path = root / rel
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            written += 1
    for path in sorted(root.rglob("*.yaml")):
        if path.relative_to(root) not in generated:
            path.unlink()
            removed += 1
    return written, removed


def main(argv=None) -> int:
    from .datasets import find_root
    from .definition import TableError

    p = argparse.ArgumentParser(prog=PROG, description="Generate configs/hydra/*.yaml (fairseq-hydra-train) from "
                                                       "the argument files configs/**/*.args.")
    p.add_argument("--root", metavar="DIR", help="the checkout (default: the one containing the current directory)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 naming the files that are stale")
    opts = p.parse_args(argv)
    try:
        configs = find_root(Path(opts.root) if opts.root else None) / "configs"
        generated = generate(configs)
    except (ArgsFileError, ValueError, TableError) as e:
        print(f"{ERROR_PREFIX}{e}", file=sys.stderr)
        return 1
    if opts.check:
        problems = stale(configs, generated)
        for line in problems:
            print(line, file=sys.stderr)
        if problems:
            print(f"{len(problems)} stale file(s): run `{PROG}`", file=sys.stderr)
        return 1 if problems else 0
    written, removed = write(configs, generated)
    print(f"configs/{OUT_DIR}: {len(generated)} files ({written} written, {removed} removed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
