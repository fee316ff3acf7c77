"""Where the time of one call goes (a training update, a decoded batch): on
the host, inside ATen operations, in synchronizing calls and copies, and
between operations (Python: fairseq's trainer and search, the modules'
calls); on the GPU, how much of the call's wall time it was busy (a
kernel, a copy or a memset running).

A model whose update is bound by its kernel launches or by Python leaves
the GPU idle most of the time, and its speed ratio against the baseline
then follows its operation count, not its FLOPs; a ratio below the FLOP
bound is read with this beside it (scripts/benchmark.py ``--profile-steps``).

Measured with ``torch.profiler`` (CPU activity, and CUDA's on a GPU) around
one call, synchronized before and after, its Chrome trace read back:

* ``wall_ms``: the profiled call's wall time (the profiler adds a few
  microseconds per operation, so it is above the timed calls' time; the
  shares are what to read);
* ``op_ms``: host time inside ATen operations (the union of their
  intervals over every thread: the autograd engine runs the backward on
  threads of its own); on CPU this includes their compute;
* ``wait_ms`` / ``waits``: host time in CUDA's synchronizing calls and
  memory copies (``*Synchronize``, ``cudaMemcpy*``: a ``.item()``, a
  ``.tolist()``), where the host waits for the GPU;
* ``between_ops_ms``: the wall time outside every operation and CUDA call
  (Python and the framework between operations, and the profiler's own
  bookkeeping);
* ``launches`` / ``launch_ms``: kernel launch calls and their host time;
* ``device_ms``: the union of the intervals in which a kernel, copy or
  memset ran on the GPU (busy), ``device_busy`` its share of ``wall_ms``;
  ``kernels``: how many kernels ran (None on CPU, and where the profiler
  recorded no device activity: ``device_recorded`` False);
* ``top_kernels`` and ``top_ops``: the kernels by device time and the ATen
  operations by self time (their time less that of the operations they
  called), the first eight each, with their counts.

Each profiling session after a process's first may lose a kernel record or
so at its start (CUPTI's timestamps of a session begun again: pytorch issue
192021), which makes ``kernels`` and ``device_ms`` a little low, never
high; the device's times share the host's clock, and kineto drops what
falls outside the session, so ``device_busy`` is at most 1 but for the
clocks' fit.
"""
import json
import os
import tempfile
import time

DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
API_CATEGORIES = ("cuda_runtime", "cuda_driver")
# the kernel launch calls kineto records (runtime and driver API; its names
# carry no version suffix): plain, extended, cooperative, per-thread-stream
# (``_ptsz``) and CUDA graphs' (a graph launch starts many kernels)
LAUNCH_PREFIXES = ("cudaLaunchKernel", "cudaLaunchCooperativeKernel", "cuLaunchKernel", "cuLaunchCooperativeKernel",
                   "cudaGraphLaunch", "cuGraphLaunch")


def is_launch(name: str) -> bool:
    return name.startswith(LAUNCH_PREFIXES)


TOP = 8


def _union_ms(intervals) -> float:
    """Milliseconds covered by ``(start, end)`` intervals in microseconds."""
    total, end = 0.0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total / 1000


def _spans(events):
    return [(e["ts"], e["ts"] + e["dur"]) for e in events]


def _self_ms(ops):
    """{name: [self ms, count]} of ATen operations: each one's duration less
    its direct children's (operations nested in it on the same thread)."""
    by_thread = {}
    for e in ops:
        by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    totals = {}
    for events in by_thread.values():
        stack = []  # [end, event, children's time]
        own = []
        for e in sorted(events, key=lambda e: (e["ts"], -e["dur"])):
            while stack and stack[-1][0] <= e["ts"]:
                own.append(stack.pop())
            if stack:
                stack[-1][2] += e["dur"]
            stack.append([e["ts"] + e["dur"], e, 0.0])
        own += stack
        for _, e, children in own:
            entry = totals.setdefault(e["name"], [0.0, 0])
            entry[0] += (e["dur"] - children) / 1000
            entry[1] += 1
    return totals


def _top(totals):
    ranked = sorted(totals.items(), key=lambda kv: -kv[1][0])[:TOP]
    return [{"name": name[:120], "ms": round(ms, 3), "count": count} for name, (ms, count) in ranked]


