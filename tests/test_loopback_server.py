"""The threaded loopback server both the emulator's API and a job's metadata server stand on."""

from __future__ import annotations

import socket
import urllib.request
from http.server import BaseHTTPRequestHandler

from vertexdist.loopback_server import LOOPBACK, LoopbackServer


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
