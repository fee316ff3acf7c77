"""Dataclass configs of the architectures, for ``fairseq-hydra-train`` and
``--help`` alike.

Each model is registered with ``@register_model(name, dataclass=...)``; its
dataclass (``TransformerDCConfig``, ``TransformerCtxSanConfig``,
``TransformerGretConfig``, ``TransformerCtxEncConfig``, beside each model)
extends :class:`TransformerFlatConfig` with the architecture's own fields
(help text, type, choices). The same dataclass gives

* the model flags of ``fairseq-train --arch ...`` (``add_args`` generates them
  with fairseq's ``gen_parser_from_dataclass``, as fairseq's own
  ``TransformerModel`` does from its ``TransformerConfig``): the flag names,
  help texts and types are the ones the plugin always had;
* the ``model:`` section of a hydra config (``model._name: transformer_dc``
  plus fields), checked against the field types and choices when fairseq
  merges it with the dataclass.

Design choices:

* Flat: ``encoder_embed_dim``, not ``encoder.embed_dim``. The command line,
  the architecture functions (``transformer_dc_iwslt`` ...), the builders'
  ``TransformerConfig.from_namespace(args)`` and every checkpoint written so
  far use the flat names, and fairseq 0.12 converts a command line into a
  nested dataclass wrongly (its ``encoder``/``decoder`` fields are lost), so
  the flat fields of fairseq's Transformer are generated here from fairseq's
  own :class:`~fairseq.models.transformer.TransformerConfig` (same names, help
  and types as the flags of ``--arch transformer``).
* A field that an architecture function sets (the dimensions, dropout, the
  architecture's own flags ...) defaults to None, meaning "not set": the
  architecture function of the chosen ``--arch`` / ``model._name`` fills
  what is not set, exactly as fairseq-train's model flags (which have no
  argparse defaults) always did. So ``model._name: transformer_dc_iwslt`` in
  a hydra config gets the IWSLT preset, and a recipe lists only the flags its
  ``.args`` file gives. The other fields (``base_layers``,
  ``max_source_positions`` ...) keep fairseq's defaults, which fairseq reads
  from the model config directly.
* Legacy checkpoints (model arguments stored as an ``argparse.Namespace``)
  load as before: :meth:`TransformerFlatConfig.from_namespace` passes the
  namespace through unchanged.

:func:`architecture_args` turns whatever fairseq hands to ``build_model``
(a namespace, a DictConfig or a dataclass) into the flat namespace the
architecture functions and builders read.
"""
import argparse
import inspect
from dataclasses import field, fields, is_dataclass, make_dataclass
from enum import Enum
from typing import Any, List, Optional, Tuple

from fairseq.dataclass import FairseqDataclass
from fairseq.dataclass.utils import gen_parser_from_dataclass
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_NAME_REGISTRY
from fairseq.models.transformer import TransformerConfig
from fairseq.models.transformer.transformer_legacy import base_architecture
from omegaconf import OmegaConf, open_dict

__all__ = ["TransformerFlatConfig", "add_args_from_dataclass", "architecture_args", "register_base_architecture",
           "root_config", "clear_in_stored_config", "unset"]


def unset(help: str, **metadata) -> Any:
    """A dataclass field that defaults to "not set" (None; the architecture
    function fills it). ``metavar``: the flag's metavar in ``--help``;
    ``choices``: the values of a free-form string flag (no enum: the
    model's ``validate_<arch>_args`` checks them with an error naming the
    flag; list them in the help too)."""
    return field(default=None, metadata={"help": help, **metadata})


def _optional(tp):
    return tp if type(None) in getattr(tp, "__args__", ()) else Optional[tp]


def _is_derived(f) -> bool:
    """A field fairseq gives no flag: its default is an interpolation of
    another field and it has no help (``decoder.input_dim``; the architecture
    functions set it from ``decoder_embed_dim``)."""
    return isinstance(f.default, str) and f.default.startswith("${") and not f.metadata.get("help")


def _set_by_base_architecture() -> frozenset:
    """The flags fairseq's ``base_architecture`` (which every preset ends in)
    gives a default: the fields left "not set" (None) here."""
    args = argparse.Namespace()
    base_architecture(args)
    return frozenset(vars(args))


def _flat_transformer_fields() -> List[Tuple[str, Any, Any]]:
    preset = _set_by_base_architecture()

    def flat(name, f, help_prefix=""):
        meta = dict(f.metadata)
        if help_prefix and meta.get("help"):
            meta["help"] = f"{help_prefix}: {meta['help']}"
        if name in preset:
            return name, _optional(f.type), field(default=None, metadata=meta)
        return name, f.type, field(default=f.default, metadata=meta)

    out = []
    for f in fields(TransformerConfig):
        if f.name.startswith("_"):
            continue
        if inspect.isclass(f.type) and issubclass(f.type, FairseqDataclass):
            # encoder / decoder / quant_noise: prefixed names, help as fairseq's flags print it
            for sub in fields(f.type):
                if not sub.name.startswith("_") and not _is_derived(sub):
                    out.append(flat(f"{f.name}_{sub.name}", sub, f.name.replace("_", "-")))
        else:
            out.append(flat(f.name, f))
    return out


