"""A warm pool: one long-lived process that has imported Python, torch, the bundled trainer and the shipped
launcher, and forks a local replica on demand (`local-run --warm`).

    python -m vertexdist.local.warm_pool serve [--socket PATH] [--idle SECONDS] [--ready N] [--parent-fd FD]

The runner asks over a unix socket (`WarmSpawner`): one message with the replica's argv, environment and
working folder, its stdin, stdout (the log file) and stderr (the log capture's pipe) passed as descriptors
(`socket.send_fds`). The pool forks; the child starts a session of its own (so its pid is its process group,
which the runner and the watchdog stop as they stop a cold replica's), takes those descriptors as 0, 1, 2,
the folder and the environment, maps /gcs as `gcs_namespace` would (if it cannot, it execs the cold command
instead and says so), and runs the module or script as `python -m` / `python SCRIPT` would (runpy, sys.argv,
`__main__`, the exit status Python would give). The pool reports the pid, then the exit status (negative:
the signal), so the runner's handle has `pid`, `wait()` and `returncode` like Popen's.

- Every forked replica gets PR_SET_PDEATHSIG=SIGKILL from the pool's one thread: a pool that dies leaves
  no replica behind; the runner then reads the replica as killed by SIGKILL.
- An owned pool (`OwnedPool`: the emulator's `--warm N`) never idles out, keeps N children forked ahead
  of any request (`--ready`), and stops at the end-of-file of a pipe only its owner writes to
  (`--parent-fd`): an owner killed by SIGKILL leaves no pool and no replica.
- CUDA is never initialised in the pool (torch is imported, nothing of torch.cuda is called).
- What cannot be forked warm starts cold, with one line in the replica's log: another interpreter (a
  requirements environment, a container launcher), Python options other than -u / -m, PYTHON* variables
  the pool's interpreter has already read, or /gcs's guard (its sitecustomize runs at start-up only).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import hashlib
import importlib.machinery
import io
import os
import runpy
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from vertexdist.local import gcs_namespace
from vertexdist.local.gcs_namespace import UNMAPPED_VARIABLE
from vertexdist.shipped.vertexdist_launcher.fork_protocol import (
    ForkedProcess,
    end_forked_child,
    receive,
    run_as_python,
    send,
    status_code,
)

SOCKET_VARIABLE = "VERTEXDIST_WARM_SOCKET"
IDLE_VARIABLE = "VERTEXDIST_WARM_IDLE_S"
DEFAULT_IDLE_S = 900.0
START_TIMEOUT_S = 120.0
SHIPPED = Path(__file__).resolve().parent.parent / "shipped"
GCS_SCRIPT = str(Path(gcs_namespace.__file__).resolve())
# Read once by the interpreter as it starts; a replica that sets others cannot be this pool's child.
ALLOWED_PYTHON_VARIABLES = frozenset({"PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE"})
PRELOAD = ("torch", "torch.distributed.run", "vertexdist_launcher.__main__", "trainer_pkg.task")
RELOADABLE = ("trainer_pkg", "vertexdist_launcher")
_PR_SET_PDEATHSIG = 1
FDS_PER_REQUEST = 3  # the replica's stdin, stdout and stderr


@dataclass(frozen=True)
class WarmTarget:
    """What a replica's argv runs, read as Python would: `-m MODULE` or a script, with its arguments."""

    module: str | None
    script: str | None
    args: tuple[str, ...]
    unbuffered: bool
    gcs: tuple[str, str, str] | None  # (folder, stage, guard) where the argv is behind gcs_namespace.py


def default_socket() -> Path:
    from vertexdist.user_temp import user_temp_dir

    tag = hashlib.sha256(sys.executable.encode()).hexdigest()[:12]
    return user_temp_dir("warm-pool") / f"pool-{tag}.sock"


def socket_path(env: Mapping[str, str] = os.environ) -> Path:
    return Path(env[SOCKET_VARIABLE]) if env.get(SOCKET_VARIABLE) else default_socket()


