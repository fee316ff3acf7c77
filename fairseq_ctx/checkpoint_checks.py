"""One clear line when a checkpoint does not fit the model it is loaded into.

Two ways this happens, both ending today in torch's ``Error(s) in loading
state_dict`` with a stack trace:

* **another architecture**: ``fairseq-train --restore-file ctxsan.pt --arch
  transformer_dc`` (or ``--finetune-from-model``); fairseq's trainer catches
  torch's error and raises a bare ``Exception("Cannot load model parameters
  from checkpoint ...; please ensure that the architectures match")`` over it;
* **other dictionaries**: ``fairseq-generate``/``-interactive``/``-validate``
  with a data directory whose ``dict.*.txt`` have another size than the
  checkpoint's embeddings, or with another ``--task`` (``document_translation``
  adds ``<sep>`` to the dictionaries, so a checkpoint trained with plain
  ``translation`` has one embedding row fewer).

When loading fails, :func:`explain_mismatch` compares the checkpoint's tensors
with the model's (names and shapes) and raises
:class:`~fairseq_ctx.errors.CheckpointMismatchError` naming the checkpoint,
its architecture, and either the dictionary files and both sizes or the
parameters that differ. The loading itself is untouched: the check runs only
after fairseq's own ``load_state_dict`` has failed.

Why wrap fairseq functions (as ``safe_loading`` does for
``load_checkpoint_to_cpu``) rather than add a mixin to our models: every
entry point (trainer restore and fine-tuning, ``load_model_ensemble_and_task``
behind generate/interactive/validate, our scorers) loads every model through
``BaseFairseqModel.load_state_dict``, and the models that most often meet
other data are plain ``--arch transformer`` baselines (the concatenation
baseline of the document task, warm-start baselines), which a mixin would not
cover. The dictionary files are named from the task the model was built for,
which ``load_state_dict`` does not see: :func:`install` also wraps
``fairseq.models.build_model`` (the one function every task's
``build_model`` calls) to note the task's data directory and languages on
the model. Which checkpoint the tensors came from is noted on the state dict
by ``safe_loading``'s loader (:func:`remember_source`).
"""
import functools
import os
from typing import Optional

from .errors import CheckpointMismatchError

# names of the tensors whose first dimension is the dictionary size
_VOCAB_SUFFIXES = ("embed_tokens.weight", "output_projection.weight")
_SOURCE_KEY = "encoder.embed_tokens.weight"
_TARGET_KEYS = ("decoder.embed_tokens.weight", "decoder.output_projection.weight")


# the task configuration of the checkpoint loaded last (see take_loaded_task_cfg)
_loaded_task_cfg = None


def remember_source(state, path):
    """Note on ``state["model"]`` the checkpoint file, architecture and task it
    came from (an attribute, like torch's own ``_metadata``: it does not
    become a key, so strict loading is unaffected), and keep the task
    configuration it was trained with for :func:`take_loaded_task_cfg`."""
    global _loaded_task_cfg
    model_state = state.get("model") if isinstance(state, dict) else None
    if model_state is None:
        return
    cfg = state.get("cfg") or {}
    model_cfg = cfg.get("model") if hasattr(cfg, "get") else None
    task_cfg = cfg.get("task") if hasattr(cfg, "get") else None
    _loaded_task_cfg = task_cfg if task_cfg is not None else state.get("args")
    args = state.get("args")
    arch = getattr(model_cfg, "arch", None) or getattr(model_cfg, "_name", None) or getattr(args, "arch", None)
    task = getattr(task_cfg, "_name", None) or getattr(args, "task", None)
    try:
        model_state._fairseq_ctx_source = {"path": str(path), "arch": arch, "task": task}
    except AttributeError:  # a plain dict takes no attributes: messages then say "the checkpoint"
        pass


def take_loaded_task_cfg():
    """The task configuration of the checkpoint loaded last (None if none
    was, or it was taken already). fairseq's ``load_model_ensemble_and_task``
    (behind generate, interactive, validate and the hubs) builds each model
    with ``task.build_model(..., from_checkpoint=True)`` right after loading
    its file, and the model's own configuration holds the task's flags only
    for legacy architectures. The document task reads the flags a
    checkpoint was trained with from the record in its task state; this is
    its fallback for a checkpoint saved without one. Flags given as
    ``arg_overrides`` (fairseq-validate's explicit flags, the hubs' keyword
    arguments, ``--model-overrides``) are written into this configuration as
    it is loaded, so here they read as trained with."""
    global _loaded_task_cfg
    cfg, _loaded_task_cfg = _loaded_task_cfg, None
    return cfg


def _task_name(task) -> str:
    from fairseq.tasks import TASK_REGISTRY

    # the registered name (--task ...), whichever way the task was configured
    names = [name for name, cls in TASK_REGISTRY.items() if cls is type(task)]
    return names[0] if names else type(task).__name__


def _task_info(task) -> Optional[dict]:
    cfg = getattr(task, "cfg", None) or getattr(task, "args", None)
    data = getattr(cfg, "data", None)
    if not data:
        return None
    data_dir = str(data).split(os.pathsep)[0]
    info = {"data": data_dir, "task": _task_name(task), "files": None}
    src, tgt = getattr(cfg, "source_lang", None), getattr(cfg, "target_lang", None)
    if src and tgt:
        info["files"] = (os.path.join(data_dir, f"dict.{src}.txt"), os.path.join(data_dir, f"dict.{tgt}.txt"))
    info["added"] = getattr(cfg, "context_separator", None) if hasattr(cfg, "context_size") else None
    return info