TransformerFlatConfig = make_dataclass("TransformerFlatConfig", _flat_transformer_fields(), bases=(FairseqDataclass,))
TransformerFlatConfig.__module__ = __name__
TransformerFlatConfig.__doc__ = (
    "fairseq's Transformer flags as flat fields (``encoder_embed_dim``, ``dropout`` ...), generated from "
    "fairseq's TransformerConfig; those the architecture functions set are None (not set) until they do.")


def _from_namespace(cls, args):
    """Legacy model arguments (an ``argparse.Namespace`` stored in a
    checkpoint, or built by ``fairseq-train``'s parser) pass through
    unchanged: the model reads them as it always did."""
    return args


TransformerFlatConfig.from_namespace = classmethod(_from_namespace)


def add_args_from_dataclass(parser, dataclass_cls):
    """The model flags of ``dataclass_cls``: fairseq's
    ``gen_parser_from_dataclass`` without argparse defaults (the
    architecture functions set them), as fairseq's ``TransformerModel``
    makes its own, plus each field's ``metavar`` from its metadata."""
    gen_parser_from_dataclass(parser, dataclass_cls(), delete_default=True)
    by_dest = {a.dest: a for a in parser._group_actions} if hasattr(parser, "_group_actions") else \
        {a.dest: a for a in parser._actions}
    for f in fields(dataclass_cls):
        action = by_dest.get(f.name)
        if action is None:
            continue
        if f.metadata.get("metavar"):
            action.metavar = f.metadata["metavar"]


def register_base_architecture(model_name: str):
    """``register_model(name, dataclass=...)`` registers a no-op architecture
    under the model's own name; this decorator puts the Base preset there
    (``--arch transformer_dc`` / ``model._name: transformer_dc``)."""

    def deco(fn):
        if ARCH_MODEL_NAME_REGISTRY.get(model_name) != model_name:
            raise ValueError(f"register_model({model_name!r}, dataclass=...) must come first")
        ARCH_CONFIG_REGISTRY[model_name] = fn
        return fn

    return deco


def plain_value(value):
    """A config value as YAML/argparse hold it: enums by their value, tuples as lists."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [plain_value(v) for v in value]
    return value


def architecture_args(cfg, model_name: str) -> argparse.Namespace:
    """The flat namespace ``build_model`` works on, with the architecture
    function of ``cfg``'s arch applied (``arch`` or ``_name``; the model's
    Base preset when it names none of this model's architectures).

    * an ``argparse.Namespace`` (fairseq-train's parser, legacy checkpoints)
      is used as it is, as before;
    * a DictConfig or dataclass (fairseq-hydra-train, fairseq-train's
      converted config, checkpoints written since) becomes a new namespace of
      its set (not None) fields, so the architecture function fills the
      others: what a hydra config leaves out is what a command line leaves
      out."""
    if isinstance(cfg, argparse.Namespace):
        args = cfg
    else:
        if OmegaConf.is_config(cfg):
            values = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
        elif is_dataclass(cfg):
            values = {f.name: getattr(cfg, f.name) for f in fields(cfg)}
        else:
            values = dict(vars(cfg))
        args = argparse.Namespace(**{k: plain_value(v) for k, v in values.items() if v is not None})
    name = getattr(args, "arch", None) or getattr(args, "_name", None)
    if ARCH_MODEL_NAME_REGISTRY.get(name) != model_name:
        name = model_name
    if getattr(args, "arch", None) is None:
        args.arch = name
    if getattr(args, "_name", None) is None:
        args._name = name
    ARCH_CONFIG_REGISTRY[name](args)
    return args


def root_config(cfg):
    """The whole training config (``common``, ``checkpoint``, ``model`` ...)
    that the model config ``cfg`` belongs to, or None (a namespace, or a
    model config on its own). ``fairseq.models.build_model`` may hand over a
    copy merged with the dataclass; the copy keeps the original's parent."""
    if not OmegaConf.is_config(cfg):
        return None
    parent = cfg._get_parent()
    if parent is None or not OmegaConf.is_dict(parent) or "model" not in parent:
        return None
    return parent


def clear_in_stored_config(cfg, key: str):
    """Set ``key`` to None in the model config that the checkpoints will
    store: ``cfg`` itself and, when fairseq built from a merged copy, the
    training config's ``model`` section."""
    targets = [cfg]
    root = root_config(cfg)
    if root is not None and root.model is not None and root.model is not cfg:
        targets.append(root.model)
    for target in targets:
        if isinstance(target, argparse.Namespace) or not OmegaConf.is_config(target):
            if hasattr(target, key):
                setattr(target, key, None)
        elif key in target:
            with open_dict(target):
                target[key] = None
