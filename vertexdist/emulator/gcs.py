"""A local Cloud Storage: gcp-storage-emulator (maintained, on PyPI) run in-process on loopback.

Clients reach it with `STORAGE_EMULATOR_HOST=http://127.0.0.1:<port>`; google-cloud-storage then uses
anonymous credentials by itself. Its server thread is not a daemon and `start()` waits forever if its port is
taken, so `start()` checks the port first and makes the thread a daemon (a missed `stop()` cannot hang exit).
"""

from __future__ import annotations

import json
import logging
import socket
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from vertexdist.errors import VertexdistError
from vertexdist.wire.gcs_uri import parse_gs_uri

LOOPBACK = "127.0.0.1"


class StorageError(VertexdistError):
    """An object could not be read from the emulated bucket."""


def check_port_free(port: int, flag: str) -> None:
    """A clear error, before any server starts, when a fixed loopback port is taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As the servers do (http.server sets allow_reuse_address), so TIME_WAIT sockets do not count.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((LOOPBACK, port))
        except OSError as exc:
            raise VertexdistError(
                f"port {port} on {LOOPBACK} is not available: {exc.strerror}",
                hint=f"pick another {flag}, or 0 for any free port",
            ) from None


class StorageEmulator:
    """gcp-storage-emulator on 127.0.0.1; data on disk under `data_dir` (or in memory without one)."""

    def __init__(self, port: int = 0, data_dir: Path | None = None) -> None:
        from gcp_storage_emulator.server import create_server

        # Its 404 lines for existence checks are routine, not news.
        logging.getLogger("gcp_storage_emulator").setLevel(logging.CRITICAL)
        if data_dir is not None:
            Path(data_dir).mkdir(parents=True, exist_ok=True)
        self._server: Any = create_server(
            LOOPBACK,
            port,
            in_memory=data_dir is None,
            data_dir=str(Path(data_dir).resolve()) if data_dir is not None else None,
        )
        self._port = port
        self._started = False

    def start(self) -> None:
        api = self._server._api
        if self._port:
            check_port_free(self._port, "--gcs-port")
        api.daemon = True
        api.start()
        # The library's start() waits for a flag a failed bind never sets: wait for it or the thread's end.
        while not api.is_running.wait(0.05):
            if not api.is_alive():
                raise StorageError(f"the Cloud Storage emulator could not listen on {LOOPBACK}:{self._port}")
        self._started = True

    def stop(self) -> None:
        if self._started:
            self._server.stop()
            self._started = False

    @property
    def port(self) -> int:
        # The library keeps the bound socket private; reading it is the only way to learn an ephemeral port.
        return int(self._server._api._httpd.server_address[1])

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def upload(self, source: Path, uri: str) -> bool:
        """Copy a local file to gs://BUCKET/OBJECT (media upload); False if the bucket does not exist."""
        found = parse_gs_uri(uri, object_name=True)
        bucket, name = found.bucket, found.name
        url = (
            f"{self.endpoint}/upload/storage/v1/b/{quote(bucket, safe='')}/o"
            f"?uploadType=media&name={quote(name, safe='')}"
        )
        request = urllib.request.Request(url, data=Path(source).read_bytes(), method="POST")
        request.add_header("Content-Type", "application/octet-stream")
        try:
            with urllib.request.urlopen(request, timeout=30):
                return True
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return False
            raise StorageError(f"writing {uri} failed: HTTP {exc.code}") from None

    def publish_folder(self, folder: Path, uri_prefix: str) -> int:
        """Upload every file under `folder` to `uri_prefix/...`; how many went up."""
        count = 0
        root = Path(folder)
        for path in sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else []:
            if not self.upload(path, f"{uri_prefix.rstrip('/')}/{path.relative_to(root).as_posix()}"):
                return count
            count += 1
        return count

    def download(self, uri: str, dest: Path) -> Path:
        """Copy gs://BUCKET/OBJECT to `dest` over the emulator's JSON API (media download)."""
        found = parse_gs_uri(uri, object_name=True)
        bucket, name = found.bucket, found.name
        path = f"/download/storage/v1/b/{quote(bucket, safe='')}/o/{quote(name, safe='')}"
        url = f"{self.endpoint}{path}?alt=media"
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                data = response.read()
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                raise StorageError(
                    f"{uri} does not exist in the emulated Cloud Storage",
                    hint="upload it first (vertexdist submit does that), or check the package URI",
                ) from None
            raise StorageError(f"reading {uri} failed: HTTP {exc.code}") from None
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        return dest

    def _json(
        self, method: str, path: str, body: bytes | None = None, ctype: str = "application/json"
    ) -> Any:
        request = urllib.request.Request(f"{self.endpoint}{path}", data=body, method=method)
        if body is not None:
            request.add_header("Content-Type", ctype)
        with urllib.request.urlopen(request, timeout=300) as response:
            return json.loads(response.read() or b"{}")

    def ensure_bucket(self, bucket: str) -> None:
        """Create `bucket` unless it exists (a replica may write to a bucket nobody made here)."""
        try:
            self._json("POST", "/storage/v1/b?project=emulator", json.dumps({"name": bucket}).encode())
        except urllib.error.HTTPError as exc:
            if exc.code != 409:  # 409: it exists already
                raise StorageError(f"creating the bucket {bucket} failed: HTTP {exc.code}") from None

    def md5_hashes(self, bucket: str, prefix: str) -> dict[str, str]:
        """Object name -> md5Hash of the objects under `prefix`."""
        query = urlencode({"prefix": prefix})
        found = self._json("GET", f"/storage/v1/b/{quote(bucket, safe='')}/o?{query}")
        return {item["name"]: item.get("md5Hash", "") for item in found.get("items") or []}