def _rows(state_dict, keys):
    for key in keys:
        tensor = state_dict.get(key)
        if tensor is not None and hasattr(tensor, "shape") and len(tensor.shape) == 2:
            return int(tensor.shape[0])
    return None


def _example(names, n=2):
    return ", ".join(names[:n]) + (", ..." if len(names) > n else "")


def explain_mismatch(model, state_dict, model_cfg=None) -> Optional[str]:
    """Why ``state_dict`` does not fit ``model`` (one line), or None when the
    names and shapes all agree (then the failure was something else).
    ``model_cfg``: the model's configuration, for its ``arch``."""
    own = model.state_dict()
    missing = [k for k in own if k not in state_dict]
    unexpected = [k for k in state_dict if k not in own]
    reshaped = [(k, tuple(state_dict[k].shape), tuple(own[k].shape)) for k in own
                if k in state_dict and hasattr(state_dict[k], "shape") and hasattr(own[k], "shape")
                and tuple(state_dict[k].shape) != tuple(own[k].shape)]
    if not (missing or unexpected or reshaped):
        return None
    source = getattr(state_dict, "_fairseq_ctx_source", None) or {}
    task = getattr(model, "_fairseq_ctx_task", None) or {}
    ckpt = f"checkpoint {source['path']}" if source.get("path") else "the checkpoint"
    ckpt_arch = source.get("arch")
    arch = None
    for cfg in (model_cfg, getattr(model, "args", None), getattr(model, "cfg", None)):
        arch = arch or getattr(cfg, "arch", None) or getattr(cfg, "_name", None)

    vocab_only = (not missing and not unexpected
                  and all(k.endswith(_VOCAB_SUFFIXES) and a[1:] == b[1:] for k, a, b in reshaped))
    if vocab_only:
        ck_src, ck_tgt = _rows(state_dict, (_SOURCE_KEY,)), _rows(state_dict, _TARGET_KEYS)
        src, tgt = _rows(own, (_SOURCE_KEY,)), _rows(own, _TARGET_KEYS)
        if task.get("files"):
            where = f"{task['files'][0]} and {task['files'][1]} give"
        elif task.get("data"):
            where = f"the dictionaries of {task['data']} give"
        else:
            where = "the dictionaries of this run give"
        counted = "the 4 special symbols"
        if task.get("added"):
            counted += f" and the {task['added']} that --task {task['task']} adds"
        msg = (f"{ckpt} does not fit the dictionaries of this run: the model was trained with {ck_src} source / "
               f"{ck_tgt} target symbols, but {where} {src} / {tgt} (counting {counted}). "
               "Use the data directory (dictionaries) and --task the model was trained with")
        if source.get("task") and task.get("task") and source["task"] != task["task"]:
            msg += f" (it was trained with --task {source['task']}, this run uses --task {task['task']})"
        return msg

    parts = []
    if missing:
        parts.append(f"{len(missing)} parameters of this model are not in it ({_example(missing)})")
    if unexpected:
        parts.append(f"{len(unexpected)} of its parameters are not in this model ({_example(unexpected)})")
    if reshaped:
        k, a, b = reshaped[0]
        parts.append(f"{len(reshaped)} have another shape ({k}: {a} in the checkpoint, {b} here)")
    holds = f"holds a {ckpt_arch} model that does not fit" if ckpt_arch else "does not fit"
    this = f"this {arch} model" if arch else "this model"
    return (f"{ckpt} {holds} {this}: " + "; ".join(parts)
            + ". Load a checkpoint with the --arch and model flags it was trained with")


def _explain_load_state_dict(load_state_dict):
    if getattr(load_state_dict, "_fairseq_ctx_wrapped", False):
        return load_state_dict

    @functools.wraps(load_state_dict)
    def wrapper(self, state_dict, strict=True, model_cfg=None, *args, **kwargs):
        try:
            return load_state_dict(self, state_dict, strict, model_cfg, *args, **kwargs)
        except RuntimeError:
            # fairseq upgrades state_dict in place before torch compares it,
            # so this compares what torch compared
            msg = explain_mismatch(self, state_dict, model_cfg)
            if msg is None:
                raise
            raise CheckpointMismatchError(msg) from None

    wrapper._fairseq_ctx_wrapped = True
    return wrapper


def _remember_task(build_model):
    if getattr(build_model, "_fairseq_ctx_wrapped", False):
        return build_model

    @functools.wraps(build_model)
    def wrapper(cfg, task, *args, **kwargs):
        model = build_model(cfg, task, *args, **kwargs)
        info = _task_info(task)
        if info is not None:
            model._fairseq_ctx_task = info  # plain data: not a parameter, not in the state dict
        return model

    wrapper._fairseq_ctx_wrapped = True
    return wrapper


def install():
    """Wrap ``BaseFairseqModel.load_state_dict`` and ``fairseq.models.build_model``
    (idempotent; see the module docstring for why)."""
    import fairseq.models
    from fairseq.models.fairseq_model import BaseFairseqModel

    BaseFairseqModel.load_state_dict = _explain_load_state_dict(BaseFairseqModel.load_state_dict)
    # FairseqTask.build_model calls ``models.build_model`` through the module
    fairseq.models.build_model = _remember_task(fairseq.models.build_model)
