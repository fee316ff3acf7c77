"""Command-line runs in child processes of a preloaded fork server.

``python -m fairseq_cli.train ...`` in a new interpreter spends most of a
tiny test run importing torch, torch._dynamo (which torch.optim imports when
the optimizer is built), scipy and scikit-learn (which fairseq's criterions
import) and fairseq: 4-6 s of CPU per command. Here a fork server
(multiprocessing's "forkserver": a new interpreter started once per pytest
process, never running test code) imports those once, and every command runs
in a new child process forked from it, as ``python -m MODULE ARGS`` (or
``python SCRIPT ARGS``) would run:

* its own process: own pid, exit status, stdout, stderr and stdin; it can be
  SIGKILLed, or be one of several distributed ranks;
* ``MODULE`` executed as ``__main__`` (:func:`runpy.run_module`), with the
  command's ``sys.argv``, working directory and environment, and a new
  interpreter's ``sys.path`` (the working directory first, as ``-m`` puts
  it); an uncaught exception goes through ``sys.excepthook`` and exits with
  status 1, ``SystemExit`` as the interpreter handles it, then the
  ``atexit`` handlers run; multiprocessing as in a new interpreter;
* fairseq_cli's modules, fairseq_ctx and ``--user-dir`` are imported by the
  command itself: nothing preloaded registers a model, patches fairseq or
  allows a global for weights-only ``torch.load``; logging is set up as a
  new interpreter sets it up (tests/cli_preload.py holds back what importing
  fairseq does to it until the command imports fairseq).

What a child does not repeat is the import itself, so warnings or log lines
that importing torch or fairseq would print are not in its output: a test of
a command's complete stderr (tests/test_warnings.py) runs a new interpreter
(``fresh=True`` of tests.utils.run_cli). tests/test_registration.py and
tests/test_console_scripts.py start new interpreters too.

The Python children that a command starts itself (``sys.executable -m
...``) are forked as well, through a zygote (tests/cli_zygote.py); a test
that starts a driver directly uses :func:`python` or, for a shell script,
:func:`env_with_python`.
"""
import multiprocessing.process as _mp_process
import os
import signal
import subprocess
import sys
import tempfile
import time

# the class of a program's main process (multiprocessing deletes its name);
# taken when this module is imported, in the fork server's child before the
# child becomes a multiprocessing worker
_MainProcess = type(_mp_process.current_process())

# Third-party libraries (none configures logging or starts a thread), then
# fairseq with its import-time logging set-up held back (tests/cli_preload.py).
# This module too: its _MainProcess is then the server's, which the zygote's
# children (tests/cli_zygote.py) need, the zygote being a (daemonic) worker.
PRELOAD = ["numpy", "torch", "torch._dynamo", "scipy.stats", "sklearn.metrics", "omegaconf", "hydra",
           "tests.cli_preload", "tests.cli_process"]


def _fresh_multiprocessing():
    """multiprocessing as a new interpreter has it: this is the main process
    of its own program (not a worker of the fork server), with the platform's
    default start method (torch's DataLoader workers: fork), no fork server
    and its own resource tracker (not the test process's)."""
    from multiprocessing import context, forkserver, resource_tracker

    _mp_process._current_process = _MainProcess()
    _mp_process._parent_process = None
    _mp_process._children = set()
    context._default_context._actual_context = None
    server = forkserver.ForkServer()
    forkserver._forkserver = server
    for name in ("ensure_running", "get_inherited_fds", "connect_to_new_process", "set_forkserver_preload"):
        setattr(forkserver, name, getattr(server, name))
    tracker = resource_tracker.ResourceTracker()
    resource_tracker._resource_tracker = tracker
    for name in ("ensure_running", "register", "unregister", "getfd"):
        setattr(resource_tracker, name, getattr(tracker, name))


def _replay_at_first_fairseq_import():
    """What importing fairseq does to logging (recorded by tests/cli_preload.py
    in the server), done when the command first imports fairseq, as in a new
    interpreter."""
    import builtins
    import importlib
    import logging

    preload = sys.modules.get("tests.cli_preload")
    if preload is None or not preload.BASIC_CONFIG_CALLS:
        return
    real_import, real_import_module = builtins.__import__, importlib.import_module

    def replay(name):
        if name == "fairseq" or name.startswith("fairseq."):
            builtins.__import__, importlib.import_module = real_import, real_import_module
            for args, kwargs in preload.BASIC_CONFIG_CALLS:
                logging.basicConfig(*args, **kwargs)

    def first_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0:
            replay(name)
        return real_import(name, globals, locals, fromlist, level)

    def first_import_module(name, package=None):
        if not name.startswith("."):
            replay(name)
        return real_import_module(name, package)

    builtins.__import__, importlib.import_module = first_import, first_import_module