def summarize(trace_events, wall_ms: float, cuda: bool) -> dict:
    """The summary above, from a Chrome trace's ``traceEvents`` of a call
    that took ``wall_ms``; ``cuda``: whether CUDA activity was asked for."""
    done = [e for e in trace_events if e.get("ph") == "X" and "dur" in e and "ts" in e]
    ops = [e for e in done if e.get("cat") == "cpu_op"]
    api = [e for e in done if e.get("cat") in API_CATEGORIES]
    device = [e for e in done if e.get("cat") in DEVICE_CATEGORIES]
    launches = [e for e in api if is_launch(e["name"])]
    waits = [e for e in api if "Synchronize" in e["name"] or e["name"].startswith("cudaMemcpy")]
    recorded = bool(device)
    device_ms = _union_ms(_spans(device)) if recorded else None
    kernels = {}
    for e in device:
        if e.get("cat") == "kernel":
            entry = kernels.setdefault(e["name"], [0.0, 0])
            entry[0] += e["dur"] / 1000
            entry[1] += 1
    return {
        "wall_ms": round(wall_ms, 3),
        "op_ms": round(_union_ms(_spans(ops)), 3),
        "wait_ms": round(_union_ms(_spans(waits)), 3), "waits": len(waits),
        "between_ops_ms": round(max(0.0, wall_ms - _union_ms(_spans(ops + api))), 3),
        "launches": len(launches), "launch_ms": round(sum(e["dur"] for e in launches) / 1000, 3),
        "device_recorded": recorded if cuda else None,
        "device_ms": round(device_ms, 3) if recorded else None,
        "device_busy": round(device_ms / wall_ms, 4) if recorded and wall_ms > 0 else None,
        "kernels": sum(c for _, c in kernels.values()) if recorded else None,
        "top_kernels": _top(kernels),
        "top_ops": _top(_self_ms(ops)),
    }


def profile_call(fn, cuda: bool) -> dict:
    """``fn()`` once under the profiler, synchronized before and after on
    CUDA; its summary (:func:`summarize`)."""
    prof, wall_ms = run_profiled(fn, cuda)
    return summarize(trace_events(prof), wall_ms, cuda)


class _CallFailed(Exception):
    """The profiled call itself raised (its exception is the cause)."""


def profile_or_error(fn, cuda: bool) -> dict:
    """:func:`profile_call`, or ``{"error": ...}`` where the profiler cannot
    run (a diagnosis: its failure leaves the measurement beside it whole);
    an exception of ``fn`` itself (a CUDA error, out of memory) is raised as
    it came, since what runs after it would run on a broken device."""
    try:
        return profile_call(fn, cuda)
    except _CallFailed as e:
        raise e.__cause__ from None
    except Exception as e:  # noqa: BLE001 (the profiler's own failure, whatever it is, as one line)
        return {"error": f"{type(e).__name__}: {e}"}


def shares(profile) -> dict:
    """The shares of a profile's wall time: ``busy`` (the GPU; None on CPU),
    ``between`` (outside every operation) and ``waiting`` (for the GPU)."""
    wall = profile["wall_ms"]
    return {"busy": profile.get("device_busy"), "between": profile["between_ops_ms"] / wall,
            "waiting": profile["wait_ms"] / wall}


def line(profile) -> str:
    """One line of a step profile: GPU busy share, time between operations
    and waiting, launches; or the profiler's error."""
    if "error" in profile:
        return f"not profiled ({profile['error']})"
    s = shares(profile)
    busy = f"GPU busy {s['busy']:.0%}, " if s["busy"] is not None else ""
    return (f"{profile['wall_ms']:.1f} ms profiled: {busy}between operations {s['between']:.0%}, "
            f"waiting for the GPU {s['waiting']:.0%}, {profile['launches']} launches")


def run_profiled(fn, cuda: bool):
    """``(profiler, wall ms)`` of ``fn()`` run once under the profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    def sync():
        if cuda:
            torch.cuda.synchronize()

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    sync()
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        try:
            fn()
            sync()
        except Exception as e:
            raise _CallFailed() from e
        wall_ms = (time.perf_counter() - start) * 1000
    return prof, wall_ms


def trace_events(prof):
    """The ``traceEvents`` of the profiler's Chrome trace."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            return json.load(f)["traceEvents"]
