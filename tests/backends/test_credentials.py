"""Without Google Cloud credentials, `submit` says so at once and how to get them: no wait for the Compute
Engine metadata server, no google-auth warning (issue 27)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

from vertexdist.backends.vertex.credentials import adc_file, findable

REPO_ROOT = Path(__file__).resolve().parents[2]


SUBMIT = """
import runpy, sys
sys.argv = ["vertexdist", "submit", sys.argv[1]]
try:
    runpy.run_module("vertexdist", run_name="__main__")
finally:
    print("loaded:", len([m for m in sys.modules if m.startswith("google.cloud.aiplatform")]))
"""


def test_submit_without_credentials_says_so_at_once(tmp_path: Path) -> None:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "CLOUDSDK_", "GCE_", "NO_GCE"))
    }
    env.update(HOME=str(tmp_path), VERTEX_API_ENDPOINT="")
    silent = socket.socket()  # a metadata address that takes connections and never answers, as off GCP
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    env["GCE_METADATA_HOST"] = f"127.0.0.1:{silent.getsockname()[1]}"
    done = subprocess.run(
        [sys.executable, "-c", SUBMIT, str(REPO_ROOT / "job_templates" / "cpu-small.yaml")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    silent.setblocking(False)
    asked = 0
    while True:
        try:
            silent.accept()[0].close()
        except BlockingIOError:
            break
        asked += 1
    silent.close()
    assert "no Google Cloud credentials found" in done.stderr
    assert "gcloud auth application-default login" in done.stderr and "--emulator" in done.stderr
    assert "Compute Engine" not in done.stderr and "Traceback" not in done.stderr
    # At once: the metadata server asked once (a 1 s probe, not google-auth's retries and timeouts), and the
    # error said before seconds of importing Vertex's client library (11.6 s in all, in the issue).
    assert asked <= 1
    assert "loaded: 0" in done.stdout, done.stdout


def test_where_credentials_can_come_from(tmp_path: Path) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        nothing = f"127.0.0.1:{closed.getsockname()[1]}"
    home = {"HOME": str(tmp_path)}
    assert not findable({**home, "GCE_METADATA_HOST": nothing})
    assert findable({**home, "GOOGLE_APPLICATION_CREDENTIALS": "/some/key.json"})
    with socket.socket() as silent:  # takes the connection, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        assert not findable({**home, "GCE_METADATA_HOST": f"127.0.0.1:{silent.getsockname()[1]}"})
    server = MetadataStandIn()
    try:
        assert findable({**home, "GCE_METADATA_HOST": server.host})
        assert not findable({**home, "GCE_METADATA_HOST": server.host, "NO_GCE_CHECK": "true"})
    finally:
        server.stop()
    adc_file(home).parent.mkdir(parents=True)
    adc_file(home).write_text("{}")
    assert findable({**home, "GCE_METADATA_HOST": nothing})


class MetadataStandIn:
    """An HTTP server that answers as the metadata server does (`Metadata-Flavor: Google`)."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Metadata-Flavor", "Google")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._server = HTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
