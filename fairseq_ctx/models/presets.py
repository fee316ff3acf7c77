"""Size presets shared by every fairseq_ctx architecture (the checks are in
:mod:`fairseq_ctx.models.checks`)."""


def tiny_dims(args):
    """2+2 layers, d=16, ffn 32, 2 heads: the test-suite size of every
    ``<arch>_tiny`` preset (``getattr`` defaults, so flags still win)."""
    for side in ("encoder", "decoder"):
        for name, value in (("embed_dim", 16), ("ffn_embed_dim", 32), ("layers", 2), ("attention_heads", 2)):
            key = f"{side}_{name}"
            setattr(args, key, getattr(args, key, value))
