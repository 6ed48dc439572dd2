"""The trainer sdist into the staging bucket through google-cloud-storage: resumable in chunks, reporting its
progress to a callback (the CLI draws the bar), skipped when the bucket holds that digest already."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vertexdist.backends.errors import ApiCallError
from vertexdist.backends.vertex.clients import Clients
from vertexdist.backends.vertex.request import Submission
from vertexdist.backends.vertex.retry import Caller
from vertexdist.wire.gcs_uri import parse_gs_uri

UPLOAD_CHUNK = 4 * 1024 * 1024  # resumable-upload chunk (a multiple of 256 KiB); gives the bar its steps
ProgressFn = Callable[[int, int], None]


class _ProgressReader:
    """A file wrapper that reports bytes read, for the upload bar."""

    def __init__(self, handle: Any, size: int, progress: ProgressFn | None) -> None:
        self._handle = handle
        self._size = size
        self._progress = progress

    def read(self, n: int = -1) -> bytes:
        data: bytes = self._handle.read(n)
        if self._progress is not None:
            self._progress(self._handle.tell(), self._size)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(self._handle.seek(offset, whence))

    def tell(self) -> int:
        return int(self._handle.tell())


def upload_package(
    submission: Submission, clients: Clients, call: Caller, progress: ProgressFn | None = None
) -> bool:
    """Upload the sdist unless the bucket already holds it (same digest, same URI); True if uploaded."""
    if submission.package_path is None or submission.package_uri is None:
        return False
    target = clients.target
    package = parse_gs_uri(submission.package_uri, what="the package", object_name=True)
    bucket_name, blob_name = package.bucket, package.name
    client = clients.storage
    bucket = client.bucket(bucket_name)
    blob = bucket.blob(blob_name)
    try:
        if call(f"checking {submission.package_uri}", blob.exists):
            return False
        if target.is_emulator and not call("checking the bucket", bucket.exists):
            call("creating the emulated bucket", lambda: client.create_bucket(bucket_name))
        size = submission.package_path.stat().st_size
        if size > UPLOAD_CHUNK:
            blob.chunk_size = UPLOAD_CHUNK
        with open(submission.package_path, "rb") as handle:
            reader = _ProgressReader(handle, size, progress)
            call(
                f"uploading {submission.package_uri}",
                lambda: blob.upload_from_file(reader, size=size, rewind=True),
            )
    except ApiCallError as exc:
        if exc.status != 404:
            raise
        create = f"gcloud storage buckets create gs://{bucket_name} --location={target.location}"
        raise ApiCallError(f"bucket gs://{bucket_name} does not exist", f"create it: {create}", 404) from None
    return True