def _child(module, args, cwd, env, stdin_path, out_path, err_path, fresh_path, script=False, launcher=None):
    """The body of the child process: ``python -m module *args``, or with
    ``script`` ``python module *args`` (``module`` a file path), its stdio on
    these files."""
    for fd, path, flags in ((0, stdin_path or os.devnull, os.O_RDONLY),
                            (1, out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                            (2, err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
        new = os.open(path, flags, 0o644)
        os.dup2(new, fd)
        os.close(new)
    _run(module, args, cwd, env, fresh_path, script, launcher)


def _run(module, args, cwd, env, fresh_path, script, launcher):
    """``python -m module *args`` (``script``: ``python module *args``) in
    this forked process, on file descriptors 0-2 as they are; its Python
    children go through ``launcher`` (tests/cli_zygote.py) when given; exits
    the process."""
    import atexit
    import io
    import runpy

    # stdio as a new interpreter would open it
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.open(0, "rb", closefd=False), encoding="utf-8")
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(
        io.open(1, "wb", buffering=0 if unbuffered else -1, closefd=False), encoding="utf-8",
        write_through=unbuffered)
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(
        io.open(2, "wb", buffering=0 if unbuffered else -1, closefd=False), encoding="utf-8",
        errors="backslashreplace", line_buffering=True)
    _fresh_multiprocessing()
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    # torch's intra-op threads as a new interpreter sets them from this
    # environment (the server imported torch with OMP_NUM_THREADS=1, so that
    # no OpenMP thread exists before the fork): OMP_NUM_THREADS, else a thread
    # per CPU this process may run on
    import torch
    torch.set_num_threads(int(env.get("OMP_NUM_THREADS") or len(os.sched_getaffinity(0))))
    # a new interpreter's sys.path: -m puts the cwd first, a script its
    # directory; then PYTHONPATH's entries, made absolute from the cwd
    pythonpath = [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [os.path.dirname(os.path.abspath(module)) if script else os.getcwd(), *pythonpath, *fresh_path]
    sys.argv = [module, *args]
    if launcher:
        sys.executable = launcher
    _replay_at_first_fairseq_import()
    code = 0
    try:
        if script:
            _run_script(module)
        else:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:  # as the interpreter: the traceback, then death by SIGINT
        _print_exception()
        code = -signal.SIGINT
    except BaseException:
        _print_exception()
        code = 1
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        if code < 0:
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
        os._exit(code)


def _run_script(path):
    """``python PATH`` for a source file: ``__main__`` with an absolute
    ``__file__`` while ``sys.argv[0]`` stays as given (runpy.run_path would
    set both to the one path it is given)."""
    import importlib.machinery
    import io
    import runpy
    import types

    absolute = os.path.abspath(path)
    if not os.path.isfile(absolute) or not absolute.endswith(".py"):  # a directory or zip with __main__.py
        runpy.run_path(path, run_name="__main__")
        return
    main = types.ModuleType("__main__")
    main.__file__, main.__cached__ = absolute, None
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", absolute)
    sys.modules["__main__"] = main
    with io.open_code(absolute) as f:
        code = compile(f.read(), absolute, "exec")
    exec(code, main.__dict__)


def _print_exception():
    """The traceback of the exception being handled as the interpreter
    prints it: from the command's first frame (not this file's or runpy's)."""
    etype, value, tb = sys.exc_info()
    while tb is not None and tb.tb_frame.f_globals.get("__name__") in (__name__, "runpy"):
        tb = tb.tb_next
    sys.excepthook(etype, value.with_traceback(tb), tb)  # the interpreter prints value.__traceback__


_CONTEXT = None
_FRESH_PATH = None
_LAUNCHER = None


def _context():
    global _CONTEXT, _FRESH_PATH, _LAUNCHER
    if _CONTEXT is None:
        import json
        import multiprocessing

        # sys.path of a new interpreter (without the entry of its script or
        # -m, nor PYTHONPATH's, which each command's environment gives), not
        # pytest's: the child starts from it
        _FRESH_PATH = json.loads(subprocess.run(
            [sys.executable, "-c", "import json, sys; print(json.dumps(sys.path[1:]))"],
            capture_output=True, text=True, check=True, cwd="/",
            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}).stdout)

        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        # the server imports torch with OMP_NUM_THREADS=1 (each child sets its own threads)
        saved = os.environ.get("OMP_NUM_THREADS")
        os.environ["OMP_NUM_THREADS"] = "1"
        try:
            from multiprocessing import forkserver
            forkserver.ensure_running()
        finally:
            if saved is None:
                del os.environ["OMP_NUM_THREADS"]
            else:
                os.environ["OMP_NUM_THREADS"] = saved
        try:
            _LAUNCHER = _start_zygote(ctx)
        except (OSError, RuntimeError) as e:  # no pidfd_open, a socket path too long...
            print(f"tests/cli_process.py: no zygote ({e}); a command's Python children are new interpreters",
                  file=sys.stderr)
        _CONTEXT = ctx
    return _CONTEXT


def _start_zygote(ctx):
    """tests/cli_zygote.py's zygote, forked from the preloaded server; returns
    its launcher's path once the zygote listens."""
    import atexit
    import shutil

    from tests import cli_zygote

    directory = tempfile.mkdtemp(prefix="zygote_")
    atexit.register(shutil.rmtree, directory, True)
    socket_path = os.path.join(directory, "socket")
    launcher = cli_zygote.write_launcher(directory, socket_path)
    zygote = ctx.Process(target=cli_zygote.serve, args=(socket_path, launcher, _FRESH_PATH, os.getpid()),
                         daemon=True)
    zygote.start()
    end = time.time() + 120
    while not os.path.exists(socket_path):
        if not zygote.is_alive() or time.time() > end:
            raise RuntimeError(f"the zygote of tests/cli_zygote.py did not start (exit status {zygote.exitcode})")
        time.sleep(0.01)
    return launcher


def python():
    """The Python command a test starts instead of ``sys.executable`` for a
    command with Python children: ``python -m MODULE``/``python SCRIPT`` run
    forked, their Python children too (tests/cli_zygote.py)."""
    _context()
    return _LAUNCHER or sys.executable


def env_with_python(env):
    """``env`` with the launcher's directory first on PATH, so that a shell
    script's ``python3`` and ``python`` are :func:`python`."""
    launcher = python()
    if launcher == sys.executable:
        return dict(env)
    return {**env, "PATH": os.path.dirname(launcher) + os.pathsep + env.get("PATH", "")}


class CliProcess:
    """``python -m MODULE ARGS`` started in a forked child (Popen-like:
    ``pid``, ``poll()``, ``wait()``, ``kill()``, ``returncode``); its stdout
    and stderr go to files, read with :meth:`stdout_text` / :meth:`stderr_text`."""

    def __init__(self, module, args, cwd, env, input=None, script=False):
        self._dir = tempfile.mkdtemp(prefix="cli_")
        self.out_path = os.path.join(self._dir, "stdout")
        self.err_path = os.path.join(self._dir, "stderr")
        stdin_path = None
        if input is not None:
            stdin_path = os.path.join(self._dir, "stdin")
            with open(stdin_path, "w", encoding="utf-8") as f:
                f.write(input)
        ctx = _context()
        self._proc = ctx.Process(target=_child, args=(
            module, [str(a) for a in args], str(cwd), dict(env), stdin_path, self.out_path, self.err_path,
            _FRESH_PATH, script, _LAUNCHER))
        self._what = f"python {module}" if script else f"python -m {module}"
        self._proc.start()
        self.pid = self._proc.pid
        self.returncode = None

    def poll(self):
        if self.returncode is None and not self._proc.is_alive():
            self._proc.join()
            self.returncode = self._proc.exitcode
        return self.returncode

    def wait(self, timeout=None):
        self._proc.join(timeout)
        if self._proc.exitcode is None:
            raise subprocess.TimeoutExpired(self._what, timeout)
        self.returncode = self._proc.exitcode
        return self.returncode

    def kill(self):
        self._proc.kill()

    def _read(self, path):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def stdout_text(self):
        return self._read(self.out_path)

    def stderr_text(self):
        return self._read(self.err_path)

    def wait_for_line(self, needle, timeout=600, poll=0.01):
        """Block until a stdout line contains ``needle``; returns the
        stdout so far, or None if the process ended first."""
        end = time.time() + timeout
        while time.time() < end:
            text = self.stdout_text()
            if any(needle in line for line in text.splitlines()):
                return text
            if self.poll() is not None:
                return None
            time.sleep(poll)
        raise subprocess.TimeoutExpired(needle, timeout)

    def cleanup(self):
        import shutil
        shutil.rmtree(self._dir, ignore_errors=True)


def run(module, args, cwd, env, input=None, timeout=600, script=False):
    """Run ``python -m module args`` (``script``: ``python module args``) to
    its end in a forked child; returns a :class:`subprocess.CompletedProcess`
    with text stdout and stderr."""
    proc = CliProcess(module, args, cwd, env, input=input, script=script)
    try:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
        cmd = [sys.executable, *([] if script else ["-m"]), module, *map(str, args)]
        return subprocess.CompletedProcess(cmd, proc.returncode,
                                           proc.stdout_text(), proc.stderr_text())
    finally:
        proc.cleanup()
