"""The tools' thread count (fairseq_ctx/cli.py: idle_cores, set_tool_threads):
the cores other processes keep busy are left to them, at least one thread,
and OMP_NUM_THREADS, where set, is obeyed as it is."""
import subprocess
import sys

import pytest

from fairseq_ctx import cli
from tests.utils import REPO


def _idle(monkeypatch, before, after, allowed):
    samples = iter([before, after])
    monkeypatch.setattr(cli, "_cpu_times", lambda: next(samples))
    monkeypatch.setattr(cli.os, "sched_getaffinity", lambda pid: set(allowed))
    return cli.idle_cores(sample_seconds=0)


@pytest.mark.unit
def test_idle_cores_leaves_the_busy_ones(monkeypatch):
    # (busy, total) jiffies per CPU; over the sample CPU 0 ran another process
    # 95% of the time, CPU 1 5%
    before = {0: (1000, 2000), 1: (500, 2000)}
    after = {0: (1095, 2100), 1: (505, 2100)}
    assert _idle(monkeypatch, before, after, {0, 1}) == 1
    # both quiet: both cores
    assert _idle(monkeypatch, before, {0: (1002, 2100), 1: (505, 2100)}, {0, 1}) == 2
    # both busy: still one thread
    assert _idle(monkeypatch, before, {0: (1100, 2100), 1: (590, 2100)}, {0, 1}) == 1
    # only the CPUs this process may run on count (CPU 0 is someone else's)
    assert _idle(monkeypatch, before, after, {1}) == 1
    assert _idle(monkeypatch, {**before, 2: (0, 2000)}, {**after, 2: (1, 2100)}, {1, 2}) == 2


@pytest.mark.unit
def test_cpu_times_reads_every_cpu():
    times = cli._cpu_times()
    with open("/proc/stat") as f:
        cpus = sorted(int(line.split()[0][3:]) for line in f if line.startswith("cpu") and line[3].isdigit())
    assert sorted(times) == cpus
    assert all(0 <= busy <= total for busy, total in times.values())


def _threads_in_child(env_threads):
    """torch's thread count after set_tool_threads in a new interpreter, and
    the line it logs."""
    code = ("import logging, sys, torch\n"
            "logging.basicConfig(level=logging.INFO, stream=sys.stdout, format='%(message)s')\n"
            "from fairseq_ctx import cli\n"
            "cli.idle_cores = lambda: 1\n"
            "n = cli.set_tool_threads()\n"
            "print(n, torch.get_num_threads())\n")
    import os

    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    if env_threads is not None:
        env["OMP_NUM_THREADS"] = env_threads
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=600, check=True).stdout.splitlines()
    return out


def test_set_tool_threads():
    # no OMP_NUM_THREADS: the idle cores (1 here, as idle_cores is told)
    assert _threads_in_child(None) == ["1 thread (1 idle core at start; OMP_NUM_THREADS sets it)", "1 1"]
    # OMP_NUM_THREADS wins, even over an idle count below it
    assert _threads_in_child("2") == ["2 threads (OMP_NUM_THREADS)", "2 2"]
