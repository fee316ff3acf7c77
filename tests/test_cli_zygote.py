"""tests/cli_zygote.py: a command through the launcher does what the same
command does in a new interpreter (output, input, status, signals, its
children), while it and its Python children are forked."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests import cli_process

COMMAND = textwrap.dedent("""\
    import os, signal, subprocess, sys
    print("argv", sys.argv, "name", __name__, "cwd", os.getcwd(), "env", os.environ.get("ZYGOTE_TEST"), flush=True)
    if "--wait" in sys.argv:  # until a SIGTERM, which it answers
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))
        print("waiting", flush=True)
        signal.pause()
    if "--self-kill" in sys.argv:
        os.kill(os.getpid(), signal.SIGKILL)
    if "--interrupt" in sys.argv:
        raise KeyboardInterrupt
    print("read", sys.stdin.read().strip())
    print("to stderr", file=sys.stderr)
    if "--mp" in sys.argv:  # a program's own worker process (fairseq's data loader starts them)
        import multiprocessing
        sys.stdout.flush()
        worker = multiprocessing.get_context("fork").Process(target=print, args=("from a worker",))
        worker.start()
        worker.join()
        print("worker", worker.exitcode)
    if "--nested" in sys.argv:
        child = subprocess.run([sys.executable, "-m", "kid", "inner", "--mp"], capture_output=True, text=True, input="x")
        print("child", child.returncode, child.stdout.replace(os.linesep, " | "), child.stderr.strip())
    if "--sleep" in sys.argv:
        with open("command.pid", "w") as f:
            f.write(str(os.getpid()))
        subprocess.Popen([sys.executable, "-m", "kid", "--write-pid"], stdin=subprocess.DEVNULL)
        import time
        time.sleep(120)
    if "--write-pid" in sys.argv:
        with open("grandchild.pid", "w") as f:
            f.write(str(os.getpid()))
        import time
        time.sleep(120)
    sys.exit(3)
    """)


@pytest.fixture
def work(tmp_path):
    (tmp_path / "kid.py").write_text(COMMAND)
    (tmp_path / "elsewhere").mkdir()
    return tmp_path


def _run(python, args, cwd, pythonpath):
    env = dict(os.environ, ZYGOTE_TEST="seen", PYTHONPATH=pythonpath)
    return subprocess.run([python, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
                          input="some input\n")


@pytest.mark.parametrize("form", [["kid.py", "a", "b"], ["-m", "kid", "a"], ["kid.py", "--nested"],
                                  ["kid.py", "--self-kill"], ["kid.py", "--interrupt"]])
def test_a_command_prints_reads_and_exits_as_in_a_new_interpreter(work, form):
    real = _run(sys.executable, form, work, str(work))
    forked = _run(cli_process.python(), form, work, str(work))
    assert (forked.returncode, forked.stdout, forked.stderr) == (real.returncode, real.stdout, real.stderr)
    assert real.returncode == {"--self-kill": -signal.SIGKILL, "--interrupt": -signal.SIGINT}.get(form[-1], 3)


def test_a_module_is_found_through_pythonpath_from_another_directory(work):
    """PYTHONPATH as the command's environment gives it (relative: from its
    working directory), not as pytest's was."""
    for pythonpath in (str(work), ".."):
        real = _run(sys.executable, ["-m", "kid", "a"], work / "elsewhere", pythonpath)
        forked = _run(cli_process.python(), ["-m", "kid", "a"], work / "elsewhere", pythonpath)
        assert (forked.returncode, forked.stdout) == (real.returncode, real.stdout) and real.returncode == 3


def test_the_command_and_its_python_children_are_forked(work):
    probe = "import subprocess, sys; print('torch' in sys.modules, flush=True); " \
            "subprocess.run([sys.executable, '-m', 'probe'] if 'outer' in sys.argv else [sys.executable, '-c', 'pass'])"
    (work / "probe.py").write_text(probe)
    forked = subprocess.run([cli_process.python(), "-m", "probe", "outer"], cwd=work, capture_output=True, text=True,
                            env=dict(os.environ, PYTHONPATH=str(work)), timeout=300)
    # the preloaded server imported torch; a new interpreter running this has not
    assert forked.stdout.split() == ["True", "True"], forked.stderr
    # what the zygote does not run (-c, -m venv) is the real interpreter
    real = subprocess.run([cli_process.python(), "-c", "import sys; print('torch' in sys.modules, sys.executable)"],
                          capture_output=True, text=True, timeout=300)
    assert real.stdout.split() == ["False", sys.executable]
    # a shell script's python3, through env_with_python
    shell = subprocess.run(["bash", "-c", 'cd "$0" && python3 -m probe', str(work)], capture_output=True, text=True,
                           env=cli_process.env_with_python(dict(os.environ, PYTHONPATH=str(work))), timeout=300)
    assert shell.stdout.split() == ["True"], shell.stderr


def test_a_signal_to_the_launcher_is_the_commands(work):
    """SIGTERM reaches the command, which answers it (exit 7), as a real one."""
    for python in (sys.executable, cli_process.python()):
        proc = subprocess.Popen([python, "kid.py", "--wait"], cwd=work, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert proc.stdout.readline().startswith("argv") and proc.stdout.readline() == "waiting\n"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 7, python


def _wait_gone(pid, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":  # a zombie: killed, not yet reaped
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_killing_the_launcher_kills_the_commands_tree(work):
    """As ``os.killpg`` on a real tree: the command and the Python child it
    started are gone once the launcher is killed."""
    proc = subprocess.Popen([cli_process.python(), "kid.py", "--sleep"], cwd=work, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True,
                            env=dict(os.environ, PYTHONPATH=str(work)))
    end = time.time() + 120
    while not (work / "grandchild.pid").exists() or not (work / "grandchild.pid").read_text():
        assert time.time() < end and proc.poll() is None, "the grandchild never started"
        time.sleep(0.05)
    command, grandchild = (int((work / f"{who}.pid").read_text()) for who in ("command", "grandchild"))
    assert command != proc.pid  # forked by the zygote, the launcher standing in for it
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(60) == -signal.SIGKILL
    assert _wait_gone(command), "the command outlived its killed launcher"
    assert _wait_gone(grandchild), "the command's child outlived the killed launcher"


def test_the_zygote_and_the_fork_server_end_with_their_pytest_process(tmp_path):
    """An xdist worker ends without ``atexit``: the zygote must not outlive
    it (nor keep the fork server alive, whose children it would be)."""
    script = tmp_path / "owner.py"
    script.write_text(textwrap.dedent(f"""\
        import os, subprocess, sys
        sys.path.insert(0, {str(cli_process.__file__.rsplit("/tests/", 1)[0])!r})
        from multiprocessing import forkserver
        from tests import cli_process
        if __name__ == "__main__":  # not again in the fork server, which imports this file as its main
            launcher = cli_process.python()
            assert subprocess.run([launcher, "-m", "json.tool"], input="[]", capture_output=True, text=True).stdout
            print(launcher, forkserver._forkserver._forkserver_pid, flush=True)
            os._exit(0)
        """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0 and proc.stdout, proc.stderr[-3000:]
    launcher, server = proc.stdout.split()
    assert _wait_gone(int(server)), "the fork server outlived its pytest process"
    # the zygote removes it as it ends, which may come just after the fork server's end
    end = time.time() + 30
    while os.path.exists(os.path.dirname(launcher)) and time.time() < end:
        time.sleep(0.05)
    assert not os.path.exists(os.path.dirname(launcher))
