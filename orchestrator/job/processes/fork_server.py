"""The fork server: one process per sweep on the local launcher that has imported torch, inductor,
transformers and the orchestrator, and that never compiles, never touches a GPU and runs no thread.
Each fresh process of a job (the worker, its side processes, its compile probes) is a fork of it
instead of a new interpreter: it starts with nothing compiled, no CUDA context and no allocator
state, as a new interpreter does, without paying the imports again.

    python -m orchestrator.job.processes.fork_server SOCKET [MODULE:ATTRIBUTE ...]   (cli/sweep.py)

A client (`start`) sends the request file, its working directory, its environment and its standard
streams (as file descriptors); the server forks, answers the child's pid, and when the child ends
its exit status, Popen's way (negative: the signal). The child holds the client's connection and
kills itself when it closes: a job stopped however (SIGKILL included) takes its fork along, as
`die_with_parent` does for a child of its own.

A fork is only what a fresh interpreter would be where the imports would have read the same: a
request whose environment differs from the server's in a variable read at import (IMPORT_TIME) gets
no fork (`start` returns None) and its caller starts an interpreter.

Started ahead (`serve(..., ahead=True)`, `launcher.start_ahead`), the server forks nothing: it keeps
one spare interpreter that has done the imports and waits, hands it the next request (the client's
connection and streams), and starts the next spare. Each process is then a new interpreter, as
without a server, whose imports ran while an earlier process worked (a fork ran eager steps slower
on the GPU hosts: benchmarks/h200-time-to-answer/). A spare imports only while no process of the
sweep measures (`measuring`), so that its imports never run beside a timed step. A request that
finds the spare waiting on a measurement gets none: that measurement may be its own parent's.

Both ends of one small socket protocol (the client's `start` and `Forked`, the server's `serve` and
its child) live here: they are read together or not at all.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import importlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import IO

ADDRESS_ENV = "ORCHESTRATOR_FORK_SERVER"  # the server's socket, for the jobs of its sweep
QUIET = "quiet"  # beside the socket: a spare imports holding it exclusively, a measuring process shared
GRANT_AFTER_S = 1.0  # a new spare's lock waits this long: the process just handed one takes it first
# Prefixes of variables that torch, triton, transformers, the C runtime or Python read at import.
IMPORT_TIME = ("TORCH", "PYTORCH", "TRITON", "PYTHON", "LD_", "OMP_", "MKL_", "KMP_", "HF_", "TRANSFORMERS")
PRELOAD = (  # what every fresh process imports (a sweep of transformers models adds theirs: serve)
    "orchestrator.job.processes.fresh",
    "orchestrator.job.worker",
    "orchestrator.job.processes.side_process",
    "orchestrator.job.processes.compile_probe",
    "torch._inductor.compile_fx",
)
PR_SET_PDEATHSIG = 1
forked = False  # in a child of the server: True (the worker records how it started)
started_ahead = False  # in a spare the server handed a request to: True (likewise)
SERVER_CWD = os.getcwd()


def die_with_parent() -> None:
    """In a child, before exec: Linux kills it when its parent dies (SIGKILL skips any cleanup)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def import_time_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(IMPORT_TIME)}


_held: list[IO[str]] = []  # the quiet lock this process holds in `measuring` (one at most)


def _forget_in_child() -> None:
    """A child forked without exec (a fork-started compile worker, a DataLoader's) must not keep the
    quiet lock once its parent's measurement ends: it closes its copy (the parent's lock stays)."""
    for lock in _held:
        lock.close()
    _held.clear()


os.register_at_fork(after_in_child=_forget_in_child)


def quiet_lock() -> Path | None:
    """The sweep's quiet lock, where it has spares and this process does not hold it yet."""
    address = os.environ.get(ADDRESS_ENV)
    quiet = Path(address).with_name(QUIET) if address else None
    return quiet if quiet is not None and not _held and quiet.exists() else None


@contextlib.contextmanager
def measuring() -> Iterator[None]:
    """While this process measures, no spare of its sweep imports beside it: it waits for one that
    is importing, then holds the sweep's quiet lock shared. Nothing where `quiet_lock` is None."""
    quiet = quiet_lock()
    if quiet is None:
        yield
        return
    with quiet.open() as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)
        _held.append(lock)
        try:
            yield
        finally:
            _held.clear()  # the lock goes with the file


