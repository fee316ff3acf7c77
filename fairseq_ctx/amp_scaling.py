"""``fairseq-train --amp``: the gradient scaling of fairseq 0.12's
``AMPOptimizer`` (``fairseq/optim/amp_optimizer.py``), corrected.

fairseq's ``AMPOptimizer`` scales the loss with torch's ``GradScaler`` and
wraps the optimizer of ``--optimizer`` (``fp32_optimizer``). Two things
in it are wrong:

1. **The gradients are unscaled twice.** ``clip_grad_norm``, which
   fairseq's trainer calls before every step, unscales them through the
   inner torch optimizer (``scaler.unscale_(self.optimizer)``); ``step``
   then hands the scaler the fairseq wrapper
   (``scaler.step(self.fp32_optimizer)``). A ``GradScaler`` keeps its state
   per optimizer object, and it has not seen that one unscaled, so it
   unscales the same gradients again: the optimizer steps with gradients
   divided by the loss scale. Adam's update is blind to a constant factor
   but for its ``eps``, and not to a changing one: its moments mix the
   gradients of before and after each growth or backoff of the scale.
   Measured on CPU with torch's CPU scaler in place of CUDA's (the
   study's baseline on the toy corpus of ``tests/test_foreach_optim.py``,
   which checks both, 20 updates of fairseq's Adam, the scale 8 doubled
   every 4 updates to 256; 2026-12-01): fairseq's class ends 1.7e-2 from
   float32 training in the weights, its first moments 5% of float32's in
   norm; corrected, scaling by a power of two is exact and the run equals
   float32's to the bit (with ``adam_foreach`` too).
2. **Its flags reach the wrong arguments** (fairseq issue 5342): the
   initial scale comes from ``--fp16-init-scale``, not ``--amp-init-scale``,
   and with ``--amp-scale-window`` the growth interval is set to
   ``--amp-init-scale``.

:func:`install` replaces ``AMPOptimizer.clip_grad_norm`` with a copy of
fairseq's that unscales through ``fp32_optimizer``, the object ``step``
hands the scaler (whose ``param_groups`` are the inner optimizer's, so the
same gradients are unscaled once, and ``step`` then checks that unscale's
infinities and calls ``fp32_optimizer.step()`` as fairseq does), and wraps
``AMPOptimizer.__init__`` to build the scaler from ``--amp-init-scale`` and
``--amp-scale-window`` where they differ from what fairseq passed (with the
defaults, 128 both and no window, they do not; where they do, one log line
says so). Nothing else of the class changes; ``--fp16`` and ``--bf16`` do
not use it. As in fairseq, the scaler's state is not in the checkpoint: a
resumed run starts again at ``--amp-init-scale``.
"""
import functools
import logging

import torch

logger = logging.getLogger("fairseq.optim.amp_optimizer")  # fairseq's own messages, from its logger
_log = logging.getLogger("fairseq_ctx.amp_scaling")


def scaler_kwargs(common) -> dict:
    """The ``GradScaler`` arguments ``--amp-init-scale`` and
    ``--amp-scale-window`` ask for (``common``: fairseq's CommonConfig)."""
    kwargs = {"init_scale": common.amp_init_scale}
    if getattr(common, "amp_scale_window", None) is not None:
        kwargs["growth_interval"] = common.amp_scale_window
    return kwargs


def _fairseqs_scaler_kwargs(common) -> dict:
    """What fairseq 0.12's ``AMPOptimizer.__init__`` passes."""
    kwargs = {"init_scale": common.fp16_init_scale}
    if getattr(common, "amp_scale_window", None) is not None:
        kwargs["growth_interval"] = common.amp_init_scale
    return kwargs


def _wrap_init(init):
    if getattr(init, "_fairseq_ctx_amp", False):
        return init

    @functools.wraps(init)
    def __init__(self, cfg, params, fp32_optimizer, **kwargs):
        init(self, cfg, params, fp32_optimizer, **kwargs)
        wanted, fairseqs = scaler_kwargs(cfg.common), _fairseqs_scaler_kwargs(cfg.common)
        if wanted != fairseqs:
            # said once: a run that set --fp16-init-scale for --amp, as fairseq read it, sees what changed
            _log.info(f"--amp: the loss scaler takes --amp-init-scale and --amp-scale-window ({wanted}), "
                      f"not fairseq's reading of the flags ({fairseqs})")
            self._grad_scaler = torch.amp.GradScaler("cuda", **wanted)

    __init__._fairseq_ctx_amp = True
    return __init__


def clip_grad_norm(self, max_norm, aggregate_norm_fn=None):
    """fairseq 0.12's ``AMPOptimizer.clip_grad_norm``, unscaling through
    ``fp32_optimizer`` (the object ``step`` gives the scaler) instead of
    the inner torch optimizer."""
    self.scaler.unscale_(self.fp32_optimizer)
    grad_norm = self.fp32_optimizer.clip_grad_norm(max_norm, aggregate_norm_fn)
    if not torch.isfinite(grad_norm).all():
        new_loss_scale = self.next_loss_scale
        if new_loss_scale <= self.min_loss_scale:
            raise FloatingPointError(
                f"AMP: Minimum loss scale reached ({self.min_loss_scale}). Your loss is probably exploding. "
                f"Try restarting training or use fp32. {new_loss_scale}")
        logger.info(f"AMP: overflow detected, setting scale to {new_loss_scale}")
    return grad_norm


def install() -> None:
    """Correct ``AMPOptimizer`` (idempotent)."""
    from fairseq.optim.amp_optimizer import AMPOptimizer

    AMPOptimizer.__init__ = _wrap_init(AMPOptimizer.__init__)
    AMPOptimizer.clip_grad_norm = clip_grad_norm
