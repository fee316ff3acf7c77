"""The environment of every training process our entry points start: the
quickstart (``scripts/quickstart.py``), the study (``python3 -m
fairseq_ctx.study``) and the table runner (``fairseq-ctx-table``) all build
their children's environment with :func:`child_env`, so each runs fairseq
the same way.

Choices, and why:

* **jemalloc, preloaded.** glibc's allocator returns every block over its
  mmap threshold (32 MB at most) to the kernel when it is freed, and the next
  update page-faults it in again: a training step's logits and their
  gradients (4096 tokens x 8k vocabulary, 131 MB each) made 80,000 minor page
  faults a second, 22% of the process's CPU time in the kernel, and an epoch
  of the study's baseline took 10 CPU minutes against 7.2 with jemalloc
  (docs/study.md). jemalloc with page purging off (``dirty_decay_ms:-1,
  muzzy_decay_ms:-1``: freed pages are kept for the next update) keeps those
  blocks (92 page faults in 10 s). It is preloaded into the child
  (``LD_PRELOAD``), not into our own process, which has already started with
  glibc's.
* **Found, not assumed.** :func:`jemalloc_path` looks where the
  distributions put ``libjemalloc.so.2`` (Debian/Ubuntu's multiarch
  directories, Fedora's ``lib64``, ``/usr/local/lib``, a conda
  environment's ``lib``); ``FAIRSEQ_CTX_JEMALLOC`` names the file instead,
  or ``none`` turns it off. Without it the child runs with glibc's allocator,
  only slower; ``scripts/install.sh`` installs Debian's ``libjemalloc2``
  where it can (root and apt-get) and otherwise says how in one line.
* **The user's preload wins.** A child whose environment has ``LD_PRELOAD``
  already (a profiler, another allocator) gets none of ours, and a
  ``MALLOC_CONF`` already set is kept.
* **Unbuffered output** (``PYTHONUNBUFFERED=1``): the parents read their
  children's progress lines as they are printed (through a pipe, Python would
  send them in 8 KB blocks).

Standard library only: the entry points import this before torch.
"""
import os
import platform
from typing import Dict, List, Optional

# the library's soname in every distribution's package (Debian's libjemalloc2)
SONAME = "libjemalloc.so.2"
# page purging off: freed pages stay with the process for the next update
MALLOC_CONF = "dirty_decay_ms:-1,muzzy_decay_ms:-1"
# FAIRSEQ_CTX_JEMALLOC=PATH uses that file; =none runs without jemalloc
ENV_VAR = "FAIRSEQ_CTX_JEMALLOC"
OFF = "none"


def candidates() -> List[str]:
    """Where distributions install ``libjemalloc.so.2``, most specific first."""
    machine = platform.machine()
    multiarch = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu",
                 "ppc64le": "powerpc64le-linux-gnu", "s390x": "s390x-linux-gnu"}.get(machine, f"{machine}-linux-gnu")
    dirs = [f"/usr/lib/{multiarch}", "/usr/lib64", "/usr/lib", "/usr/local/lib"]
    if os.environ.get("CONDA_PREFIX"):
        dirs.append(os.path.join(os.environ["CONDA_PREFIX"], "lib"))
    return [os.path.join(d, SONAME) for d in dirs]


def jemalloc_path() -> Optional[str]:
    """The jemalloc library the training children preload, or None (not
    installed, or turned off with ``FAIRSEQ_CTX_JEMALLOC=none``)."""
    chosen = os.environ.get(ENV_VAR)
    if chosen:
        return None if chosen == OFF or not os.path.isfile(chosen) else chosen
    return next((path for path in candidates() if os.path.isfile(path)), None)


def child_env(base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The environment of a training (or decoding) child: ``base`` (default:
    this process's environment), unbuffered, with jemalloc preloaded where it
    is installed and no ``LD_PRELOAD`` is set already."""
    env = dict(os.environ if base is None else base, PYTHONUNBUFFERED="1")
    library = jemalloc_path()
    if library is not None and not env.get("LD_PRELOAD"):
        env["LD_PRELOAD"] = library
        env.setdefault("MALLOC_CONF", MALLOC_CONF)
    return env


def main(argv=None) -> int:
    """``python3 -m fairseq_ctx.allocator``: print the library the training
    children preload and exit 0, or exit 1 when there is none
    (``scripts/install.sh`` asks this after installing it)."""
    library = jemalloc_path()
    if library is None:
        return 1
    print(library)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
