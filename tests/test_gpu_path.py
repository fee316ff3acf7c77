"""CPU tests that guard the GPU path (most sessions and CI have no GPU).

* ``fairseq-train --bf16`` on a CUDA machine: fairseq 0.12's parser turns
  ``--bf16`` into ``--tpu`` (torch_xla, absent: the run stops at once);
  checked by making ``torch.cuda.is_available`` say yes.
* No device tensor goes to numpy without ``.cpu()`` (``Tensor.numpy`` raises
  on a CUDA tensor): every ``.numpy()`` call in ``fairseq_ctx/`` and
  ``scripts/`` reads through a ``.cpu()`` first, or is on the list below of
  values that are NumPy or CPU by construction.
* tests/test_gpu.py names each forced SDPA kernel as the profiler counts it.
(The fused attention kernels' layout rule: test_fused_attention_layout.py.)
"""
import ast
from pathlib import Path

import pytest
import torch

from tests.utils import USER_DIR

REPO = Path(__file__).resolve().parents[1]


def _train_cfg(monkeypatch, cuda, extra):
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    argv = ["/nonexistent", "--user-dir", USER_DIR, *extra]
    monkeypatch.setattr("sys.argv", ["fairseq-train", *argv])
    return convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(), argv))


@pytest.mark.unit
@pytest.mark.parametrize("arch", ["transformer", "transformer_ctxsan", "transformer_dc", "transformer_ctxenc"])
def test_bf16_on_a_cuda_machine_trains_on_the_gpu_not_a_tpu(arch, monkeypatch):
    cfg = _train_cfg(monkeypatch, True, ["--arch", arch, "--bf16"])
    assert cfg.common.bf16 and not cfg.common.tpu
    # what fairseq's Trainer decides from it: the CUDA device
    assert torch.cuda.is_available() and not cfg.common.cpu and not cfg.common.tpu


@pytest.mark.slow
def test_bf16_keeps_fairseqs_meaning_where_it_applies(monkeypatch):
    # no CUDA (a TPU host): --bf16 still implies --tpu, as in fairseq
    assert _train_cfg(monkeypatch, False, ["--arch", "transformer", "--bf16"]).common.tpu
    # --tpu asked for on the command line is kept
    assert _train_cfg(monkeypatch, True, ["--arch", "transformer", "--bf16", "--tpu"]).common.tpu
    # --cpu --bf16 is fairseq's business (its CPU bf16 path goes through the TPU flag)
    assert _train_cfg(monkeypatch, True, ["--arch", "transformer", "--bf16", "--cpu"]).common.tpu
    # nothing else changes
    cfg = _train_cfg(monkeypatch, True, ["--arch", "transformer", "--fp16"])
    assert cfg.common.fp16 and not cfg.common.tpu


# (file, the expression .numpy() is called on): NumPy or CPU tensors by construction
CPU_BY_CONSTRUCTION = {
}


def _numpy_calls_without_cpu(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "numpy":
            receiver = node.func.value
            chain = ast.unparse(receiver)
            if ".cpu()" in chain or (path.relative_to(REPO).as_posix(), chain) in CPU_BY_CONSTRUCTION:
                continue
            found.append(f"{path.relative_to(REPO)}:{node.lineno}: {chain}.numpy()")
    return found


@pytest.mark.unit
def test_no_device_tensor_goes_to_numpy_without_cpu():
    files = sorted((REPO / "fairseq_ctx").rglob("*.py")) + sorted((REPO / "scripts").rglob("*.py"))
    found = [line for path in files for line in _numpy_calls_without_cpu(path)]
    assert found == [], "\n".join(found)


@pytest.mark.unit
def test_the_numpy_check_finds_a_device_tensor(tmp_path):
    """The check itself: the benchmark's former ``sample["id"].numpy()`` is
    found, ``.cpu().numpy()`` is not."""
    path = REPO / "scripts" / "_numpy_check_probe.py"
    try:
        path.write_text('a = sample["id"].numpy()\nb = sample["id"].cpu().numpy()\n')
        assert _numpy_calls_without_cpu(path) == ["scripts/_numpy_check_probe.py:1: sample['id'].numpy()"]
    finally:
        path.unlink()


@pytest.mark.unit
def test_the_gpu_tests_name_each_forced_kernel_as_the_profiler_counts_it():
    """tests/test_gpu.py forces each SDPA kernel in turn and checks, from the
    profiler's counts (fused_attention.KERNEL_OPS), that only it or the math
    fallback ran, and that the memory-efficient and math kernels took every
    call. The kernel's name must be the one the counts use: under another
    name the forced kernel, having run, reads as a stranger, and a check
    meant for it never applies. Here on CPU: the names, the switches each
    forcing sets, and the check on the counts a GPU would record."""
    from torch.nn.attention import SDPBackend

    from fairseq_ctx.modules import fused_attention
    from tests import test_gpu

    assert set(test_gpu.BACKENDS) <= set(fused_attention.KERNEL_OPS.values())
    cuda = torch.backends.cuda
    switches = {"flash": cuda.flash_sdp_enabled, "efficient": cuda.mem_efficient_sdp_enabled,
                "cudnn": cuda.cudnn_sdp_enabled, "math": cuda.math_sdp_enabled}
    for backend in test_gpu.BACKENDS:
        with test_gpu._backend(backend):
            assert {k for k, on in switches.items() if on()} == {backend, "math"}
        test_gpu._check_kernels({"calls": 3, backend: 3}, backend)
    test_gpu._check_kernels({"calls": 3, "flash": 2, "math": 1}, "flash")  # math may take what flash cannot
    for ran, backend in (({"calls": 3, "efficient": 2, "math": 1}, "efficient"),  # it must take every call
                         ({"calls": 3, "cudnn": 3}, "flash"),  # another kernel ran
                         ({"calls": 3, "flash": 2}, "flash")):  # a call no kernel accounts for
        with pytest.raises(AssertionError):
            test_gpu._check_kernels(ran, backend)
    assert SDPBackend.EFFICIENT_ATTENTION is getattr(SDPBackend, fused_attention._KERNELS["efficient"][1])
