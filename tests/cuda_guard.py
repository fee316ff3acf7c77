"""A CUDA error leaves its process's CUDA context broken for good: every
later CUDA call in that process fails with it (an asynchronous error such
as the "misaligned address" of a fused kernel is reported again at each
synchronization). Under pytest-xdist (a GPU call runs ``pytest -m gpu -n 4``)
one such error would fail every test its worker runs after it.

After each GPU test this fixture synchronizes the device; where that raises,
the worker exits (xdist reports the test as having crashed its worker and
starts a fresh one for the rest), or, without xdist, pytest stops with one
line saying why. It is in the suite's conftest, and ``-p tests.cuda_guard``
loads it elsewhere."""
import os
import sys

import pytest


@pytest.fixture(autouse=True)
def cuda_context_guard(request):
    yield
    if request.node.get_closest_marker("gpu") is None:
        return
    import torch

    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return
    try:
        torch.cuda.synchronize()
    except RuntimeError as e:  # torch.AcceleratorError is one
        message = f"the CUDA context is broken after {request.node.nodeid}: {str(e).splitlines()[0]}"
        if os.environ.get("PYTEST_XDIST_WORKER"):
            sys.stderr.write(f"{message}; this worker exits, and xdist starts a fresh one for the rest\n")
            sys.stderr.flush()
            os._exit(1)
        pytest.exit(f"{message}; the other tests need a new process", returncode=1)
