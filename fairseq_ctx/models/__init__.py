"""Architectures registered by fairseq_ctx (one module each)."""
from . import transformer_dc  # noqa: F401
from . import transformer_ctxsan  # noqa: F401
from . import transformer_gret  # noqa: F401
from . import transformer_ctxenc  # noqa: F401