def read_target(
    argv: Sequence[str], env: Mapping[str, str], python: str = sys.executable
) -> WarmTarget | str:
    """The warm target of a replica's argv, or why it must start cold (pure)."""
    words, gcs = list(argv), None
    if len(words) > 7 and words[1:4] == ["-I", "-S", GCS_SCRIPT] and words[7] == "--":
        gcs, words = (words[4], words[5], words[6]), words[8:]
    if not words or words[0] != python:
        return f"{words[0] if words else 'nothing'} is not the pool's interpreter ({python})"
    others = sorted(k for k in env if k.startswith("PYTHON") and k not in ALLOWED_PYTHON_VARIABLES)
    if others:
        return f"the replica sets {', '.join(others)}, which Python reads only as it starts"
    if UNMAPPED_VARIABLE in env:
        return "/gcs's guard runs only as Python starts"
    unbuffered, rest = bool(env.get("PYTHONUNBUFFERED")), words[1:]
    while rest and rest[0] == "-u":
        unbuffered, rest = True, rest[1:]
    if rest[:1] == ["-m"] and len(rest) > 1:
        return WarmTarget(rest[1], None, tuple(rest[2:]), unbuffered, gcs)
    if rest and not rest[0].startswith("-"):
        return WarmTarget(None, rest[0], tuple(rest[1:]), unbuffered, gcs)
    return f"python {' '.join(rest[:1])} is not -m MODULE or a script"


# ----- the pool's side --------------------------------------------------------------------------------


def _preload() -> None:
    sys.path.insert(0, str(SHIPPED))
    try:
        for name in PRELOAD:
            with contextlib.suppress(ImportError):
                __import__(name)
    finally:
        sys.path.remove(str(SHIPPED))


def _child_path(first: str, env: Mapping[str, str], base: Sequence[str]) -> list[str]:
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return [first, *extra, *base]


def _forget_stale(path: list[str]) -> None:
    """Preloaded packages that this replica's sys.path would find elsewhere (its installed copy) go."""
    for top in RELOADABLE:
        loaded = sys.modules.get(top)
        if loaded is None:
            continue
        spec = importlib.machinery.PathFinder.find_spec(top, path)
        if spec is None or spec.origin != getattr(loaded, "__file__", None):
            for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
                del sys.modules[name]


def _stream(fd: int, unbuffered: bool) -> io.RawIOBase | io.BufferedWriter:
    raw = io.FileIO(fd, "w", closefd=False)
    return raw if unbuffered else io.BufferedWriter(raw)


def _stdio(unbuffered: bool) -> None:
    """sys.stdin/stdout/stderr on descriptors 0, 1, 2 as Python makes them at start-up (-u: unbuffered)."""
    out, err = _stream(1, unbuffered), _stream(2, unbuffered)
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(out, write_through=unbuffered)  # type: ignore[misc,arg-type]
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(  # type: ignore[misc]
        err,  # type: ignore[arg-type]
        errors="backslashreplace",
        line_buffering=True,
        write_through=unbuffered,
    )
    stdin = io.BufferedReader(io.FileIO(0, "r", closefd=False))
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(stdin)  # type: ignore[misc]


_OWN_FRAMES = frozenset({__file__, runpy.__file__, "<frozen runpy>"})


def _run_child(target: WarmTarget, env: dict[str, str], base: Sequence[str], argv: Sequence[str]) -> int:
    """In the forked child, once its descriptors, folder and session are in place: the replica's code."""
    os.environ.clear()
    os.environ.update(env)
    _stdio(target.unbuffered)
    if target.gcs is not None:
        try:
            gcs_namespace.map_gcs(target.gcs[0], target.gcs[1])
        except gcs_namespace.Unmappable as problem:
            print(f"vertexdist: warm pool: {problem.why}; starting this replica cold", file=sys.stderr)
            sys.stderr.flush()
            os.execv(argv[0], list(argv))
    if target.module is not None:
        path = _child_path(os.getcwd(), env, base)
        sys.argv = [target.module, *target.args]
    else:
        script = str(target.script)
        path = _child_path(os.path.dirname(os.path.abspath(script)), env, base)
        sys.argv = [script, *target.args]
    sys.path[:] = path
    _forget_stale(path)
    importlib.invalidate_caches()
    module, script = target.module, str(target.script)

    def main() -> object:
        if module is not None:
            return runpy.run_module(module, run_name="__main__", alter_sys=True)
        return runpy.run_path(script, run_name="__main__")

    return run_as_python(main, _OWN_FRAMES)


