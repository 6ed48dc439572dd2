"""A local Cloud Storage on loopback: the JSON API of `http` over the on-disk store of `store`.

Clients reach it with `STORAGE_EMULATOR_HOST=http://127.0.0.1:<port>`; google-cloud-storage then uses
anonymous credentials by itself. The emulator's own code (publishing a job's outputs, fetching a package)
reads and writes the store in-process. This replaces gcp-storage-emulator, which dropped empty objects
(its media upload raised on a 0-byte body, issue 27), kept each object's `mediaLink` to the port that wrote it
(dead after a restart), served one request at a time and held every upload in memory.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import socket
import tempfile
from pathlib import Path

from vertexdist.backends.output_files import reached_within
from vertexdist.emulator.storage.http import StorageHTTPServer
from vertexdist.emulator.storage.store import ObjectStore, StoreError
from vertexdist.errors import VertexdistError
from vertexdist.loopback_server import LOOPBACK
from vertexdist.wire.gcs_uri import parse_gs_uri


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
    """The storage emulator on 127.0.0.1; its data under `data_dir` (kept), or a temporary folder (removed
    on `stop()`)."""

    def __init__(self, port: int = 0, data_dir: Path | None = None) -> None:
        self._temp = None if data_dir is not None else Path(tempfile.mkdtemp(prefix="vertexdist-storage-"))
        root = Path(data_dir).resolve() if data_dir is not None else self._temp
        assert root is not None
        root.mkdir(parents=True, exist_ok=True)
        self.store = ObjectStore(root)
        _import_old_layout(self.store)
        self._port = port
        self._server: StorageHTTPServer | None = None

    def start(self) -> None:
        if self._port:
            check_port_free(self._port, "--gcs-port")
        try:
            self._server = StorageHTTPServer(self.store, self._port)
        except OSError as exc:
            raise StorageError(
                f"the Cloud Storage emulator cannot listen on {LOOPBACK}:{self._port}: {exc.strerror}",
                hint="pick another --gcs-port, or 0 for any free port",
            ) from None
        self._server.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
        if self._temp is not None:
            shutil.rmtree(self._temp, ignore_errors=True)

    @property
    def port(self) -> int:
        if self._server is None:
            raise StorageError("the Cloud Storage emulator is not started")
        return self._server.port

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def upload(self, source: Path, uri: str) -> bool:
        """Copy a local file to gs://BUCKET/OBJECT; False if the bucket does not exist."""
        found = parse_gs_uri(uri, object_name=True)
        bucket, name = found.bucket, found.name
        try:
            self.store.put_file(Path(source), bucket, name)
        except StoreError as exc:
            if exc.code == 404:
                return False
            raise StorageError(f"writing {uri} failed: {exc.message}") from None
        return True

    def publish_folder(self, folder: Path, uri_prefix: str) -> int:
        """Upload every file under `folder` to `uri_prefix/...` (creating its bucket); how many went up."""
        root = Path(folder)
        if not root.is_dir():
            return 0
        self.ensure_bucket(parse_gs_uri(uri_prefix, what="an output folder").bucket)
        count = 0
        # Only the folder's own files: no link, nor a file reached through one
        for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
            if not reached_within(root, path):
                continue
            if self.upload(path, f"{uri_prefix.rstrip('/')}/{path.relative_to(root).as_posix()}"):
                count += 1
        return count

    def download(self, uri: str, dest: Path) -> Path:
        """Copy gs://BUCKET/OBJECT to `dest`."""
        found = parse_gs_uri(uri, object_name=True)
        bucket, name = found.bucket, found.name
        try:
            record = self.store.get(bucket, name)
            dest.parent.mkdir(parents=True, exist_ok=True)
            with self.store.open(record) as source, open(dest, "wb") as out:
                shutil.copyfileobj(source, out, 1 << 20)
        except StoreError as exc:
            if exc.code == 404:
                raise StorageError(
                    f"{uri} does not exist in the emulated Cloud Storage",
                    hint="upload it first (vertexdist submit does that), or check the package URI",
                ) from None
            raise StorageError(f"reading {uri} failed: {exc.message}") from None
        return dest

    def ensure_bucket(self, bucket: str) -> None:
        """Create `bucket` unless it exists (a replica may write to a bucket nobody made here)."""
        try:
            self.store.create_bucket({"name": bucket})
        except StoreError as exc:
            if exc.code != 409:  # 409: it exists already
                raise StorageError(f"creating the bucket {bucket} failed: {exc.message}") from None

    def md5_hashes(self, bucket: str, prefix: str) -> dict[str, str]:
        """Object name -> md5Hash of the objects under `prefix`."""
        found: dict[str, str] = {}
        token = ""
        while True:
            items, _prefixes, token = self.store.list(bucket, prefix=prefix, page_token=token)
            found.update({item["name"]: item.get("md5Hash", "") for item in items})
            if not token:
                return found


def _import_old_layout(store: ObjectStore) -> None:
    """Objects an emulator of an older vertexdist kept (gcp-storage-emulator's `.cloudstorage/.meta`), moved
    into the store once, so an upgrade loses no bucket."""
    old = store.root / ".cloudstorage"
    try:
        meta = json.loads((old / ".meta").read_text())
    except (OSError, ValueError):
        return
    for bucket in meta.get("buckets") or {}:
        with contextlib.suppress(StoreError):
            store.create_bucket({"name": bucket})
        for name, record in (meta.get("objects") or {}).get(bucket, {}).items():
            data = old / bucket / name
            if data.is_file():
                fields = {
                    k: v for k, v in record.items() if k in ("contentType", "metadata", "contentEncoding")
                }
                try:
                    store.put_file(data, bucket, name, fields)
                except StoreError as exc:  # one object the store now refuses (say, metadata not a map)
                    logging.getLogger(__name__).warning("not imported: gs://%s/%s (%s)", bucket, name, exc)
    logging.getLogger(__name__).info("imported the older storage emulator's objects from %s", old)
    shutil.rmtree(old, ignore_errors=True)
