"""``--optimizer adam_foreach``: fairseq's Adam, gradient clipping and
mixed-precision master copies with one ``torch._foreach_*`` call per step of
the update instead of one operation per parameter.

Why: fairseq 0.12 without apex runs the update after the backward pass as
Python loops over the parameters: ``fairseq.optim.adam.Adam.step`` (about
eight operations per parameter), ``fairseq.utils.clip_grad_norm_`` (one norm
per gradient) and, with ``--fp16``/``--bf16``, ``FP16Optimizer``'s copies of
the gradients to the float32 masters, of the masters back to the model and
its zeroing (one each per parameter). A small model's update is then bound
by launching operations on a GPU, not by computing them: the study's d=128
baseline (127 parameter tensors) spent 1,200 of its 1,900 operations per
update after the backward. ``docs/benchmarks.md`` has the counts before and
after for every architecture; ``tests/test_foreach_optim.py`` guards them.

What it is, choice by choice:

* The same numbers as ``--optimizer adam``. :class:`ForeachAdam` is
  fairseq's ``Adam.step`` (``fairseq/optim/adam.py``: decoupled weight decay
  before the step, ``eps`` added to ``sqrt(v)`` before the bias correction
  that is folded into the step size, the step counted per parameter as a
  Python int) with each per-parameter operation turned into the
  ``torch._foreach_`` operation of the same name, in the same order. On CPU
  that is the same kernel per tensor (bit for bit); on CUDA it is one
  multi-tensor kernel per chunk of tensors. torch's own ``Adam``/``AdamW``
  (``foreach=True`` or ``fused=True``) are not used: they add ``eps`` after
  dividing by the bias correction, a different update for small second
  moments, so a run would not be fairseq's. The optimizer state is
  fairseq's (``step``, ``exp_avg``, ``exp_avg_sq``), so checkpoints resume
  with either ``adam`` or ``adam_foreach``.
* The same flags: ``--adam-betas``, ``--adam-eps``, ``--weight-decay``
  (:class:`FairseqAdamForeachConfig` is fairseq's Adam configuration).
  ``--fp16-adam-stats`` needs apex's fused Adam and stops with one line;
  ``--use-old-adam`` changes nothing (this is fairseq's own Adam already).
  apex's FusedAdam, which ``--optimizer adam`` picks on CUDA when apex is
  installed, is not used: the point is fairseq's numbers on every device.
* Gradient clipping: :func:`clip_grad_norm_` is ``fairseq.utils.clip_grad_norm_``
  with the per-gradient norms taken by one ``torch._foreach_norm`` (float32,
  as fairseq's), then fairseq's total norm, coefficient and
  ``torch._foreach_mul_``. ``multiply_grads`` is fairseq's (already one
  ``_foreach_mul_`` per device and dtype).
* Mixed precision: fairseq's trainer builds its ``FP16Optimizer`` itself,
  with no hook for the optimizer to change its loops, so :func:`install`
  wraps ``FP16Optimizer.build_optimizer``: with ``adam_foreach`` it builds
  :class:`ForeachFP16Optimizer`, whose gradient copy, master copy-back and
  zeroing are one ``torch._foreach_copy_``/``_foreach_zero_`` each, for
  flattened (``--fp16``) and unflattened (``--bf16``,
  ``--fp16-no-flatten-grads``) masters alike; loss scaling, overflow checks
  and everything else are fairseq's. With any other optimizer the wrapper
  returns fairseq's own ``FP16Optimizer``, untouched.

Why a drop-in optimizer and not ``--optimizer adam`` itself: replacing
``adam`` would change the optimizer of every fairseq run in a process that
loads the plugin, whatever its models (``--user-dir`` is given for many
reasons), and the implementation a published recipe names; a second name
keeps ``--optimizer adam`` fairseq's and makes the choice visible in every
checkpoint's configuration; a recipe runs the same training with
``adam_foreach`` in place of ``adam``.
"""
import math
from dataclasses import dataclass
from typing import List

import torch
from fairseq import utils
from fairseq.optim import FairseqOptimizer, register_optimizer
from fairseq.optim.adam import Adam, FairseqAdam, FairseqAdamConfig
from fairseq.optim.fp16_optimizer import FP16Optimizer

from fairseq_ctx.errors import ConfigError

NAME = "adam_foreach"


