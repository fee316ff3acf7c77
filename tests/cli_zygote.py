"""Python commands that forked commands start, forked too.

tests/cli_process.py forks each command a test runs from a preloaded server.
A command that starts Python children of its own (the study driver starts
fairseq-train once per epoch, then average_checkpoints, generate, validate and
the usage report; scripts/benchmark.py one child per variant; the prepare
scripts fairseq-preprocess) would start them as new interpreters, each paying
4-13 s of CPU for its imports alone. Here those commands see a *launcher* as
``sys.executable`` (and tests may put it first on ``PATH`` as ``python3`` for
shell scripts): a small script that a new interpreter runs without
site-packages (``-IS``, about 20 ms), which asks a *zygote* (a child of the
preloaded server, so it has imported what the server imports) to fork the
command, and stands in for it:

* ``LAUNCHER -m MODULE ARGS`` and ``LAUNCHER SCRIPT ARGS`` run in a process
  the zygote forks, with the launcher's stdin, stdout and stderr (the file
  descriptors themselves, passed over a Unix socket), working directory and
  environment, exactly as tests/cli_process.py runs a command (its ``_run``);
  anything else (``-c``, other interpreter flags, ``-m venv``/``pip``/
  ``ensurepip``, no argument, or no zygote answering) replaces the launcher
  with the real interpreter (``exec``);
* the launcher exits with the child's status; killed by signal N, it kills
  itself with N, so ``returncode`` is ``-N`` as for the real process.
  SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to the launcher
  go to the child;
* a launcher that dies (SIGKILL: ``Popen.kill()``, ``os.killpg``) takes the
  child's process group with it: the zygote SIGKILLs that group, which holds
  the child's own launchers, whose children go the same way. The whole tree
  of a killed command goes, as real processes in one group would.

What differs from real processes: a child's parent is the zygote, not the
command that started it (``os.getppid()``); the CPU time its parent reads
with ``getrusage(RUSAGE_CHILDREN)`` is the launcher's, not the command's
(tests of such a measurement run a real interpreter); what acts when a
process starts does not (``LD_PRELOAD``, so the study's jemalloc, and
``MALLOC_CONF``: tests/test_allocator.py runs real interpreters); every
child has the server's hash seed, and its peak resident memory starts at
the server's; and a signal sent to a process group other than SIGKILL
reaches the launchers in it, each passing it to its own child only.

The launcher half of this file imports only the standard library, and the
zygote starts no thread (it forks).
"""
import json
import os
import signal
import socket
import struct
import sys

RELAYED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
# modules that must run in a real interpreter: they make environments from it
REAL_ONLY = ("venv", "pip", "ensurepip")
_INT = struct.Struct("!i")


# ---------------------------------------------------------------- launcher

def _command(argv):
    """(module, args, script) for a command the zygote runs, else None."""
    if len(argv) >= 2 and argv[0] == "-m" and argv[1].split(".")[0] not in REAL_ONLY:
        return argv[1], argv[2:], False
    if argv and argv[0] and not argv[0].startswith("-"):
        return argv[0], argv[1:], True
    return None


def _recv_exactly(conn, n):
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise EOFError("the zygote closed the connection")
        data += chunk
    return data


def launch(socket_path, python, argv):
    """The launcher's body: run ``python *argv`` in a forked child (or exec
    the real interpreter), and exit as that child exits."""
    command = _command(argv)
    if command is None:
        os.execv(python, [python, *argv])
    for fd in (0, 1, 2):  # a closed one gets /dev/null, before the socket could take its number
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, os.O_RDWR)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(socket_path)
        cwd = os.getcwd()
    except OSError:
        conn.close()
        os.execv(python, [python, *argv])
    module, args, script = command
    # a signal before the request is out waits for it (its bytes must not split the request's)
    pending = []

    def relay(signum, frame):
        if pending is None:
            try:
                conn.sendall(_INT.pack(signum))
            except OSError:  # the child has ended and the zygote closed the connection
                pass
        else:
            pending.append(signum)

    for signum in RELAYED:
        signal.signal(signum, relay)
    payload = json.dumps({"module": module, "args": args, "script": script, "cwd": cwd,
                          "env": dict(os.environ)}).encode()
    socket.send_fds(conn, [_INT.pack(len(payload))], [0, 1, 2])
    conn.sendall(payload)
    queued, pending = pending, None
    for signum in queued:  # the zygote reads them once the child is forked
        relay(signum, None)
    _INT.unpack(_recv_exactly(conn, 4))  # the child's pid
    status, = _INT.unpack(_recv_exactly(conn, 4))
    if status < 0:
        if -status not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    os._exit(status & 0xFF)


LAUNCHER = """#!{python} -IS
import sys
sys.path.insert(0, {here!r})
import cli_zygote
cli_zygote.launch({socket!r}, {python!r}, sys.argv[1:])
"""


