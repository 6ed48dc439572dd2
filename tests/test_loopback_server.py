"""The threaded loopback server both the emulator's API and a job's metadata server stand on."""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.request
from http.server import BaseHTTPRequestHandler

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
