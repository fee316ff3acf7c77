"""The models take their options' choices and defaults from
:mod:`fairseq_ctx.model_options`, and ``fairseq_ctx.models`` registers
exactly the architectures of the option catalogue."""
import argparse

import pytest

import fairseq_ctx  # noqa: F401  (registers the archs)
from fairseq.models import ARCH_MODEL_REGISTRY, ARCH_CONFIG_REGISTRY

from fairseq_ctx import model_options
from fairseq_ctx.architectures import grid_archs

pytestmark = pytest.mark.unit


def test_registered_models_are_the_catalogues():
    ours = {name for name, cls in ARCH_MODEL_REGISTRY.items() if cls.__module__.startswith("fairseq_ctx.")}
    assert set(grid_archs()) <= ours
    modules = {ARCH_MODEL_REGISTRY[a].__module__.rsplit(".", 1)[-1] for a in ours}
    assert modules == set(grid_archs())


@pytest.mark.parametrize("arch, expected", [
    ("transformer_ctxsan", dict(model_options.CTXSAN_DEFAULTS)),
    ("transformer_dc", {"dc_kernel_size": model_options.DC_DEFAULT_KERNEL_SIZE}),
    ("transformer_gret", {"gret_capsules": model_options.GRET_DEFAULT_CAPSULES,
                          "gret_routing_softmax": model_options.GRET_ROUTING_SOFTMAX_CHOICES[0],
                          **{a: False for a in model_options.GRET_ABLATIONS}}),
])
def test_architecture_defaults_are_the_options(arch, expected):
    args = argparse.Namespace()
    ARCH_CONFIG_REGISTRY[arch](args)
    assert {k: getattr(args, k) for k in expected} == expected


def test_tiny_presets_have_the_tiny_dims():
    args = argparse.Namespace()
    ARCH_CONFIG_REGISTRY["transformer_ctxsan_tiny"](args)
    for side in ("encoder", "decoder"):
        assert {k: getattr(args, f"{side}_{k}") for k in model_options.TINY_DIMS} == dict(model_options.TINY_DIMS)
