"""torchrun's workers forked from the launcher's own interpreter, when that interpreter arrived warm.

A replica forked from vertexdist's warm pool (`local-run --warm`, `emulator start --warm`) starts with torch
already imported. torchrun would still start each local rank as a new interpreter (`python -u -m
vertexdist_launcher.worker ...`, torch's `SubprocessHandler`), importing torch again. Here instead, before
torchrun starts any thread, the launcher forks one *fork server* (single-threaded, torch imported, CUDA never
touched); torchrun's handler asks it for each worker, and it forks one per request:

- the worker starts a session of its own (as torchrun's workers do: `os.killpg(pid, ...)` stops it), takes
  torchrun's stdin/stdout/stderr as descriptors 0-2, the agent's folder and the environment torchrun gave
  it, and runs `vertexdist_launcher.worker`'s `main` as `python -u -m` would (exit status included);
- it is tied to the fork server as a cold worker is to torchrun (`worker.watch_parent`: PR_SET_PDEATHSIG,
  its parent's pid in `VERTEXDIST_LAUNCHER_PID`), and the fork server to the launcher, so a launcher that
  dies, SIGKILL included, still takes every worker with it;
- the handle torchrun gets has Popen's `pid`, `poll()`, `wait()` and `returncode` (the fork server reaps the
  worker and reports its status).

A command other than the launcher's own worker module starts as torchrun starts it. A replica that started
as a new interpreter (Vertex, a cold local run) never forks: torch is not in `sys.modules` when this module is
first imported there. Standard library only, like the rest of the launcher.
"""

from __future__ import annotations

import contextlib
import io
import os
import selectors
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from typing import Any

from .fork_protocol import ForkedProcess, end_forked_child, receive, run_as_python, send, status_code
from .worker import PARENT_VARIABLE

# Whether this interpreter had torch imported before the launcher was: a warm pool's fork.
ARRIVED_WARM = "torch" in sys.modules
WORKER_MODULE = "vertexdist_launcher.worker"
_PR_SET_PDEATHSIG = 1


def worker_args(args: Sequence[str], python: str = sys.executable) -> list[str] | None:
    """The worker module's arguments where torchrun's command is `python -u -m vertexdist_launcher.worker
    ARGS` (what the launcher's torchrun arguments make), else None (pure)."""
    words = [str(a) for a in args]
    if words[:4] == [python, "-u", "-m", WORKER_MODULE]:
        return words[4:]
    return None


