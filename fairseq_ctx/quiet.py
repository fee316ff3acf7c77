"""The one place where fairseq_ctx silences warnings, each of which fairseq
itself causes and we cannot fix at its source (fairseq 0.12.3 / fairseq-fixed
with hydra-core 1.3 and torch 2.x).

Installed when the package is imported (``--user-dir fairseq_ctx`` imports
it before fairseq builds its config), from :mod:`fairseq_ctx.tasks`.  Each
filter matches one message (and, where the warning names a stable module,
that module), so any other warning, ours included, still shows.  Set
``FAIRSEQ_CTX_UPSTREAM_WARNINGS=1`` to see them all again.

What is *not* here, because it is fixed where it arises:

* ``INFO:fairseq.tasks.text_to_speech:Please install tensorboardX``: the
  install script installs ``tensorboardX`` (it also makes
  ``--tensorboard-logdir`` work);
* torch's ``Support for mismatched key_padding_mask and attn_mask`` for our
  architectures: their decoders build a boolean future mask
  (:mod:`fairseq_ctx.modules.future_mask`).  The filter below covers only
  models whose decoder is fairseq's own (``--arch transformer`` with
  ``--task document_translation``); ``tests/test_warnings.py`` checks with
  every warning shown that our architectures do not raise it.
"""
import os
import warnings

# (action, message regex, category, module regex): message regexes match the
# start of the message, case-insensitively (``warnings.filterwarnings``).
UPSTREAM_FILTERS = [
    # fairseq.dataclass.utils.convert_namespace_to_omegaconf calls
    # hydra.experimental.initialize/compose without version_base, with
    # strict=True, on config files headed ``# @package _group_``, and names its
    # schema "config": hydra 1.3 warns about each, in every fairseq CLI run.
    (r"hydra\.experimental\.(initialize|compose)\(\) is no longer experimental", UserWarning, r"hydra\."),
    (r"\s*The version_base parameter is not specified", UserWarning, r"hydra\."),
    (r"In '[^']*': Usage of deprecated keyword in package header '# @package _group_'", UserWarning, r"hydra\."),
    (r"\s*'config' is validated against ConfigStore schema with the same name", UserWarning, ""),
    (r"\s*The strict flag in the compose API is deprecated", UserWarning, r"hydra\."),
    # fairseq/tasks/fairseq_task.py (train_step) enters torch.cuda.amp.autocast,
    # deprecated since torch 2.4, on every training step, also on CPU.
    (r"`torch\.cuda\.amp\.autocast\(args\.\.\.\)` is deprecated", FutureWarning, r"fairseq\."),
    # fairseq/data/iterators.py creates every DataLoader with pin_memory=True,
    # which torch 2.x reports on machines without an accelerator.
    (r"'pin_memory' argument is set as true but no accelerator is found", UserWarning,
     r"torch\.utils\.data\.dataloader"),
    # fairseq's TransformerDecoderBase.buffered_future_mask is a float mask and
    # fairseq's MultiheadAttention passes key_padding_mask.bool(): fairseq's own
    # decoder (e.g. --arch transformer under --task document_translation)
    # mixes the two types. Ours do not (see the module docstring).
    (r"Support for mismatched key_padding_mask and attn_mask is deprecated", UserWarning,
     r"torch\.nn\.functional"),
]


def install():
    """Add the filters (idempotent); does nothing when
    ``FAIRSEQ_CTX_UPSTREAM_WARNINGS`` is set to a non-empty value other than 0."""
    if os.environ.get("FAIRSEQ_CTX_UPSTREAM_WARNINGS", "0") not in ("", "0"):
        return
    for message, category, module in UPSTREAM_FILTERS:
        warnings.filterwarnings("ignore", message=message, category=category, module=module)


__all__ = ["UPSTREAM_FILTERS", "install"]
