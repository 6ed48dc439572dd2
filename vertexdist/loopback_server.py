"""A threaded HTTP server on 127.0.0.1 that serves from a background thread until stopped: the base of the
emulator's Vertex API (`emulator.http_api`), its Cloud Storage API (`emulator.gcs_http`) and a local job's
metadata server (`local.metadata_server`).

Loopback only: both answer whatever reaches them (the emulator runs commands it is sent), so neither may
ever face a network.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TypeVar

LOOPBACK = "127.0.0.1"
STOP_WAIT_S = 5.0

ServerT = TypeVar("ServerT", bound="LoopbackServer")


class LoopbackServer(ThreadingHTTPServer):
    """Listens on 127.0.0.1:`port` (0: any free port); `start()` serves in a daemon thread, `stop()` ends
    the serving thread and closes the socket (safe to call twice, or without `start`)."""

    daemon_threads = True
    thread_name = "loopback-http"

    def __init__(self, port: int, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__((LOOPBACK, port), handler)
        self._thread: threading.Thread | None = None

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
