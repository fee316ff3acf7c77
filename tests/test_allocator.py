"""jemalloc for every training entry point (fairseq_ctx/allocator.py): the
quickstart's, the table runner's and the study's children get the same
environment from one function; a child started through them has the library
mapped and the decay setting when it is installed, and none when it is
turned off; scripts/install-system-packages.sh installs it (with root and
apt-get) or says in one line how and what going without costs."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fairseq_ctx import allocator
from tests.utils import REPO

sys.path.insert(0, str(REPO / "scripts"))
import quickstart  # noqa: E402

# what the child reports: the allocator's settings and whether the library is
# mapped into it, after a training-sized allocation (131 MB, the logits of a
# 4096-token batch over an 8k vocabulary) freed and made again
CHILD = ("import os, torch\n"
         "for _ in range(2):\n"
         "    x = torch.empty(4096 * 8000, dtype=torch.float32); x.fill_(1.0); del x\n"
         "maps = open('/proc/self/maps').read()\n"
         "print('LD_PRELOAD=' + os.environ.get('LD_PRELOAD', ''))\n"
         "print('MALLOC_CONF=' + os.environ.get('MALLOC_CONF', ''))\n"
         "print('mapped=' + str('libjemalloc' in maps))\n")


def _report(text):
    return dict(line.split("=", 1) for line in text.splitlines() if line.split("=", 1)[0] in
                ("LD_PRELOAD", "MALLOC_CONF", "mapped"))


def _without_preload(monkeypatch):
    for name in ("LD_PRELOAD", "MALLOC_CONF", allocator.ENV_VAR):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.unit
def test_every_entry_point_uses_the_one_function():
    from fairseq_ctx.study import train as study_train
    from fairseq_ctx.tables import running

    assert study_train.child_env is allocator.child_env
    assert running.child_env is allocator.child_env
    assert quickstart.child_env is allocator.child_env


@pytest.mark.unit
def test_child_env_values(monkeypatch, tmp_path):
    _without_preload(monkeypatch)
    library = tmp_path / "libjemalloc.so.2"
    library.write_bytes(b"")
    monkeypatch.setenv(allocator.ENV_VAR, str(library))
    env = allocator.child_env()
    assert (env["LD_PRELOAD"], env["MALLOC_CONF"], env["PYTHONUNBUFFERED"]) == (
        str(library), "dirty_decay_ms:-1,muzzy_decay_ms:-1", "1")
    # the user's own preload and setting win
    env = allocator.child_env({"LD_PRELOAD": "/opt/prof.so", "MALLOC_CONF": "narenas:1"})
    assert (env["LD_PRELOAD"], env["MALLOC_CONF"]) == ("/opt/prof.so", "narenas:1")
    env = allocator.child_env({"MALLOC_CONF": "narenas:1"})
    assert (env["LD_PRELOAD"], env["MALLOC_CONF"]) == (str(library), "narenas:1")
    # turned off, or a named file that is not there: glibc's allocator
    for value in ("none", str(tmp_path / "missing.so")):
        monkeypatch.setenv(allocator.ENV_VAR, value)
        assert allocator.jemalloc_path() is None
        env = allocator.child_env()
        assert "LD_PRELOAD" not in env and "MALLOC_CONF" not in env
    monkeypatch.delenv(allocator.ENV_VAR)
    assert allocator.jemalloc_path() == next((p for p in allocator.candidates() if os.path.isfile(p)), None)


def _children(tmp_path):
    """The child's report through the quickstart's and the table runner's runners."""
    from fairseq_ctx.tables.running import run_logged

    cmd = [sys.executable, "-c", CHILD]
    quickstart.run(cmd, log_path=str(tmp_path / "quickstart.log"), echo=False)
    run_logged(cmd, tmp_path / "tables.log", REPO)
    return {name: _report((tmp_path / f"{name}.log").read_text()) for name in ("quickstart", "tables")}


@pytest.mark.skipif(allocator.jemalloc_path() is None,
                    reason="jemalloc not installed (scripts/install.sh installs it with root and apt-get)")
def test_a_training_child_has_jemalloc_when_installed(monkeypatch, tmp_path):
    _without_preload(monkeypatch)
    library = allocator.jemalloc_path()
    for name, report in _children(tmp_path).items():
        assert report == {"LD_PRELOAD": library, "MALLOC_CONF": allocator.MALLOC_CONF, "mapped": "True"}, name


def test_a_training_child_without_jemalloc(monkeypatch, tmp_path):
    _without_preload(monkeypatch)
    monkeypatch.setenv(allocator.ENV_VAR, "none")
    for name, report in _children(tmp_path).items():
        assert report == {"LD_PRELOAD": "", "MALLOC_CONF": "", "mapped": "False"}, name


# ---------------------------------------------------------------- scripts/install-system-packages.sh

