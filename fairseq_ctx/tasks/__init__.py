"""Tasks registered by fairseq_ctx."""
from . import document_translation  # noqa: F401