def _run_worker(args: list[str], env: dict[str, str], cwd: str) -> int:
    """In the forked worker, its descriptors in place: `python -u -m vertexdist_launcher.worker ARGS`."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    out, err = io.FileIO(1, "w", closefd=False), io.FileIO(2, "w", closefd=False)
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(out, write_through=True)  # type: ignore[misc]
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(  # type: ignore[misc]
        err, errors="backslashreplace", line_buffering=True, write_through=True
    )
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)))  # type: ignore[misc]
    from . import worker

    sys.argv = [worker.__file__ or WORKER_MODULE, *args]
    sys.path[0] = cwd  # as `python -m` puts the working folder first
    # From the worker module's frames on, as a new interpreter prints a traceback.
    return run_as_python(lambda: worker.main(args), own_files={__file__})


class _Server:
    """The fork server's one thread: take a request, fork the worker, reap it, report its status."""

    def __init__(self, control: socket.socket, launcher_pid: int) -> None:
        self.control = control
        self.launcher_pid = launcher_pid
        self.children: dict[int, socket.socket] = {}
        self.selector = selectors.DefaultSelector()

    def _fork(self, request: dict[str, Any], fds: list[int]) -> None:
        stdio, reply = fds[:3], socket.socket(fileno=fds[3])
        env = dict(request["env"])
        env[PARENT_VARIABLE] = str(os.getpid())  # the worker's parent is this server: it watches this pid
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                signal.set_wakeup_fd(-1)
                for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
                    signal.signal(sig, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                self.selector.close()
                self.control.close()
                reply.close()
                for other in self.children.values():
                    other.close()
                os.setsid()
                for fd, into in zip(stdio, (0, 1, 2), strict=True):
                    os.dup2(fd, into)
                for fd in stdio:
                    if fd > 2:
                        os.close(fd)
                code = _run_worker(list(request["args"]), env, str(request["cwd"]))
            except BaseException:
                with contextlib.suppress(Exception):
                    sys.excepthook(*sys.exc_info())
                    sys.stderr.flush()
            end_forked_child(code)
        for fd in stdio:
            os.close(fd)
        self.children[pid] = reply
        with contextlib.suppress(OSError):
            send(reply, {"pid": pid})

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            reply = self.children.pop(pid, None)
            if reply is None:
                continue
            code = status_code(status)
            with contextlib.suppress(OSError):
                send(reply, {"exit": code})
            reply.close()

    def serve(self) -> None:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != self.launcher_pid:  # the launcher died before the prctl took effect
            os._exit(1)
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_read, False)
        os.set_blocking(wake_write, False)
        signal.set_wakeup_fd(wake_write)
        signal.signal(signal.SIGCHLD, lambda _s, _f: None)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # stopped with the launcher, not alone
            signal.signal(sig, signal.SIG_IGN)
        self.selector.register(self.control, selectors.EVENT_READ, "control")
        self.selector.register(wake_read, selectors.EVENT_READ, "wake")
        while True:
            for key, _ in self.selector.select(timeout=1.0):
                if key.data == "wake":
                    with contextlib.suppress(OSError):
                        os.read(wake_read, 4096)
                elif key.data == "control":
                    received = receive(self.control, 4)
                    if received is None:  # the launcher closed its end: it is done
                        os._exit(0)
                    request, fds = received
                    if len(fds) == 4:
                        self._fork(request, fds)
                    else:
                        for fd in fds:
                            os.close(fd)
            self._reap()


class ForkedWorker(ForkedProcess):
    """A worker forked by the fork server, as torchrun's handler uses a Popen: pid, poll, wait, returncode."""

    what = "forked worker"


class ForkServer:
    """The launcher's side: forks the server now (call before torchrun starts a thread) and asks it for
    workers."""

    def __init__(self) -> None:
        launcher = os.getpid()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                ours.close()
                _Server(theirs, launcher).serve()
            finally:
                os._exit(1)
        theirs.close()
        self.pid = pid
        self._control = ours
        self._lock = threading.Lock()

    def start(self, args: Sequence[str], env: dict[str, str], stdio: Sequence[int]) -> ForkedWorker | None:
        """A worker running the worker module with `args`, or None where the server cannot be reached."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with self._lock:
                send(
                    self._control,
                    {"args": list(args), "env": env, "cwd": os.getcwd()},
                    [*stdio, theirs.fileno()],
                )
            theirs.close()
            answer = receive(mine)
        except OSError:
            theirs.close()
            mine.close()
            return None
        if answer is None or "pid" not in answer[0]:
            mine.close()
            return None
        return ForkedWorker(mine, int(answer[0]["pid"]))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._control.close()
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(self.pid, 0)


def install(server: ForkServer) -> None:
    """torch's SubprocessHandler starts the launcher's own workers through `server` (others as before)."""
    from torch.distributed.elastic.multiprocessing.subprocess_handler import subprocess_handler

    handler = subprocess_handler.SubprocessHandler
    original = handler._popen

    def popen(self: Any, args: tuple[str, ...], env: dict[str, str]) -> Any:
        forwarded = worker_args(args)
        if forwarded is not None:
            stdio = [
                0,
                self._stdout.fileno() if self._stdout else 1,
                self._stderr.fileno() if self._stderr else 2,
            ]
            worker = server.start(forwarded, dict(env), stdio)
            if worker is not None:
                return worker
        return original(self, args, env)

    handler._popen = popen  # type: ignore[method-assign]