class Forked:
    """A child of the fork server, as much of subprocess.Popen as the callers use."""

    def __init__(self, conn: socket.socket, pid: int) -> None:
        self.conn, self.pid = conn, pid
        self.returncode: int | None = None
        self._buffer = b""

    def _read(self, timeout: float | None) -> None:
        self.conn.settimeout(timeout)
        while b"\n" not in self._buffer:
            chunk = self.conn.recv(64)
            if not chunk:  # the server died: its child's status is lost with it
                self.returncode = -signal.SIGKILL
                return
            self._buffer += chunk
        self.returncode = int(self._buffer.split(b"\n")[0].split()[1])
        self.conn.close()

    def poll(self) -> int | None:
        if self.returncode is None:
            with contextlib.suppress(TimeoutError, BlockingIOError):
                self._read(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            try:
                self._read(timeout)
            except TimeoutError:
                raise subprocess.TimeoutExpired(f"fork {self.pid}", timeout or 0) from None
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)


def _ready(address: Path, deadline_s: float = 120.0) -> bool:
    """Whether the server at `address` is up: waits while it imports (the socket appears when it is
    ready), not past its failure, its end (the folder goes) or the deadline."""
    end = time.monotonic() + deadline_s
    while not address.exists():
        failed = address.with_name(address.name + ".failed")
        if failed.exists() or not address.parent.exists() or time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def start(module: str, request: Path, notices: bool, streams: tuple[int, int, int]) -> Forked | None:
    """Fork a fresh process from this sweep's server that runs `module.main(REQUEST)` (as `python -m
    MODULE REQUEST` would, without the interpreter's start); None where there is no server, or its
    fork would not be what an interpreter started here would be. `notices`: ignore SIGTERM and
    SIGUSR1/2 (the scheduler's notices, which the supervisor handles); `streams`: stdin, stdout,
    stderr."""
    address = os.environ.get(ADDRESS_ENV)
    if not address or not _ready(Path(address)):
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(address)
        env = dict(os.environ)
        ask = {"module": module, "request": str(request), "cwd": os.getcwd(), "env": env, "notices": notices}
        socket.send_fds(conn, [json.dumps(ask).encode() + b"\n"], list(streams))
        conn.settimeout(60)
        first = b""
        while not first.endswith(b"\n"):
            chunk = conn.recv(1)
            if not chunk:
                raise ConnectionError("the fork server closed the connection")
            first += chunk
    except OSError:  # no server (gone, or never ready): an interpreter instead
        conn.close()
        return None
    word, value = first.decode().split()
    if word != "pid":  # refused: the environment differs where imports read it
        conn.close()
        return None
    return Forked(conn, int(value))