class ForeachAdam(Adam):
    """fairseq's :class:`fairseq.optim.adam.Adam` whose ``step`` makes one
    ``torch._foreach_`` call per operation for all parameters of a group
    (per group of parameters at the same step count, which is one group
    unless some parameters had no gradient in some updates)."""

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            self._step_group(group)
        return loss

    def _step_group(self, group):
        amsgrad = group.get("amsgrad", False)
        beta1, beta2 = group["betas"]
        by_step = {}  # step count -> (params (fp32), grads (fp32), states, half params to copy back)
        for p in group["params"]:
            if p.grad is None:
                continue
            grad = p.grad
            if grad.is_sparse:
                raise RuntimeError("Adam does not support sparse gradients, please consider SparseAdam instead")
            # --memory-efficient-fp16/bf16: the update is computed on float32
            # copies and copied back, as fairseq's Adam does
            half = p.dtype in (torch.float16, torch.bfloat16)
            if grad.dtype in (torch.float16, torch.bfloat16):
                grad = grad.float()
            p32 = p.float() if half else p
            state = self.state[p]
            if len(state) == 0:
                state["step"] = 0
                state["exp_avg"] = torch.zeros_like(p32)
                state["exp_avg_sq"] = torch.zeros_like(p32)
                if amsgrad:
                    state["max_exp_avg_sq"] = torch.zeros_like(p32)
            else:
                # a loaded state may sit on another device or dtype (fairseq's
                # .to(p_data_fp32), which is free when they already match)
                for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq") if amsgrad else ("exp_avg", "exp_avg_sq"):
                    t = state[key]
                    if t.device != p32.device or t.dtype != p32.dtype:
                        state[key] = t.to(p32)
            state["step"] += 1
            params, grads, states, halves = by_step.setdefault(state["step"], ([], [], [], []))
            params.append(p32)
            grads.append(grad)
            states.append(state)
            if half:
                halves.append((p, p32))

        for step, (params, grads, states, halves) in by_step.items():
            exp_avgs = [s["exp_avg"] for s in states]
            exp_avg_sqs = [s["exp_avg_sq"] for s in states]
            # Decay the first and second moment running average coefficient
            torch._foreach_mul_(exp_avgs, beta1)
            torch._foreach_add_(exp_avgs, grads, alpha=1 - beta1)
            torch._foreach_mul_(exp_avg_sqs, beta2)
            torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)
            if amsgrad:
                max_exp_avg_sqs = [s["max_exp_avg_sq"] for s in states]
                torch._foreach_maximum_(max_exp_avg_sqs, exp_avg_sqs)
                denom = torch._foreach_sqrt(max_exp_avg_sqs)
            else:
                denom = torch._foreach_sqrt(exp_avg_sqs)
            torch._foreach_add_(denom, group["eps"])

            # Python floats: no device value is read back
            bias_correction1 = 1 - beta1 ** step
            bias_correction2 = 1 - beta2 ** step
            step_size = group["lr"] * math.sqrt(bias_correction2) / bias_correction1

            if group["weight_decay"] != 0:
                torch._foreach_add_(params, params, alpha=-group["weight_decay"] * group["lr"])
            torch._foreach_addcdiv_(params, exp_avgs, denom, value=-step_size)

            if halves:
                torch._foreach_copy_([p for p, _ in halves], [p32 for _, p32 in halves])


def clip_grad_norm_(params, max_norm, aggregate_norm_fn=None) -> torch.Tensor:
    """``fairseq.utils.clip_grad_norm_`` with the per-gradient norms as one
    ``torch._foreach_norm``; the same total norm, clipping coefficient and
    ``_foreach_mul_``. Gradients on several devices (pipeline parallelism)
    take fairseq's function."""
    if isinstance(params, torch.Tensor):
        params = [params]
    params = list(params)
    with_grad = [p for p in params if p is not None and getattr(p, "grad", None) is not None]
    # the gradients themselves: they do not require grad, so no detached
    # views are needed (fairseq's .detach() costs a dispatch per parameter)
    grads = [p.grad for p in with_grad if not hasattr(p, "expert")]
    expert_grads = [p.grad for p in with_grad if hasattr(p, "expert")]
    if len(grads) <= 1 or len({g.device for g in grads}) > 1:
        return utils.clip_grad_norm_(params, max_norm, aggregate_norm_fn)

    with torch.no_grad():
        norms = torch._foreach_norm(grads, 2, dtype=torch.float32)
        total_norm = torch.norm(torch.stack(norms))
        if aggregate_norm_fn is not None:
            total_norm = aggregate_norm_fn(total_norm)
        if max_norm > 0:
            max_norm = float(max_norm)
            clip_coef = (max_norm / (total_norm + 1e-6)).clamp_(max=1)
            torch._foreach_mul_(grads + expert_grads, clip_coef)
    return total_norm


@dataclass
class FairseqAdamForeachConfig(FairseqAdamConfig):
    """fairseq's Adam flags, unchanged."""


