"""What a fork server and its clients share: length-prefixed JSON messages over a unix socket (descriptors
passed with SCM_RIGHTS), a forked child's exit as Python would give it, and the client's Popen-like handle.

Two fork servers use it: vertexdist's warm pool, which forks replicas (`vertexdist.local.warm_pool`), and the
launcher's, which forks torchrun's workers inside a warm replica (`worker_fork`). Standard library only, like
the rest of the launcher.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import runpy
import signal
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Collection, Sequence
from typing import Any, NoReturn

_HEADER = struct.Struct("!I")
_CHUNK = 1 << 16


def send(sock: socket.socket, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
    """One message, with `fds` passed along the first piece."""
    data = json.dumps(message).encode()
    payload = _HEADER.pack(len(data)) + data
    if fds:
        sent = socket.send_fds(sock, [payload], list(fds))
        sock.sendall(payload[sent:])
    else:
        sock.sendall(payload)


def receive(sock: socket.socket, max_fds: int = 0) -> tuple[dict[str, Any], list[int]] | None:
    """One message and the descriptors that came with it (up to `max_fds`); None at end-of-file."""
    data, fds, _flags, _addr = (
        socket.recv_fds(sock, _CHUNK, max_fds) if max_fds else (sock.recv(_CHUNK), [], 0, None)
    )
    if not data:
        return None
    while len(data) < _HEADER.size or len(data) < _HEADER.size + _HEADER.unpack(data[: _HEADER.size])[0]:
        more = sock.recv(_CHUNK)
        if not more:
            return None
        data += more
    (size,) = _HEADER.unpack(data[: _HEADER.size])
    return json.loads(data[_HEADER.size : _HEADER.size + size]), fds


def exit_code(exc: SystemExit) -> int:
    """The exit status `python` gives a program that raised `exc` (a message is printed, and is status 1)."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def report_uncaught(exc: BaseException, own_files: Collection[str] = ()) -> None:
    """An uncaught exception as Python prints it, from the program's own code on: the frames of `own_files`
    (the fork server's, runpy's) that brought it there are left out, as a new interpreter has none of them."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename in own_files:
        tb = tb.tb_next
    # kept where the interpreter keeps an uncaught exception, before atexit: the watcher's last heartbeat
    # points at its frame (health.Watcher.finish)
    sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc.with_traceback(tb), tb
    sys.excepthook(type(exc), exc, tb)


def run_as_python(main: Callable[[], object], own_files: Collection[str] = ()) -> int:
    """Run a forked child's program `main` and end it as the interpreter would end: the exit status Python
    gives (SystemExit, -SIGINT for KeyboardInterrupt, 1 for anything else, printed first), non-daemon threads
    joined, atexit handlers run, stdout and stderr flushed. The caller ends the process with that code
    (`end_process`), not by returning into interpreter shutdown."""
    own = {__file__, *own_files, runpy.__file__, "<frozen runpy>"}  # python -m shows no runpy frame either
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exit_code(exc)
    except KeyboardInterrupt as exc:
        report_uncaught(exc, own)
        code = -int(signal.SIGINT)
    except BaseException as exc:
        report_uncaught(exc, own)
        code = 1
    with contextlib.suppress(Exception):
        threading._shutdown()  # type: ignore[attr-defined]  # non-daemon threads, as Python's exit joins them
    with contextlib.suppress(Exception):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return code


def status_code(status: int) -> int:
    """A reaped child's `os.waitpid` status as Popen's returncode: -N for a signal, else its exit status."""
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def end_process(code: int) -> NoReturn:
    """End this process now as `code` (what `run_as_python` returned) says, skipping the interpreter's own
    shutdown: a negative code is death by that signal (its default action), as Python killed by it ends.

    Interpreter shutdown (`Py_FinalizeEx`) is where a script that succeeded could still crash: a gloo thread
    that frees an all-reduce started inside backward needs the GIL, Python 3.11 ends a thread asking for it
    during shutdown with `pthread_exit`, and that unwind through a `noexcept` destructor is `std::terminate`
    (SIGABRT, "terminate called without an active exception"). `run_as_python` has already done the parts of
    an exit anyone can see; the rest is freeing memory the kernel frees anyway."""
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)


def end_forked_child(code: int) -> NoReturn:
    """End a forked child as `code` says (`end_process`), without the parent's atexit handlers."""
    end_process(code)


class ForkedProcess:
    """A child forked by a fork server, as a Popen is used: `pid`, `wait()`, `poll()` and `returncode`. The
    server reports the child's exit on `conn`; no report means the server died, and PR_SET_PDEATHSIG killed
    the child with it."""

    what = "forked process"  # how a timeout names it

    def __init__(self, conn: socket.socket, pid: int) -> None:
        self._conn = conn
        self.pid = pid
        self.returncode: int | None = None
        self._lock = threading.Lock()

    def wait(self, timeout: float | None = None) -> int:
        with self._lock:
            if self.returncode is None:
                self._conn.settimeout(timeout)
                try:
                    received = receive(self._conn)
                except (TimeoutError, BlockingIOError):  # wait(0): a non-blocking socket
                    raise subprocess.TimeoutExpired(self.what, timeout or 0) from None
                except OSError:
                    received = None
                self.returncode = int(received[0]["exit"]) if received else -int(signal.SIGKILL)
                self._conn.close()
            return self.returncode

    def poll(self) -> int | None:
        try:
            return self.wait(0.0)
        except subprocess.TimeoutExpired:
            return None