class Pool:
    """The pool's one thread: accept, fork, reap, report."""

    def __init__(self, path: Path, idle_s: float, ready: int = 0, parent_fd: int | None = None) -> None:
        self.path = path
        self.idle_s = idle_s  # <= 0: never idles out (an owned pool stops with its owner)
        self.base = [p for p in sys.path[1:] if p not in os.environ.get("PYTHONPATH", "").split(os.pathsep)]
        self.env = dict(os.environ)
        self.children: dict[int, socket.socket] = {}
        self.selector = selectors.DefaultSelector()
        # `ready` children forked ahead of any request, each waiting on its end of a socket pair for one.
        self.ready_target = ready
        self.ready: dict[int, socket.socket] = {}
        # The read end of a pipe only the owner can write to: its end-of-file is the owner gone.
        self.parent_fd = parent_fd
        self._wake: tuple[int, int] = (-1, -1)
        self.forked = 0  # replicas forked so far (ping's answer: what a caller can check it got)

    def _child_setup(self) -> None:
        """In a just-forked child: the pool's signal handlers and descriptors dropped, and killed with it."""
        atexit._clear()
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != self.pool_pid:
            os._exit(137)
        self.selector.close()
        self.listener.close()
        for other in (*self.children.values(), *self.ready.values()):
            other.close()
        for fd in (*self._wake, self.parent_fd):
            if fd is not None and fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _replica(self, request: dict[str, Any], fds: Sequence[int], target: WarmTarget) -> None:
        """In the child, set up: become the replica (session, descriptors 0-2, folder) and run it; never
        returns."""
        code = 1
        try:
            os.setsid()
            for fd, into in zip(fds, (0, 1, 2), strict=True):
                os.dup2(fd, into)
            for fd in fds:
                if fd > 2:
                    os.close(fd)
            os.chdir(str(request["cwd"]))
            code = _run_child(target, dict(request["env"]), self.base, list(request["argv"]))
        except BaseException:
            with contextlib.suppress(Exception):
                sys.excepthook(*sys.exc_info())
                sys.stderr.flush()
        end_forked_child(code)

    def _prefork(self) -> None:
        """One more ready child: forked now, it waits for a replica's request (or end-of-file: it exits)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            try:
                ours.close()
                self._child_setup()
                received = receive(theirs, FDS_PER_REQUEST)
                theirs.close()
                if received is None:
                    os._exit(0)
                request, fds = received
                target = read_target(list(request["argv"]), dict(request["env"]))
                if isinstance(target, str) or len(fds) != FDS_PER_REQUEST:
                    os._exit(1)
            except BaseException:
                os._exit(1)
            self._replica(request, fds, target)
        theirs.close()
        self.ready[pid] = ours

    def _refill(self) -> None:
        while len(self.ready) < self.ready_target:
            self._prefork()

    def _take_ready(self, request: dict[str, Any], fds: Sequence[int]) -> int | None:
        """A ready child handed this request, or None when none is ready (or the one tried is gone)."""
        while self.ready:
            pid, sock = next(iter(self.ready.items()))
            del self.ready[pid]
            try:
                send(sock, request, fds)
            except OSError:
                continue
            finally:
                sock.close()
            return pid
        return None

    def _fork(self, conn: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
        target = read_target(list(request["argv"]), dict(request["env"]))
        if isinstance(target, str) or len(fds) != FDS_PER_REQUEST:
            send(conn, {"cold": target if isinstance(target, str) else "no descriptors"})
            for fd in fds:
                os.close(fd)
            conn.close()
            return
        pid = self._take_ready(request, fds)
        if pid is None:
            pid = os.fork()
            if pid == 0:  # the replica
                try:
                    self._child_setup()
                    conn.close()
                except BaseException:
                    os._exit(1)
                self._replica(request, fds, target)
        for fd in fds:
            os.close(fd)
        self.forked += 1
        self.children[pid] = conn
        send(conn, {"pid": pid})
        self._refill()

    def _reap(self) -> None:
        while self.children or self.ready:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            idle = self.ready.pop(pid, None)  # a ready child that died before it was used
            if idle is not None:
                idle.close()
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            code = status_code(status)
            with contextlib.suppress(OSError):
                send(conn, {"exit": code})
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(conn)
            conn.close()

    def serve(self) -> int:
        self.pool_pid = os.getpid()
        _preload()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(self.path))
        os.chmod(self.path, 0o600)
        self.listener.listen(64)
        wake_read, wake_write = os.pipe()
        self._wake = (wake_read, wake_write)
        os.set_blocking(wake_write, False)
        os.set_blocking(wake_read, False)
        signal.set_wakeup_fd(wake_write)
        signal.signal(signal.SIGCHLD, lambda _s, _f: None)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda _s, _f: stop.set())
        self.selector.register(self.listener, selectors.EVENT_READ, "accept")
        self.selector.register(wake_read, selectors.EVENT_READ, "wake")
        if self.parent_fd is not None:
            self.selector.register(self.parent_fd, selectors.EVENT_READ, "owner")
        self._refill()
        last_busy = time.monotonic()
        while not stop.is_set():
            for key, _ in self.selector.select(timeout=1.0):
                if key.data == "owner":  # the owner's end closed: it stopped, or was killed
                    stop.set()
                elif key.data == "wake":
                    with contextlib.suppress(OSError):
                        os.read(wake_read, 4096)
                    self._reap()
                elif key.data == "accept":
                    conn, _ = self.listener.accept()
                    self._handle(conn)
                elif isinstance(key.fileobj, socket.socket):  # a runner gone: its replica lives on, watched
                    with contextlib.suppress(KeyError, ValueError):
                        self.selector.unregister(key.fileobj)
            self._reap()
            if self.children:
                last_busy = time.monotonic()
            elif self.idle_s > 0 and time.monotonic() - last_busy > self.idle_s:
                break
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        for sock in self.ready.values():  # end-of-file: each ready child exits
            sock.close()
        return 0

    def _handle(self, conn: socket.socket) -> None:
        try:
            received = receive(conn, FDS_PER_REQUEST)
        except (OSError, ValueError):
            conn.close()
            return
        if received is None:
            conn.close()
            return
        request, fds = received
        if request.get("op") == "ping":
            import torch

            send(
                conn,
                {
                    "pid": os.getpid(),
                    "cuda_initialized": bool(torch.cuda.is_initialized()),
                    "ready": sorted(self.ready),
                    "forked": self.forked,
                },
            )
            conn.close()
            return
        self._fork(conn, request, fds)


# ----- the runner's side ------------------------------------------------------------------------------


class WarmProcess(ForkedProcess):
    """A forked replica, as the runner sees it: Popen's `pid`, `wait()`, `poll()` and `returncode`."""

    what = "warm replica"


