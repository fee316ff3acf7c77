"""Size presets, and the size checks, shared by every fairseq_ctx architecture."""
from fairseq_ctx.errors import ConfigError


def tiny_dims(args):
    """2+2 layers, d=16, ffn 32, 2 heads: the test-suite size of every
    ``<arch>_tiny`` preset (``getattr`` defaults, so flags still win)."""
    for side in ("encoder", "decoder"):
        for name, value in (("embed_dim", 16), ("ffn_embed_dim", 32), ("layers", 2), ("attention_heads", 2)):
            key = f"{side}_{name}"
            setattr(args, key, getattr(args, key, value))


def check_attention_dims(args, sides=("encoder", "decoder")):
    """``--{side}-embed-dim`` must split evenly into ``--{side}-attention-heads``
    (else fairseq's attention fails an ``assert`` deep in model building)."""
    for side in sides:
        dim, heads = getattr(args, f"{side}_embed_dim", None), getattr(args, f"{side}_attention_heads", None)
        if dim is None or heads is None:
            continue
        if heads < 1 or dim % heads:
            raise ConfigError(f"--{side}-embed-dim {dim} is not divisible by --{side}-attention-heads {heads}")
