"""Architectures registered by fairseq_ctx, one module each: importing this
package imports ``fairseq_ctx/models/<arch>.py`` for every model ``<arch>``
of :func:`fairseq_ctx.architectures.grid_archs` (``transformer_ctxsan``, ...),
which registers it with fairseq. A new architecture is registered by its
entry in ``fairseq_ctx/architectures.py``."""
import importlib

from fairseq_ctx.architectures import grid_archs

for _arch in grid_archs():
    importlib.import_module(f"{__name__}.{_arch}")
