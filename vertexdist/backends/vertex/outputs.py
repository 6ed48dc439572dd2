"""A Vertex (or emulator) job's outputs in Cloud Storage, through google-cloud-storage: the objects under its
output folder, their sizes and checksums, and ranged reads (a download continues where it stopped)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vertexdist.backends.outputs import OutputFile
from vertexdist.backends.vertex.retry import Caller
from vertexdist.wire.gcs_uri import parse_gs_uri


class _Sink:
    """A file-like `write` for the storage client's download, passing each chunk on."""

    def __init__(self, write: Any) -> None:
        self._write = write

    def write(self, data: bytes) -> int:
        self._write(bytes(data))
        return len(data)


class GcsOutputs:
    def __init__(self, uri: str, storage: Any, call: Caller) -> None:
        self.uri = uri
        folder = parse_gs_uri(uri, what="the output folder")
        self._bucket_name, prefix = folder.bucket, folder.prefix
        self._prefix = f"{prefix}/" if prefix else ""
        self._storage = storage
        self._call = call
        # The client's own retry tries a refused connection for two minutes; against the emulator, `call`
        # (which knows a refused loopback port means it is not running) is the only retry.
        self._retry: dict[str, Any] = {"retry": None} if call.target.is_emulator else {}
        self._blobs: dict[str, Any] = {}

    def files(self) -> list[OutputFile]:
        blobs = self._call(
            f"listing {self.uri}",
            lambda: list(self._storage.list_blobs(self._bucket_name, prefix=self._prefix, **self._retry)),
        )
        found = []
        for blob in blobs:
            path = str(blob.name)[len(self._prefix) :]
            if not path or path.endswith("/"):
                continue  # a folder placeholder, not a file
            self._blobs[path] = blob
            found.append(
                OutputFile(
                    path=path,
                    size=int(blob.size or 0),
                    version=str(blob.generation),
                    md5=blob.md5_hash,
                    crc32c=blob.crc32c,
                )
            )
        return sorted(found, key=lambda f: f.path)

    def read(self, file: OutputFile, start: int, write: Any) -> None:
        blob = self._blobs[file.path]
        # This very generation: an object rewritten meanwhile fails the read instead of mixing two versions.
        blob.download_to_file(
            _Sink(write),
            start=start or None,
            if_generation_match=int(file.version),
            checksum=None,
            **self._retry,
        )

    def call(self, what: str, fetch: Callable[[], Any]) -> Any:
        return self._call(f"{what} from {self.uri}", fetch)

    def checksum(self, file: OutputFile) -> tuple[str, str]:
        if file.md5:
            return "md5", file.md5
        if file.crc32c:
            return "crc32c", file.crc32c
        return "md5", ""  # no checksum to compare: never "already there", always fetched