@register_optimizer(NAME, dataclass=FairseqAdamForeachConfig)
class FairseqAdamForeach(FairseqAdam):
    """``--optimizer adam_foreach``: fairseq's Adam with foreach operations
    (module docstring)."""

    def __init__(self, cfg: FairseqAdamForeachConfig, params):
        FairseqOptimizer.__init__(self, cfg)  # FairseqAdam's __init__ would pick its own implementation
        if getattr(cfg, "fp16_adam_stats", False):
            raise ConfigError("--fp16-adam-stats needs apex's FusedAdam (--optimizer adam on a GPU with apex); "
                              "--optimizer adam_foreach keeps its statistics in float32")
        self._optimizer = ForeachAdam(params, **self.optimizer_config)

    def clip_grad_norm(self, max_norm, aggregate_norm_fn=None):
        return clip_grad_norm_(self.params, max_norm, aggregate_norm_fn)


class ForeachFP16Optimizer(FP16Optimizer):
    """fairseq's ``FP16Optimizer`` with its per-parameter copies and zeroing
    as one foreach call each; built for ``--fp16``/``--bf16`` with
    ``--optimizer adam_foreach`` (:func:`install`). Upstream:
    ``fairseq.optim.fp16_optimizer._FP16OptimizerMixin._sync_fp16_grads_to_fp32``,
    ``_sync_fp32_params_to_fp16`` and ``zero_grad``; the same copies in
    the same layout (``tests/test_foreach_optim.py`` compares training
    runs with fairseq's)."""

    def _flat_views(self, device, params, of_grad: bool) -> List[torch.Tensor]:
        """Views of the flat float32 buffer (or its gradient) of ``device``
        shaped like ``params``, in fairseq's order and offsets."""
        flat = self.fp32_params[device].grad.data if of_grad else self.fp32_params[device].data
        views, offset = [], 0
        for p in params:
            numel = p.data.numel()
            views.append(flat[offset: offset + numel].view_as(p.data))
            offset += numel
        return views

    @torch.no_grad()
    def _sync_fp16_grads_to_fp32(self):
        if not self._needs_sync:
            return
        dst, src, zero = [], [], []
        if self.has_flat_params:
            for device in self.fp32_params.keys():
                params = [p for p in self.fp16_params if p.requires_grad and p.device.index == device]
                for p, view in zip(params, self._flat_views(device, params, of_grad=True)):
                    if p.grad is None:
                        zero.append(view)
                    else:
                        dst.append(view)
                        src.append(p.grad)
        else:
            for p, p32 in zip(self.fp16_params, self.fp32_params):
                if not p.requires_grad:
                    continue
                if p.grad is None:
                    p32.grad = torch.zeros_like(p.data, dtype=torch.float)
                elif p32.grad is None:
                    p32.grad = p.grad.float()
                else:
                    dst.append(p32.grad)
                    src.append(p.grad)
        if dst:
            torch._foreach_copy_(dst, src)
        if zero:
            torch._foreach_zero_(zero)
        self._needs_sync = False

    @torch.no_grad()
    def _sync_fp32_params_to_fp16(self):
        if self.has_flat_params:
            for device in self.fp32_params.keys():
                params = [p for p in self.fp16_params if p.device.index == device]
                if params:
                    torch._foreach_copy_(params, self._flat_views(device, params, of_grad=False))
        else:
            pairs = [(p, p32) for p, p32 in zip(self.fp16_params, self.fp32_params) if p.requires_grad]
            if pairs:
                torch._foreach_copy_([p for p, _ in pairs], [p32 for _, p32 in pairs])

    @torch.no_grad()
    def zero_grad(self):
        if self.has_flat_params:
            return super().zero_grad()  # one zero_ per device already
        for p in self.fp16_params:
            p.grad = None
        grads = [p32.grad for p32 in self.fp32_params if p32.grad is not None]
        if grads:
            torch._foreach_zero_(grads)
        self._needs_sync = False
        if self.scaler is not None:
            self._multiply_factor = 1.0 / float(self.scaler.loss_scale)


def _optimizer_name(cfg):
    """The ``--optimizer`` of the trainer's configuration."""
    return getattr(getattr(cfg, "optimizer", None), "_name", None)


def install() -> None:
    """Make ``FP16Optimizer.build_optimizer`` build :class:`ForeachFP16Optimizer`
    when the optimizer is ``adam_foreach`` (idempotent)."""
    build = FP16Optimizer.__dict__["build_optimizer"].__func__
    if getattr(build, "_fairseq_ctx_foreach", False):
        return

    def build_optimizer(cls, cfg, params, **kwargs):
        if cls is FP16Optimizer and _optimizer_name(cfg) == NAME:
            cls = ForeachFP16Optimizer
        return build(cls, cfg, params, **kwargs)

    build_optimizer.__doc__ = build.__doc__
    build_optimizer._fairseq_ctx_foreach = True
    FP16Optimizer.build_optimizer = classmethod(build_optimizer)
