"""Tasks registered by fairseq_ctx."""
# the narrow filters for fairseq's own warnings, installed wherever our tasks
# and models are registered (fairseq_ctx/quiet.py says which and why)
from .. import quiet

quiet.install()

from . import document_translation  # noqa: E402,F401