def ping(path: Path) -> dict[str, Any] | None:
    """The pool's answer at `path`, or None where none listens."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5.0)
            sock.connect(str(path))
            send(sock, {"op": "ping"})
            received = receive(sock, FDS_PER_REQUEST)
    except OSError:
        return None
    return received[0] if received else None


def start_pool(path: Path, idle_s: float, timeout_s: float = START_TIMEOUT_S) -> int:
    """The pool at `path`, started (detached, its own session) unless one answers; its pid."""
    answer = ping(path)
    if answer is not None:
        return int(answer["pid"])
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vertexdist.local.warm_pool",
            "serve",
            "--socket",
            str(path),
            "--idle",
            f"{idle_s:g}",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        answer = ping(path)
        if answer is not None:
            return int(answer["pid"])
        time.sleep(0.1)
    raise OSError(f"the warm pool did not answer at {path} within {timeout_s:g}s")


class WarmSpawner:
    """Starts replicas through the pool at `path` (started on first use); cold, with one line in the
    replica's log, where a replica cannot be forked warm or the pool cannot be reached."""

    def __init__(self, path: Path | None = None, idle_s: float | None = None, *, start: bool = True) -> None:
        self.path = path or socket_path()
        self.idle_s = idle_s if idle_s is not None else float(os.environ.get(IDLE_VARIABLE, DEFAULT_IDLE_S))
        # start=False: the pool is someone else's (an `OwnedPool`); never start a detached one in its place.
        self._started = not start
        self._lock = threading.Lock()

    def _cold(
        self,
        reason: str,
        argv: Sequence[str],
        env: Mapping[str, str],
        cwd: Path,
        stdout: IO[bytes],
        stderr: int,
    ) -> subprocess.Popen[bytes]:
        stdout.write(f"vertexdist: warm pool: starting this replica cold: {reason}\n".encode())
        stdout.flush()
        from vertexdist.local.runner import popen_spawner  # the runner's own cold start; loaded by then

        return popen_spawner(argv, env, cwd, stdout, stderr)

    def __call__(
        self, argv: Sequence[str], env: Mapping[str, str], cwd: Path, stdout: IO[bytes], stderr: int
    ) -> WarmProcess | subprocess.Popen[bytes]:
        target = read_target(argv, env)
        if isinstance(target, str):
            return self._cold(target, argv, env, cwd, stdout, stderr)
        try:
            with self._lock:
                if not self._started:
                    start_pool(self.path, self.idle_s)
                    self._started = True
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.connect(str(self.path))
            with open(os.devnull, "rb") as null:
                send(
                    conn,
                    {"argv": list(argv), "env": dict(env), "cwd": str(cwd)},
                    [null.fileno(), stdout.fileno(), stderr],
                )
            answer = receive(conn, FDS_PER_REQUEST)
        except OSError as exc:
            return self._cold(
                f"the pool at {self.path} cannot be reached ({exc})", argv, env, cwd, stdout, stderr
            )
        if answer is None or "pid" not in answer[0]:
            conn.close()
            reason = str(answer[0].get("cold")) if answer else "the pool closed the connection"
            return self._cold(reason, argv, env, cwd, stdout, stderr)
        return WarmProcess(conn, int(answer[0]["pid"]))


