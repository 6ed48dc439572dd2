"""Cloud Build as a thin edge: upload the context with google-cloud-storage, create the build with
google-cloud-build, follow its log from the logs bucket (as `gcloud builds submit` does) until it ends.

Uploads are content-addressed (`.../build-contexts/<hash>.tar.gz`), so an unchanged context is never sent
twice. The clients are created here, lazily; tests pass clients wired to local endpoints.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from vertexdist.container.registry import no_credentials
from vertexdist.errors import VertexdistError
from vertexdist.wire.gcs_uri import parse_gs_uri

_TERMINAL = {"SUCCESS", "FAILURE", "INTERNAL_ERROR", "TIMEOUT", "CANCELLED", "EXPIRED"}


def join_object(prefix: str, *parts: str) -> str:
    return "/".join(p for p in (prefix, *parts) if p)


def storage_client(project: str | None = None) -> Any:
    from google.auth.exceptions import DefaultCredentialsError
    from google.cloud import storage  # type: ignore[attr-defined]

    try:
        return storage.Client(project=project)
    except DefaultCredentialsError:
        raise no_credentials("to upload the build context") from None


def upload_context(client: Any, tar_path: Path, bucket: str, object_name: str) -> bool:
    """Upload the context tarball unless that object (same name, so same content) exists; True if sent."""
    blob = client.bucket(bucket).blob(object_name)
    if blob.exists():
        return False
    blob.upload_from_filename(str(tar_path), content_type="application/gzip")
    return True


def read_log_chunk(client: Any, bucket: str, object_name: str, offset: int) -> bytes:
    """The bytes of a build log from `offset` on; empty while the log does not exist yet."""
    from google.api_core import exceptions

    blob = client.bucket(bucket).blob(object_name)
    try:
        data: bytes = blob.download_as_bytes(start=offset)
    except (exceptions.NotFound, exceptions.RequestRangeNotSatisfiable):
        return b""
    return data


class LogFollower:
    """Prints each new complete line of a log object in GCS."""

    def __init__(self, client: Any, bucket: str, object_name: str, log: Callable[[str], None]) -> None:
        self._client, self._bucket, self._object = client, bucket, object_name
        self._log = log
        self._offset = 0
        self._partial = b""

    def poll(self, *, final: bool = False) -> None:
        chunk = read_log_chunk(self._client, self._bucket, self._object, self._offset)
        self._offset += len(chunk)
        data = self._partial + chunk
        *lines, self._partial = data.split(b"\n")
        if final and self._partial:
            lines.append(self._partial)
            self._partial = b""
        for line in lines:
            self._log(line.decode("utf-8", errors="replace"))


class CloudBuildRunner:
    """Creates a build from a CreateBuild body and follows it to the end."""

    def __init__(
        self,
        storage: Any = None,
        build_client: Any = None,
        log: Callable[[str], None] = print,
        poll_s: float = 3.0,
    ) -> None:
        self._storage = storage
        self._client = build_client
        self._log = log
        self._poll_s = poll_s

    def _build_client(self) -> Any:
        if self._client is None:
            from google.auth.exceptions import DefaultCredentialsError
            from google.cloud.devtools import cloudbuild_v1

            try:
                self._client = cloudbuild_v1.CloudBuildClient()
            except DefaultCredentialsError:
                raise no_credentials("to start Cloud Build") from None
        return self._client

    def upload(self, tar_path: Path, bucket: str, object_name: str) -> bool:
        if self._storage is None:
            self._storage = storage_client()
        return upload_context(self._storage, tar_path, bucket, object_name)

    def run(self, request: Mapping[str, Any]) -> Any:
        """Create the build, print its log as it grows, return the finished `Build`; raise if it failed."""
        from vertexdist.container.cloudbuild import validate_request

        client = self._build_client()
        operation = client.create_build(request=validate_request(request))
        build = operation.metadata.build
        self._log(f"Cloud Build {build.id} started: {build.log_url}")
        follower = None
        if build.logs_bucket:
            logs = parse_gs_uri(build.logs_bucket)
            bucket, prefix = logs.bucket, logs.prefix
            if self._storage is None:
                self._storage = storage_client()
            follower = LogFollower(
                self._storage, bucket, join_object(prefix, f"log-{build.id}.txt"), self._log
            )
        while True:
            build = client.get_build(project_id=request["projectId"], id=build.id)
            status = build.status.name
            if follower is not None:
                follower.poll(final=status in _TERMINAL)
            if status in _TERMINAL:
                break
            time.sleep(self._poll_s)
        if status != "SUCCESS":
            detail = f": {build.status_detail}" if build.status_detail else ""
            raise VertexdistError(
                f"Cloud Build {build.id} ended {status}{detail}", hint=f"see the full log at {build.log_url}"
            )
        return build
