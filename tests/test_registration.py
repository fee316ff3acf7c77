"""``import fairseq_ctx`` is cheap, and the architectures, the task and the
weights-only allow-list are registered whichever way fairseq and the plugin
are imported (each case in a fresh interpreter). ``--user-dir`` loading is
covered by the training tests (tests/test_end_to_end.py)."""
import subprocess
import sys
import textwrap

import pytest

from tests.utils import REPO

pytestmark = pytest.mark.integration

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


CHANGES_PROBE = r'''
import json, logging, sys, warnings
# a fresh process as fairseq's commands have it: fairseq first (the start-up
# hook of fairseq_ctx_quiet.pth, if installed, is taken out to see register()'s own changes)
sys.meta_path[:] = [f for f in sys.meta_path if "WhenFairseqIsImported" not in type(f).__name__]
import torch, fairseq, fairseq.checkpoint_utils, fairseq.models, fairseq.tasks, fairseq.options, fairseq.trainer
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY, MODEL_REGISTRY
from fairseq.models.fairseq_model import BaseFairseqModel, FairseqEncoderDecoderModel
from fairseq.models.transformer import TransformerModel
from fairseq.tasks import TASK_REGISTRY, FairseqTask
from fairseq.tasks.translation import TranslationTask
from fairseq.optim import OPTIMIZER_REGISTRY
from fairseq.optim.fp16_optimizer import FP16Optimizer
from fairseq.optim.amp_optimizer import AMPOptimizer

def snapshot():
    s = {}
    for mod in (fairseq.checkpoint_utils, fairseq.models, fairseq.tasks, fairseq.options, fairseq.utils,
                fairseq.trainer, fairseq.optim, torch.serialization, torch.nn.functional, torch):
        for k, v in list(vars(mod).items()):
            if callable(v):
                s[f"{mod.__name__}.{k}"] = id(v)
    for cls in (BaseFairseqModel, FairseqEncoderDecoderModel, TransformerModel, FairseqTask, TranslationTask,
                FP16Optimizer, AMPOptimizer, torch.nn.Module):
        for k, v in list(vars(cls).items()):
            s[f"{cls.__name__}.{k}"] = id(v)
    for name, reg in (("ARCH_CONFIG_REGISTRY", ARCH_CONFIG_REGISTRY), ("ARCH_MODEL_REGISTRY", ARCH_MODEL_REGISTRY),
                      ("MODEL_REGISTRY", MODEL_REGISTRY), ("TASK_REGISTRY", TASK_REGISTRY),
                      ("OPTIMIZER_REGISTRY", OPTIMIZER_REGISTRY)):
        for k, v in reg.items():
            s[f"{name}[{k}]"] = id(v)
    s["sys.excepthook"] = id(sys.excepthook)
    s["sys.meta_path"] = tuple(id(f) for f in sys.meta_path)
    s["warnings.filters"] = tuple(map(str, warnings.filters))
    s["root level"] = logging.getLogger().level
    s["safe globals"] = tuple(sorted(map(str, torch.serialization.get_safe_globals())))
    b = torch.backends.cuda
    s["sdpa"] = [b.flash_sdp_enabled(), b.mem_efficient_sdp_enabled(), b.cudnn_sdp_enabled(), b.math_sdp_enabled(),
                 list(torch._C._get_sdp_priority_order())]
    return s

before = snapshot()
import fairseq_ctx
fairseq_ctx.register()
after = snapshot()
print(json.dumps(sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))))
'''


def _documented_change(key: str) -> str:
    """The PROCESS_WIDE_CHANGES entry a changed name belongs to."""
    if key.startswith(("ARCH_MODEL_REGISTRY[", "MODEL_REGISTRY[", "TASK_REGISTRY[", "OPTIMIZER_REGISTRY[")):
        return "fairseq's registries"
    if key.startswith("ARCH_CONFIG_REGISTRY["):
        return "fairseq's ARCH_CONFIG_REGISTRY functions"  # new ones are registry entries too, wrapped
    return {"fairseq.checkpoint_utils.load_checkpoint_to_cpu": "fairseq.checkpoint_utils.load_checkpoint_to_cpu",
            "BaseFairseqModel.load_state_dict": "fairseq BaseFairseqModel.load_state_dict",
            "fairseq.models.build_model": "fairseq.models.build_model",
            "FP16Optimizer.build_optimizer": "fairseq.optim.FP16Optimizer.build_optimizer",
            "AMPOptimizer.clip_grad_norm": "fairseq.optim.AMPOptimizer.clip_grad_norm and __init__",
            "AMPOptimizer.__init__": "fairseq.optim.AMPOptimizer.clip_grad_norm and __init__",
            "sys.excepthook": "sys.excepthook",
            "warnings.filters": "warnings.filters and the root logger's level",
            "root level": "warnings.filters and the root logger's level",
            "safe globals": "torch.serialization's safe globals",
            "sdpa": "torch's SDPA kernel switches and priority order",
            "sys.meta_path": "sys.meta_path"}.get(key, f"UNDOCUMENTED: {key}")


def test_register_changes_exactly_the_documented_process_wide_state():
    """In a fresh interpreter with fairseq imported, register() changes
    fairseq's, torch's and Python's state only where
    fairseq_ctx.PROCESS_WIDE_CHANGES says (and each entry happens; the
    import hook only when the package comes before fairseq, tested above)."""
    import json
    import os

    import fairseq_ctx

    env = {k: v for k, v in os.environ.items() if k not in ("FAIRSEQ_CTX_UPSTREAM_WARNINGS", "FAIRSEQ_CTX_SDPA")}

    def changed_by_register(**extra):
        proc = subprocess.run([sys.executable, "-c", CHANGES_PROBE], capture_output=True, text=True,
                              env={**env, **extra}, cwd=REPO)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.splitlines()[-1])

    # torch's attention kernels: the default policy disables cuDNN's; FAIRSEQ_CTX_SDPA=torch leaves them alone
    assert "sdpa" in changed_by_register()
    assert "sdpa" not in changed_by_register(FAIRSEQ_CTX_SDPA="torch")
    changed = changed_by_register(FAIRSEQ_CTX_SDPA="cudnn-last")
    assert "ARCH_MODEL_REGISTRY[transformer_ctxsan]" in changed and "TASK_REGISTRY[document_translation]" in changed
    assert "ARCH_CONFIG_REGISTRY[transformer]" in changed  # fairseq's own, wrapped for --bf16 on CUDA
    assert "OPTIMIZER_REGISTRY[adam_foreach]" in changed and "OPTIMIZER_REGISTRY[adam]" not in changed
    found = {_documented_change(k) for k in changed}
    assert found == set(fairseq_ctx.PROCESS_WIDE_CHANGES) - {"sys.meta_path"}, sorted(found)
