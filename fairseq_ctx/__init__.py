"""fairseq_ctx: context-enhanced Transformer architectures for fairseq.

Load with ``--user-dir fairseq_ctx`` (from the repository root) or
``--user-dir $(python -c 'import fairseq_ctx,os;print(os.path.dirname(fairseq_ctx.__file__))')``.
Importing the package registers the architectures and tasks and allow-lists
the classes that fairseq checkpoints need for weights-only loading.
"""
__version__ = "0.1.0"

from . import safe_loading

safe_loading.install()

from . import models  # noqa: E402,F401  (registers architectures)
from . import tasks  # noqa: E402,F401  (registers tasks)
