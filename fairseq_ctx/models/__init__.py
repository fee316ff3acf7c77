"""Architectures registered by fairseq_ctx, one module each: importing a
model's module registers it (and its presets) with fairseq, so this package
imports each of them by name.  A new architecture adds its import here
(``tests/test_contract.py`` checks that these are the architectures of the
option catalogue, :func:`fairseq_ctx.architectures.grid_archs`)."""
from fairseq_ctx.models import (  # noqa: F401  (registration is the import)
    transformer_ctxenc,
    transformer_ctxsan,
    transformer_dc,
    transformer_gret,
)