# ---------------------------------------------------------------- zygote

def serve(socket_path, launcher, fresh_path, owner):
    """The zygote: fork one child per launcher that connects; pass it the
    launcher's signals, tell the launcher its exit status, and kill its group
    if the launcher dies first. ``socket_path`` appears once it listens. It
    ends with the process ``owner`` (the pytest process that started it: an
    xdist worker ends without running ``atexit``) or at SIGTERM (``atexit``
    of multiprocessing), killing the groups of the children still running
    and removing its directory; SIGINT (Ctrl-C at pytest) is pytest's."""
    import selectors
    import shutil

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path + ".new")
    listener.listen(64)
    os.rename(socket_path + ".new", socket_path)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    owner_fd = os.pidfd_open(owner)  # readable once the owner has ended
    selector = selectors.DefaultSelector()
    for fileobj in (listener, wake_r, owner_fd):
        selector.register(fileobj, selectors.EVENT_READ)
    pid_of = {}   # launcher connection -> its child, while both are there
    conn_of = {}  # child not yet reaped -> its launcher's connection (None once gone)

    def shut_down(*_):
        for pid in conn_of:
            _kill_group(pid)
        shutil.rmtree(os.path.dirname(socket_path), ignore_errors=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, shut_down)

    def drop(conn):
        selector.unregister(conn)
        conn.close()
        pid = pid_of.pop(conn)
        if pid in conn_of:
            conn_of[pid] = None

    def accept():
        conn, _ = listener.accept()
        fds = []
        try:
            head, fds, _, _ = socket.recv_fds(conn, _INT.size, 3)
            request = json.loads(_recv_exactly(conn, _INT.unpack(head)[0]))
            pid = os.fork()
        except (OSError, EOFError, struct.error, ValueError):  # a launcher that died while asking; no fork
            for fd in fds:
                os.close(fd)
            conn.close()
            return
        if pid == 0:
            for fileobj in (listener, conn, *pid_of):
                fileobj.close()
            selector.close()
            signal.set_wakeup_fd(-1)
            for fd in (wake_r, wake_w, owner_fd):
                os.close(fd)
            for signum, handler in ((signal.SIGCHLD, signal.SIG_DFL), (signal.SIGTERM, signal.SIG_DFL),
                                    (signal.SIGINT, signal.default_int_handler)):
                signal.signal(signum, handler)
            _child(request, fds, launcher, fresh_path)
        try:  # in both processes, so that the group exists before either goes on
            os.setpgid(pid, pid)
        except OSError:  # the child already did, or already exited
            pass
        for fd in fds:
            os.close(fd)
        pid_of[conn], conn_of[pid] = pid, conn
        selector.register(conn, selectors.EVENT_READ)
        try:
            conn.sendall(_INT.pack(pid))
        except OSError:  # the launcher is gone: its EOF comes next
            pass

    def reap():
        while True:
            try:
                if not os.read(wake_r, 512):
                    break
            except BlockingIOError:
                break
        while conn_of:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = conn_of.pop(pid, None)
            if conn is not None:
                try:
                    conn.sendall(_INT.pack(os.waitstatus_to_exitcode(status)))
                except OSError:
                    pass
                drop(conn)

    def from_launcher(conn):
        pid = pid_of.get(conn)
        if pid is None:  # dropped earlier in this round (its child was reaped)
            return
        try:
            data = conn.recv(_INT.size)
        except OSError:
            data = b""
        if len(data) == _INT.size:
            try:
                os.kill(pid, _INT.unpack(data)[0])
            except OSError:
                pass
            return
        _kill_group(pid)  # the launcher is gone: so goes its child, with its group
        drop(conn)

    while True:
        for key, _ in selector.select():
            if key.fileobj == owner_fd:
                shut_down()
            elif key.fileobj is listener:
                accept()
            elif key.fileobj == wake_r:
                reap()
            else:
                from_launcher(key.fileobj)


def _kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _child(request, fds, launcher, fresh_path):
    """A forked child: the launcher's stdio, then the command as
    tests/cli_process.py runs it; never returns."""
    from tests import cli_process

    try:
        os.setpgid(0, 0)
    except OSError:
        pass
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    try:
        cli_process._run(request["module"], request["args"], request["cwd"], request["env"], fresh_path,
                         request["script"], launcher)
    finally:  # _run exits; this only if it raised before the command ran
        import traceback
        traceback.print_exc()
        os._exit(1)


def write_launcher(directory, socket_path):
    """The launcher script in ``directory`` as ``python`` and ``python3``;
    returns its path."""
    path = os.path.join(directory, "python")
    with open(path, "w") as f:
        f.write(LAUNCHER.format(python=sys.executable, here=os.path.dirname(os.path.abspath(__file__)),
                                socket=socket_path))
    os.chmod(path, 0o755)
    os.symlink("python", os.path.join(directory, "python3"))
    return path
