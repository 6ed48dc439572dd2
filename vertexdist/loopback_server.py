"""A threaded HTTP server on 127.0.0.1 that serves from a background thread until stopped: the base of the
emulator's Vertex API (`emulator.http_api`, with Cloud Logging and the `/vertexdist/v1/` control
endpoints), its Cloud Storage API (`emulator.storage.http`) and a local job's metadata server
(`local.metadata_server`).

Loopback only, and only for the user who started it: the emulator runs commands it is sent, and every page
of the user's browser and every user of the host can reach 127.0.0.1. So every handler stands on
`GuardedHandler`, which refuses, before any route or body is read (`request_guard` decides, pure):

- a connection from a socket another user owns: closed as it is accepted, before any thread serves it or
  any byte is read (`peer_uid` asks the kernel, once per connection);
- a connection beyond `MAX_CONNECTIONS` open at once: closed as it is accepted;
- a Host header that is not the address served (400: DNS rebinding);
- an `Origin` that is not this server's own (403: any other page);
- a write whose content type is not the server's (`write_policy`; 415: a browser's "simple" request).

A refused request's connection is closed, after its body is let in and dropped for a moment, so the
client reads the answer. Connections left idle for `IDLE_TIMEOUT_S` are closed, a request whose line and
headers have not all come within `HEAD_DEADLINE_S` of its first byte is closed (a byte now and then no
longer holds a thread), and up to `LISTEN_BACKLOG` connections wait to be accepted. docs/security.md has
the threats and their tests.
"""

from __future__ import annotations

import io
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TypeVar

from vertexdist import peer_uid, request_guard
from vertexdist.request_guard import Refusal, WritePolicy

LOOPBACK = "127.0.0.1"
STOP_WAIT_S = 5.0
LISTEN_BACKLOG = 128
IDLE_TIMEOUT_S = 120.0
HEAD_DEADLINE_S = 20.0  # from a request's first byte to the end of its headers, in all
MAX_CONNECTIONS = 256  # open at once, per server: each holds a thread
_READ_BUFFER = 64 * 1024
_LINGER_S = 2.0

ServerT = TypeVar("ServerT", bound="LoopbackServer")


class LoopbackServer(ThreadingHTTPServer):
    """Listens on 127.0.0.1:`port` (0: any free port); `start()` serves in a daemon thread, `stop()` ends
    the serving thread and closes the socket (safe to call twice, or without `start`)."""

    daemon_threads = True
    thread_name = "loopback-http"
    request_queue_size = LISTEN_BACKLOG

    def __init__(self, port: int, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__((LOOPBACK, port), handler)
        self._thread: threading.Thread | None = None
        self.owner_uid = peer_uid.my_uid()
        # For bench/bench_guard.py only: an attribute of this process, which no flag or route reaches.
        self.guarded = True
        self._refused = 0
        self._lock = threading.Lock()
        self._open: set[object] = set()  # connections being served
        self.max_connections = MAX_CONNECTIONS
        self.closed_at_accept = 0  # another user's, or beyond max_connections

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._open)

    def verify_request(self, request: object, client_address: object) -> bool:
        """At accept, in the serving thread: another user's connection, or one beyond `max_connections`,
        is closed before a thread serves it or a byte of it is read."""
        refused = False
        if self.guarded:
            peer = client_address if isinstance(client_address, tuple) else ("", 0)
            refused = self.owner_refusal((str(peer[0]), int(peer[1]))) is not None
        with self._lock:
            if refused or len(self._open) >= self.max_connections:
                self.closed_at_accept += 1
                return False
            self._open.add(request)
        return True

    def shutdown_request(self, request: socket.socket) -> None:  # type: ignore[override]
        with self._lock:
            self._open.discard(request)
        super().shutdown_request(request)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def address(self) -> str:
        """`127.0.0.1:PORT`."""
        return f"{LOOPBACK}:{self.port}"

    @property
    def endpoint(self) -> str:
        """`http://127.0.0.1:PORT`."""
        return f"http://{self.address}"

    @property
    def refused(self) -> int:
        """How many requests the guard has refused."""
        return self._refused

    def count_refusal(self) -> None:
        with self._lock:
            self._refused += 1

    def owner_refusal(self, peer: tuple[str, int]) -> Refusal | None:
        """Why a connection from `peer` may not drive this server; None when it may."""
        if not self.guarded:
            return None
        can_tell = peer_uid.can_tell()
        uid = peer_uid.lookup(peer, (LOOPBACK, self.port)) if can_tell else None
        return request_guard.check_owner(uid, self.owner_uid, can_tell=can_tell)

    def start(self: ServerT) -> ServerT:
        self._thread = threading.Thread(target=self.serve_forever, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self.shutdown()
            self._thread.join(timeout=STOP_WAIT_S)
            self._thread = None
        self.server_close()


class _HeadDeadline(io.RawIOBase):
    """The connection's reads, with a total deadline on a request's head: armed before a request, it starts
    counting at the first byte that comes, and each read then waits only for what is left of it."""

    def __init__(self, sock: socket.socket, idle_s: float | None) -> None:
        self.sock = sock
        self.idle_s = idle_s
        self.armed = False
        self.deadline: float | None = None

    def readable(self) -> bool:
        return True

    def arm(self) -> None:
        self.armed, self.deadline = True, None

    def disarm(self) -> None:
        self.armed, self.deadline = False, None

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        wait = self.idle_s
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"the request's line and headers took over {HEAD_DEADLINE_S:g} s")
            wait = left if wait is None else min(wait, left)
        self.sock.settimeout(wait)
        got = self.sock.recv_into(buffer)
        if self.armed and self.deadline is None and got:
            self.deadline = time.monotonic() + HEAD_DEADLINE_S
        return got


class GuardedHandler(BaseHTTPRequestHandler):
    """A request handler that lets through only what `request_guard` allows (see the module's docstring);
    its subclasses' `do_*` methods see only requests that passed."""

    server: LoopbackServer
    timeout = IDLE_TIMEOUT_S
    write_policy = WritePolicy.JSON_ONLY

    def setup(self) -> None:
        super().setup()
        self._head = _HeadDeadline(self.connection, self.timeout)
        self.rfile.close()  # the socket's own file: open, it would keep the socket from closing
        self.rfile = io.BufferedReader(self._head, _READ_BUFFER)

    def handle_one_request(self) -> None:
        self._head.arm()  # the next request's line and headers: HEAD_DEADLINE_S from their first byte
        super().handle_one_request()

    def _header(self, name: str) -> str | None:
        values = self.headers.get_all(name)
        return ", ".join(values) if values else None

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        self._head.disarm()  # the headers are in: a body is read at the idle timeout's pace
        if not self.server.guarded:
            return True
        refusal = request_guard.check(self.command, self._header, self.server.port, self.write_policy)
        if refusal is None:
            return True
        self.server.count_refusal()
        self._answer_refusal(refusal)
        return False

    def _answer_refusal(self, refusal: Refusal) -> None:
        data = json.dumps(
            {"error": {"code": refusal.status, "message": refusal.message, "status": refusal.reason}}
        ).encode()
        self.close_connection = True
        try:
            self.send_response(refusal.status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            return
        self._linger_close()

    def _linger_close(self) -> None:
        """A lingering close: the body we refused may still be coming; closing now would reset the
        connection and lose our answer, so read and drop what comes for a moment, in fixed-size pieces."""
        try:
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.settimeout(0.25)
            deadline = time.monotonic() + _LINGER_S
            while time.monotonic() < deadline and self.connection.recv(64 * 1024):
                pass
        except OSError:
            pass  # the client is gone or stays silent: either way we are done
