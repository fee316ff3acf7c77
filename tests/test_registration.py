"""``import fairseq_ctx`` is cheap, and the architectures, the task and the
weights-only allow-list are registered whichever way fairseq and the plugin
are imported (each case in a fresh interpreter). ``--user-dir`` loading is
covered by the training tests (tests/test_end_to_end.py)."""
import subprocess
import sys
import textwrap

import pytest

from tests.utils import REPO

REGISTERED = """
import argparse, torch
from fairseq.models import ARCH_MODEL_REGISTRY
from fairseq.tasks import TASK_REGISTRY
import fairseq_ctx
assert fairseq_ctx._registered
assert {"transformer_dc", "transformer_ctxsan", "transformer_gret", "transformer_ctxenc"} <= set(ARCH_MODEL_REGISTRY)
assert "document_translation" in TASK_REGISTRY
assert argparse.Namespace in torch.serialization.get_safe_globals()
assert not any(type(f).__name__ == "_RegisterWhenFairseqIsImported" for f in sys.meta_path)
print("ok")
"""

CASES = {
    # the package alone imports neither; importing fairseq afterwards registers
    "plugin_then_fairseq": """
        import sys
        import fairseq_ctx
        assert "torch" not in sys.modules and "fairseq" not in sys.modules, sorted(sys.modules)
        assert not fairseq_ctx._registered
        import fairseq
        fairseq_ctx.register()  # idempotent
    """,
    # fairseq's first import comes from one of our modules: registering waits until it is done
    "submodule_first": """
        import sys
        from fairseq_ctx.data.document_context_dataset import DocumentContextDataset
        from fairseq_ctx.models.transformer_dc import parse_layer_spec
    """,
    # --user-dir's order (fairseq first) and the tests' (torch first): registered at import
    "fairseq_first": """
        import sys
        import fairseq
        import fairseq_ctx
    """,
    "torch_first": """
        import sys
        import torch
        import fairseq_ctx
        assert "fairseq" in sys.modules
    """,
    "explicit": """
        import sys
        import fairseq_ctx
        fairseq_ctx.register()
    """,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_registered_however_imported(case):
    code = textwrap.dedent(CASES[case]) + REGISTERED
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


def test_the_start_up_hook_and_the_package_hook_import_fairseq_together():
    """With fairseq_ctx_quiet.pth's start-up hook (this file loaded again by
    its path) and the package's hook both waiting for fairseq, importing the
    package first and fairseq second runs both hooks, once each (two
    wrapping finders once asked each other without end: RecursionError)."""
    import subprocess

    from fairseq_ctx import quiet

    code = quiet.startup_line() + (
        "import fairseq_ctx.architectures, sys, warnings\n"
        "from fairseq import options\n"
        "import fairseq_ctx\n"
        "assert fairseq_ctx._registered\n"
        "assert not [f for f in sys.meta_path if 'WhenFairseqIsImported' in type(f).__name__], sys.meta_path\n"
        "print(len(warnings.filters))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={k: v for k, v in __import__("os").environ.items()
                               if k != "FAIRSEQ_CTX_UPSTREAM_WARNINGS"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert int(proc.stdout.split()[-1]) >= len(quiet.UPSTREAM_FILTERS)