SWORD = "sword-text-sparv sword-text-web libsword-utils"
COST = "without it training runs with glibc's allocator, about 1.4x the CPU time per epoch (docs/study.md)"
SWORD_COST = ("without them scripts/prepare-bible.sh cannot build the quickstart's corpus and tests/test_bible.py "
              "skips its end-to-end test")
CHROMIUM_COST = ("without it tests/test_attribution_page.py skips its browser test (the attribution page's DOM and "
                 "screenshot)")


def _fake(bin_dir: Path, name: str, script: str):
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)


def _install(tmp_path, uid, apt_get, sword_installed=True):
    """The script with fake ``id``, ``dpkg-query`` and ``apt-get`` first on
    PATH and jemalloc looked for at ``tmp_path/lib/libjemalloc.so.2``
    (``dpkg-query`` answers for the SWORD packages and Chromium alike)."""
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    _fake(fake, "id", f"echo {uid}\n")
    status = "install ok installed" if sword_installed else "unknown ok not-installed"
    _fake(fake, "dpkg-query", f"printf '{status}'\n")
    _fake(fake, "apt-get", f'echo "$@" >> {tmp_path}/apt.log\n' + apt_get)
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}", PYTHON=sys.executable,
               FAIRSEQ_CTX_JEMALLOC=str(tmp_path / "lib" / "libjemalloc.so.2"))
    proc = subprocess.run(["bash", "scripts/install-system-packages.sh"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    apt = (tmp_path / "apt.log").read_text().splitlines() if (tmp_path / "apt.log").exists() else []
    return proc.stdout.splitlines(), apt


def test_install_finds_jemalloc(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libjemalloc.so.2").write_bytes(b"")
    out, apt = _install(tmp_path, 0, apt_get="exit 0\n")
    assert out == [f"[install] jemalloc: {tmp_path}/lib/libjemalloc.so.2", "[install] SWORD modules: installed",
                   "[install] headless Chromium: installed"]
    assert apt == []


def test_install_as_root_with_apt_get(tmp_path):
    # apt-get "installs" the library where the allocator looks for it
    apt_get = f'mkdir -p {tmp_path}/lib && touch {tmp_path}/lib/libjemalloc.so.2\n'
    out, apt = _install(tmp_path, 0, apt_get=apt_get)
    assert out == ["[install] SWORD modules: installed", "[install] headless Chromium: installed",
                   "[install] apt-get install libjemalloc2", f"[install] jemalloc: {tmp_path}/lib/libjemalloc.so.2"]
    assert apt == ["install -y -qq --no-install-recommends libjemalloc2"]


def test_install_as_root_when_apt_get_fails(tmp_path):
    out, apt = _install(tmp_path, 0, apt_get="exit 100\n", sword_installed=False)
    assert out == [f"[install] apt-get install libjemalloc2 {SWORD} chromium-headless-shell",
                   "fairseq_ctx: note: jemalloc not found (apt-get failed; install by hand: sudo apt-get install "
                   "libjemalloc2, or your system's jemalloc package, or set "
                   f"FAIRSEQ_CTX_JEMALLOC=/path/to/libjemalloc.so.2); {COST}",
                   f"fairseq_ctx: note: SWORD packages missing: {SWORD} (apt-get failed; install by hand: sudo "
                   f"apt-get install {SWORD}); {SWORD_COST}",
                   "fairseq_ctx: note: headless Chromium missing (apt-get failed; install by hand: sudo apt-get "
                   f"install chromium-headless-shell); {CHROMIUM_COST}"]
    # the install, then an update of the package lists (which fails too: no second install)
    assert apt == [f"install -y -qq --no-install-recommends libjemalloc2 {SWORD} chromium-headless-shell", "update -qq"]


def test_install_without_root_is_one_line(tmp_path):
    out, apt = _install(tmp_path, 1000, apt_get="exit 0\n")
    assert out == ["[install] SWORD modules: installed", "[install] headless Chromium: installed",
                   "fairseq_ctx: note: jemalloc not found (not root with apt-get; install by hand: sudo apt-get "
                   "install libjemalloc2, or your system's jemalloc package, or set "
                   f"FAIRSEQ_CTX_JEMALLOC=/path/to/libjemalloc.so.2); {COST}"]
    assert apt == []


@pytest.mark.unit
def test_install_lists_prepare_bibles_packages():
    def packages(script, name):
        line = next(line for line in (REPO / "scripts" / script).read_text().splitlines()
                    if line.startswith(f"{name}=("))
        return line.split("(", 1)[1].rstrip(")").split()

    assert packages("install-system-packages.sh", "SWORD_PACKAGES") == packages("prepare-bible.sh", "PACKAGES")
    assert " ".join(packages("prepare-bible.sh", "PACKAGES")) == SWORD
    assert "bash scripts/install-system-packages.sh" in (REPO / "scripts" / "install.sh").read_text()
