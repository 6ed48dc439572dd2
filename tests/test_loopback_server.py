"""The threaded loopback server both the emulator's API and a job's metadata server stand on."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import time
import urllib.request
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from vertexdist.loopback_server import LOOPBACK, GuardedHandler, LoopbackServer


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_it_serves_on_loopback_until_stopped_and_frees_its_port() -> None:
    server = LoopbackServer(0, _Hello).start()
    assert server.server_address[0] == LOOPBACK and server.endpoint == f"http://{LOOPBACK}:{server.port}"
    with urllib.request.urlopen(f"{server.endpoint}/ping", timeout=10) as response:
        assert response.read() == b"/ping"
    server.stop()
    server.stop()  # twice is fine
    with socket.socket() as probe:  # nothing listens there any more (TIME_WAIT aside, as servers bind)
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((LOOPBACK, server.port))
        probe.listen()


def test_stop_without_start_closes_the_socket() -> None:
    server = LoopbackServer(0, _Hello)
    server.stop()
    assert server.socket.fileno() == -1


def test_connections_wait_in_a_deep_backlog_while_the_server_is_busy() -> None:
    # Not serving yet: every connection waits in the listen queue. With the old backlog of 5 the kernel
    # dropped the SYNs beyond it, and those clients waited a second or more for a retry.
    server = LoopbackServer(0, _Hello)
    clients: list[socket.socket] = []
    try:
        for _ in range(40):
            clients.append(socket.create_connection((LOOPBACK, server.port), timeout=0.5))
    finally:
        for sock in clients:
            sock.close()
        server.stop()
    assert len(clients) == 40


class _Guarded(GuardedHandler):
    timeout = 0.5

    def do_GET(self) -> None:
        _Hello.do_GET(self)  # type: ignore[arg-type]

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_an_idle_connection_is_closed() -> None:
    server = LoopbackServer(0, _Guarded).start()
    try:
        with socket.create_connection((LOOPBACK, server.port), timeout=10) as sock:
            started = time.monotonic()
            assert sock.recv(1) == b""  # the server hung up on a client that never spoke
            assert time.monotonic() - started < 5
    finally:
        server.stop()


def test_the_guard_stands_in_front_of_every_handler_built_on_it() -> None:
    server = LoopbackServer(0, _Guarded).start()
    try:
        ok = http.client.HTTPConnection(LOOPBACK, server.port, timeout=10)
        ok.request("GET", "/ping")
        assert ok.getresponse().read() == b"/ping"
        evil = http.client.HTTPConnection(LOOPBACK, server.port, timeout=10)
        evil.request("GET", "/ping", headers={"Host": "evil.example"})
        answer = evil.getresponse()
        assert answer.status == 400 and "evil.example" in json.loads(answer.read())["error"]["message"]
        assert server.refused == 1
    finally:
        server.stop()


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server hung up (EOF or a reset), waiting on the socket itself (its timeout: a failure)."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_a_request_head_sent_a_byte_at_a_time_is_cut_at_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 41: a byte now and then beat the idle timeout and held a thread for good. The head (request
    line and headers) now has a total deadline from its first byte, whatever the idle timeout."""
    from vertexdist import loopback_server

    monkeypatch.setattr(loopback_server, "HEAD_DEADLINE_S", 0.3)

    class _Patient(_Guarded):
        timeout = 60.0  # idle: far beyond the test's own wait

    server = LoopbackServer(0, _Patient).start()
    try:
        with socket.create_connection((LOOPBACK, server.port), timeout=20) as sock:
            sock.sendall(b"GET /ping HTTP/1.1\r\nHost: ")  # ... and the rest never comes
            assert _closed_by_server(sock)
        # Whole requests are answered; the deadline starts again for each.
        conn = http.client.HTTPConnection(LOOPBACK, server.port, timeout=20)
        try:
            for _ in range(2):
                conn.request("GET", "/ping")
                assert conn.getresponse().read() == b"/ping"
        finally:
            conn.close()
    finally:
        server.stop()


def test_connections_beyond_the_cap_are_closed_at_accept() -> None:
    server = LoopbackServer(0, _Guarded).start()
    server.max_connections = 2
    held = [socket.create_connection((LOOPBACK, server.port), timeout=20) for _ in range(2)]
    try:
        deadline = time.monotonic() + 20
        while server.open_connections < 2 and time.monotonic() < deadline:  # both accepted and served
            time.sleep(0.01)
        assert server.open_connections == 2
        with socket.create_connection((LOOPBACK, server.port), timeout=20) as extra:
            assert _closed_by_server(extra)
        assert server.closed_at_accept == 1
    finally:
        for sock in held:
            sock.close()
        server.stop()


def test_another_users_connection_is_closed_at_accept_with_no_thread_nor_answer(nobody: Any) -> None:
    """Issue 41: another user's connection held a server thread until its request line came (1,004 threads
    held by `nobody`). Now it is closed as it is accepted: no answer, no thread."""
    server = LoopbackServer(0, _Guarded).start()
    probe = (
        "import socket, sys\n"
        f"s = socket.create_connection(('{LOOPBACK}', {server.port}), timeout=20)\n"
        "try:\n"
        "    got = s.recv(100)\n"
        "except ConnectionResetError:\n"
        "    got = b''\n"
        "print(repr(got))\n"
    )
    try:
        done = subprocess.run(
            nobody.argv(nobody.python, "-c", probe),
            env=nobody.env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.stdout.strip() == "b''", done.stderr
        assert server.closed_at_accept == 1 and server.open_connections == 0
    finally:
        server.stop()