class OwnedPool:
    """A pool owned by this process (`emulator start --warm N`): started with it, stopped with it, and
    gone with it when it is killed: the pool watches a pipe whose write end only this process holds (its
    end-of-file stops the pool, and PR_SET_PDEATHSIG takes the pool's replicas with it). `ready` children
    are forked ahead of any request, so up to that many replicas start without waiting even for a fork."""

    def __init__(self, ready: int, *, log: Path | None = None, path: Path | None = None) -> None:
        from vertexdist.user_temp import user_temp_dir

        self.ready = ready
        self.log = log
        self.path = path or user_temp_dir("warm-pool") / f"owned-{os.getpid()}-{os.urandom(4).hex()}.sock"
        self._proc: subprocess.Popen[bytes] | None = None
        self._owner_fd: int | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self, timeout_s: float = START_TIMEOUT_S) -> OwnedPool:
        """Start the pool and wait until it answers (it imports torch first: seconds)."""
        read_end, write_end = os.pipe()  # neither end is inherited by anything else this process starts
        self._owner_fd = write_end
        argv = [sys.executable, "-m", "vertexdist.local.warm_pool", "serve", "--socket", str(self.path)]
        argv += ["--idle", "0", "--ready", str(self.ready), "--parent-fd", str(read_end)]
        try:
            with open(self.log, "ab") if self.log else open(os.devnull, "wb") as errors:
                self._proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=errors,
                    stderr=errors,
                    pass_fds=(read_end,),
                    start_new_session=True,  # a Ctrl-C at the terminal is the owner's to handle
                )
        except BaseException:
            self.stop()
            raise
        finally:
            os.close(read_end)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ping(self.path) is not None:
                return self
            if self._proc.poll() is not None:
                break
            time.sleep(0.1)
        self.stop()
        where = f"; see {self.log}" if self.log else ""
        raise OSError(f"the warm pool did not answer at {self.path} within {timeout_s:g}s{where}")

    def spawner(self) -> WarmSpawner:
        """Replicas through this pool (cold, and said so, where the pool cannot fork one)."""
        return WarmSpawner(self.path, start=False)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the pool (its replicas go with it) and wait for it; a pool that does not stop is killed."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._owner_fd is not None:
            os.close(self._owner_fd)
            self._owner_fd = None
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vertexdist.local.warm_pool")
    parser.add_argument("command", choices=["serve", "start"])
    parser.add_argument("--socket", type=Path, default=None)
    parser.add_argument("--idle", type=float, default=float(os.environ.get(IDLE_VARIABLE, DEFAULT_IDLE_S)))
    parser.add_argument("--ready", type=int, default=0, help="children forked ahead of any request")
    parser.add_argument("--parent-fd", type=int, default=None, help="stop at this pipe's end-of-file")
    args = parser.parse_args(argv)
    path = args.socket or socket_path()
    if args.command == "start":
        print(start_pool(path, args.idle))
        return 0
    return Pool(path, args.idle, args.ready, args.parent_fd).serve()


if __name__ == "__main__":
    sys.exit(main())