def _child(conn: socket.socket, ask: dict, fds: list[int]) -> None:
    """In a fork or a spare: take the client's streams, directory and environment, then be
    `python -m MODULE REQUEST`; never returns."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(ask["cwd"])
    os.environ.clear()
    os.environ.update(ask["env"])
    if sys.path and sys.path[0] == SERVER_CWD:  # `python -m` puts the working directory first
        sys.path[0] = ask["cwd"]
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # the server ignores Ctrl-C; a job does not
    if ask["notices"]:
        for notice in (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(notice, signal.SIG_IGN)
    import faulthandler

    faulthandler.enable()  # as `python -X faulthandler`, on the client's stderr

    def die_with_client() -> None:
        while conn.recv(64):
            pass
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=die_with_client, daemon=True).start()
    module = importlib.import_module(ask["module"])
    sys.argv = [str(module.__file__), ask["request"]]
    code = 1
    try:
        module.main(ask["request"])
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except KeyboardInterrupt:  # as an interpreter ends on an unhandled Ctrl-C: by the signal
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:  # noqa: BLE001 (printed as the interpreter would, then the exit code 1)
        traceback.print_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _forks_may_use_cuda() -> bool:
    """Whether a fork of this process would be allowed CUDA (torch poisons forks of a process that
    touched the driver): asked of a real fork."""
    pid = os.fork()
    if pid == 0:
        torch = sys.modules.get("torch")
        os._exit(1 if torch is not None and torch.cuda._is_in_bad_fork() else 0)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def _request(conn: socket.socket, count: int = 3) -> tuple[dict | None, list[int]]:
    """A client's request (one JSON line) and its streams (`count` descriptors); None for a client
    gone or garbled."""
    fds: list[int] = []
    try:
        message, fds, _, _ = socket.recv_fds(conn, 1 << 20, count)
        while message and not message.endswith(b"\n"):  # a stream may split a long environment
            more = conn.recv(1 << 20)
            if not more:
                break
            message += more
        return json.loads(message), fds
    except (OSError, ValueError):
        return None, fds  # closed by the caller


def _preload(extra: list[str]) -> None:
    """Import PRELOAD and `extra` (`module:attribute`, the sweep's model classes: transformers loads
    a model's module on first use)."""
    # `torch.cuda.is_available()`, which imports call, asks the CUDA driver, and torch then refuses
    # CUDA in every fork ("Cannot re-initialize CUDA in forked subprocess", seen on the H200); asked
    # through NVML it touches no driver state. For the imports only: the children get their own env.
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    for name in (*PRELOAD, *extra):
        module, _, attribute = name.partition(":")
        # what fails to load here fails in the job that uses it, with its own error
        with contextlib.suppress(ImportError, AttributeError):
            loaded = importlib.import_module(module)
            if attribute:
                getattr(loaded, attribute)


class _Spare:
    """An interpreter started ahead: once the server grants it the quiet lock (`grant`), it imports,
    says `ready`, then takes one request (`hand`)."""

    def __init__(self, extra: list[str]) -> None:
        self.channel, theirs = socket.socketpair()
        self.process = subprocess.Popen(
            # the server's own interpreter and flags (`-X faulthandler`, as every fresh process has)
            [*sys.orig_argv[: sys.orig_argv.index("-m")], "-m", "orchestrator.job.processes.fork_server"]
            + ["--spare", str(theirs.fileno()), *extra],
            pass_fds=(theirs.fileno(),),
            preexec_fn=die_with_parent,
            stdin=subprocess.DEVNULL,
        )
        theirs.close()
        self.state = "waiting"  # for the quiet lock; then `importing`, `ready`
        self.since = time.monotonic()

    def grant(self, quiet: Path) -> bool:
        """Take the quiet lock exclusively for this spare, where no process measures, and hand it
        over: the lock is the spare's until its imports end (flock's lock is the open file's)."""
        with quiet.open() as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            socket.send_fds(self.channel, [b"go\n"], [lock.fileno()])
        self.state = "importing"
        return True

    def stop(self) -> None:
        """Its end, where it will not be handed a request: its channel closed, its process gone."""
        self.channel.close()
        self.process.kill()
        self.process.wait()

    def hand(self, conn: socket.socket, ask: dict, fds: list[int]) -> None:
        """The request, the client's connection and its streams, to this spare (it becomes the child)."""
        socket.send_fds(self.channel, [json.dumps(ask).encode() + b"\n"], [conn.fileno(), *fds])
        self.channel.close()


def _spare(fd: int, extra: list[str]) -> None:
    """In a spare: the imports under the quiet lock the server grants, `ready` to the server, then
    one request's child; never returns."""
    global started_ahead
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as the server: Ctrl-C is the job's, once it has one
    channel = socket.socket(fileno=fd)
    _, granted, _, _ = socket.recv_fds(channel, 64, 1)
    if not granted:  # the server went (the sweep ended) before no process measured
        os._exit(0)
    _preload(extra)
    os.close(granted[0])  # the lock: measuring processes go on
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():  # its child could not pick its own GPU
        os._exit(1)
    channel.sendall(b"ready\n")
    ask, fds = _request(channel, 4)
    if ask is None or len(fds) != 4:  # the server went (the sweep ended), or a garbled hand-over
        os._exit(0 if ask is None and not fds else 1)
    channel.close()
    os.set_inheritable(fds[0], False)  # as an accepted socket is: not the job's subprocesses'
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, 0)  # from now on it ends with its client, as a fork does
    started_ahead = True
    _child(socket.socket(fileno=fds[0]), ask, fds[1:])


