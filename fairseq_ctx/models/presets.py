"""Size presets shared by every fairseq_ctx architecture (the checks are in
:mod:`fairseq_ctx.models.checks`)."""
from fairseq_ctx.model_options import TINY_DIMS


def tiny_dims(args):
    """2+2 layers, d=16, ffn 32, 2 heads: the test-suite size of every
    ``<arch>_tiny`` preset (``getattr`` defaults, so flags still win)."""
    for side in ("encoder", "decoder"):
        for name, value in TINY_DIMS.items():
            key = f"{side}_{name}"
            setattr(args, key, getattr(args, key, value))
