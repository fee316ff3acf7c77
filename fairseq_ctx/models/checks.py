"""Build-time checks shared by every fairseq_ctx architecture: each raises a
:class:`~fairseq_ctx.errors.ConfigError` (a ValueError) whose message names
the flag, instead of an ``assert`` or a shape error deep in model building.
Each model's ``validate_<arch>_args`` calls them with its own reason."""
from typing import Dict, Sequence

from fairseq_ctx.errors import ConfigError


def check_attention_dims(args, sides=("encoder", "decoder")):
    """``--{side}-embed-dim`` must split evenly into ``--{side}-attention-heads``
    (else fairseq's attention fails an ``assert`` deep in model building)."""
    for side in sides:
        dim, heads = getattr(args, f"{side}_embed_dim", None), getattr(args, f"{side}_attention_heads", None)
        if dim is None or heads is None:
            continue
        if heads < 1 or dim % heads:
            raise ConfigError(f"--{side}-embed-dim {dim} is not divisible by --{side}-attention-heads {heads}")


def check_every_layer_runs(args, sides: Sequence[str], arch: str, why: str):
    """For stacks whose layers depend on each other's position (a context
    sized by the layer index, an aggregation over every layer's output, a
    layer chosen by its number): no LayerDrop, no ``--*-layers-to-keep``, at
    least one layer. ``why`` ends the message (the paper's reason)."""
    for side in sides:
        if getattr(args, f"{side}_layerdrop", 0) > 0:
            raise ConfigError(f"--{side}-layerdrop is not supported by {arch}: {why} "
                              f"(got --{side}-layerdrop {getattr(args, f'{side}_layerdrop')})")
        if getattr(args, f"{side}_layers_to_keep", None):
            raise ConfigError(f"--{side}-layers-to-keep is not supported by {arch}: {why}")
        if getattr(args, f"{side}_layers", 1) < 1:
            raise ConfigError(f"--{side}-layers must be at least 1 for {arch}, got {getattr(args, f'{side}_layers')}")


def check_no_quant_noise(args, arch: str, pq_misses: str, scalar_misses: str):
    """fairseq's quantization noise would reach only part of the model: the
    product-quantization noise (``--quant-noise-pq``) the projections that
    fairseq's layers build with it, not ``pq_misses``; the scalar noise
    (``--quant-noise-scalar``) every ``nn.Linear``, ``nn.Embedding`` and
    ``nn.Conv2d`` through its forward, not ``scalar_misses`` (weights the
    model applies itself, other module types). Trained partly noised, the
    model would be quantized as if wholly, so each is refused, the flag
    named, rather than applied to part of it."""
    for flag, attr, misses in (("--quant-noise-pq", "quant_noise_pq", pq_misses),
                               ("--quant-noise-scalar", "quant_noise_scalar", scalar_misses)):
        value = getattr(args, attr, 0) or 0
        if value > 0:
            raise ConfigError(f"{flag} is not supported by {arch}: fairseq's noise would not reach {misses}, "
                              f"which would train without it (got {flag} {value})")


def check_no_xformers(args, arch: str, misses: Dict[str, str]):
    """fairseq's xFormers attention (``--encoder-xformers-att-config``,
    ``--decoder-xformers-att-config``: an attention mechanism of xFormers',
    possibly not scaled dot-product attention at all, in fairseq's
    attention that reads the side's config: the encoder's self-attention
    and the decoder's cross-attention, the decoder's self-attention) would
    not reach ``misses[side]``, the
    side's own attention of ``arch``, which would keep scaled dot-product
    attention beside fairseq's changed one: refused, the flag named."""
    for side, what in misses.items():
        value = getattr(args, f"{side}_xformers_att_config", None)
        if value:
            raise ConfigError(f"--{side}-xformers-att-config is not supported by {arch}: {what} would not use "
                              f"xFormers' attention, fairseq's attention on that side would (got {value!r})")