def _client_there(conn: socket.socket) -> bool:
    """Whether a queued request's client still waits (it sends nothing more; it may hang up)."""
    try:
        return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def serve(address: str, extra: list[str], ahead: bool = False) -> None:
    """Listen at `address` and start a child per request, reporting its end: a fork of this server,
    which imported PRELOAD and `extra` first (see `_preload`), or with `ahead` a spare interpreter
    that did (this server then imports nothing)."""
    global forked
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the jobs; the sweep ends this server
    own = import_time_env(dict(os.environ))
    quiet = Path(address).with_name(QUIET)
    spare: _Spare | None = None
    try:
        if ahead:
            quiet.touch()
            spare = _Spare(extra)
        else:
            _preload(extra)
            if not _forks_may_use_cuda():
                raise RuntimeError("a fork of this server could not use CUDA: an import initialised it")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(address + ".tmp")
        listener.listen(64)
        os.rename(address + ".tmp", address)  # the socket appears once it is ready
    except BaseException:
        Path(address + ".failed").touch()  # its clients stop waiting, and start interpreters
        raise
    children: dict[int, tuple[socket.socket, subprocess.Popen | None]] = {}
    queued: list[tuple[socket.socket, dict, list[int]]] = []  # requests for the spare importing

    def refuse(conn: socket.socket, fds: list[int]) -> None:
        with contextlib.suppress(OSError):  # the client may be gone
            conn.sendall(b"refused 0\n")
        conn.close()
        for fd in fds:
            os.close(fd)

    def started(conn: socket.socket, pid: int, process: subprocess.Popen | None) -> None:
        with contextlib.suppress(OSError):  # a client gone: its child sees it and ends
            conn.sendall(f"pid {pid}\n".encode())
        children[pid] = (conn, process)

    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)

    def new_spare() -> _Spare | None:
        try:
            fresh = _Spare(extra)
        except OSError:  # no process to start: every client an interpreter of its own
            return None
        sel.register(fresh.channel, selectors.EVENT_READ)  # readable: its state, or its end
        return fresh

    def hopeless(candidate: _Spare) -> bool:
        """Whether it waits on a measurement: not granted the quiet lock, which is not free now. The
        grant waits GRANT_AFTER_S, for the process just handed a spare to take the lock first (a
        side process or a probe measures at once)."""
        if candidate.state != "waiting" or time.monotonic() - candidate.since < GRANT_AFTER_S:
            return False
        return not candidate.grant(quiet)

    if spare is not None:
        sel.register(spare.channel, selectors.EVENT_READ)
    while True:
        for key, _ in sel.select(timeout=0.05):
            if spare is not None and key.fileobj is spare.channel:
                if spare.channel.recv(64).startswith(b"ready"):
                    spare.state = "ready"
                    continue
                # It ended. Before it was ready its imports failed: no more spares, every client an
                # interpreter of its own; a ready one was stopped from outside: the next one starts.
                sel.unregister(spare.channel)
                spare.stop()
                spare = new_spare() if spare.state == "ready" else None
                continue
            conn, _ = listener.accept()
            ask, fds = _request(conn)
            if (
                ask is None
                or import_time_env(ask["env"]) != own
                or len(fds) != 3
                or (ahead and (spare is None or queued or hopeless(spare)))
            ):  # in ahead mode one request waits for the spare; others start their own interpreters
                refuse(conn, fds)
            elif ahead:
                queued.append((conn, ask, fds))
            else:
                pid = os.fork()
                if pid == 0:
                    listener.close()
                    for other, _process in children.values():
                        other.close()
                    forked = True
                    _child(conn, ask, fds)
                for fd in fds:
                    os.close(fd)
                started(conn, pid, None)
        if queued and not _client_there(queued[0][0]):  # it gave up waiting: it starts an interpreter
            conn, _ask, fds = queued.pop()
            refuse(conn, fds)
        stuck = spare is not None and hopeless(spare)  # also grants the lock, where it is free now
        if queued and (spare is None or stuck):
            # none comes before a measurement ends, maybe the one its requester's parent makes
            conn, _ask, fds = queued.pop()
            refuse(conn, fds)
        if spare is not None and spare.state == "ready" and queued:
            conn, ask, fds = queued.pop()
            sel.unregister(spare.channel)  # before `hand` closes it
            try:
                spare.hand(conn, ask, fds)
            except OSError:  # it ended meanwhile: this client starts an interpreter, the next spare
                spare.stop()
                spare = new_spare()
                refuse(conn, fds)
                continue
            for fd in fds:
                os.close(fd)
            started(conn, spare.process.pid, spare.process)
            spare = new_spare()  # the next one imports once no process measures
        for pid in list(children):  # reap: each ended child's status to its client
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == 0:
                continue
            conn, process = children.pop(pid)
            code = os.waitstatus_to_exitcode(status)
            if process is not None:
                process.returncode = code  # reaped here: its Popen must not wait for it again
            with contextlib.suppress(OSError):  # the client may be gone
                conn.sendall(f"exit {code}\n".encode())
            conn.close()


@contextlib.contextmanager
def serving(python: list[str], extra: tuple[str, ...] = (), ahead: bool = False) -> Iterator[dict[str, str]]:
    """A fork server for the scope (it dies with this process), with `extra` imported too, or with
    `ahead` spare interpreters that import them (serve); yields the environment that points the jobs
    started in the scope at it."""
    folder = tempfile.mkdtemp(prefix="orchestrator-fork-")  # short: a socket path has 107 bytes
    address = os.path.join(folder, "socket")
    server = subprocess.Popen(
        [
            *python,
            "-m",
            "orchestrator.job.processes.fork_server",
            *(["--ahead"] if ahead else []),
            address,
            *extra,
        ],
        preexec_fn=die_with_parent,
        stdin=subprocess.DEVNULL,
    )
    try:
        yield {ADDRESS_ENV: address}
    finally:
        server.kill()
        server.wait()
        for name in ("socket", "socket.tmp", "socket.failed", QUIET):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(folder, name))
        os.rmdir(folder)


if __name__ == "__main__":  # the module proper serves, so that its children set its flags
    from orchestrator.job.processes import fork_server

    if sys.argv[1] == "--spare":
        fork_server._spare(int(sys.argv[2]), sys.argv[3:])
    elif sys.argv[1] == "--ahead":
        fork_server.serve(sys.argv[2], sys.argv[3:], ahead=True)
    else:
        fork_server.serve(sys.argv[1], sys.argv[2:])
