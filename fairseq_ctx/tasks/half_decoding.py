"""``--bf16`` outside training, for ``--task document_translation``.

fairseq's ``fairseq-generate``, ``-interactive`` and ``-validate`` cast the
models only for ``--fp16`` (``model.half()``); given ``--bf16`` they compute
in float32 without a word. The task decides it instead, where it builds a
model for a checkpoint (``build_model(..., from_checkpoint=True)``, before
the weights are loaded into it):

* the task was set up from the command line (``fairseq-generate``,
  ``fairseq-interactive``, ``fairseq-ctx-translate``): ``--bf16`` casts the
  model to bfloat16, as fairseq's trainer does for ``--bf16`` training, and
  says so in one line;
* the task was set up from the checkpoint's own configuration
  (``fairseq-validate``, the hub interfaces, the scorers): its ``bf16`` is
  the command line's only where the flag was given there, otherwise the
  training run's, so it cannot tell whether this run asked for it; the model
  stays in float32 and, when that ``bf16`` is set, one line says so.

The task reads ``--bf16`` through its configuration's ``bf16`` field, an
interpolation of ``common.bf16`` (fairseq's way for a task to see a common
flag, as ``TranslationConfig`` does for ``train_subset``), so no flag is
added. ``tests/test_foreach_optim.py`` decodes with and without ``--bf16``.
"""
import logging

import torch
from omegaconf.errors import OmegaConfBaseException

logger = logging.getLogger("fairseq_ctx.tasks.document_translation")

CAST = "document_translation: --bf16: the model computes in bfloat16"
FLOAT32 = ("document_translation: --bf16 (given here or in the checkpoint's training flags) is not applied: "
           "a task set up from a checkpoint's configuration (fairseq-validate, hub, scorers) computes in float32; "
           "fairseq-generate and fairseq-interactive compute in bfloat16")


def for_inference(model, task_cfg, task_from_checkpoint: bool):
    """``model`` (just built for a checkpoint) in the precision ``--bf16``
    asks for; see the module docstring."""
    if not _bf16(task_cfg):
        return model
    if task_from_checkpoint:
        logger.info(FLOAT32)
        return model
    logger.info(CAST)
    return model.to(dtype=torch.bfloat16)


def _bf16(task_cfg) -> bool:
    """The task configuration's ``bf16``: False where it is missing (a
    checkpoint from before the field) or cannot resolve (a task
    configuration outside fairseq's whole configuration, whose
    ``${common.bf16}`` has nothing to point to)."""
    try:
        value = getattr(task_cfg, "bf16", False)
    except OmegaConfBaseException:
        return False
    return value is True
