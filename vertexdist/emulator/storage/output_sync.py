"""What an emulator job wrote to its output folder, made objects of the emulated Cloud Storage.

Replicas write `gs://B/p` as files under `<data dir>/gcs/B/p` (VERTEXDIST_GCS_ROOT: Vertex mounts buckets
at /gcs with gcsfuse), which the storage emulator does not see: it keeps its own objects. So when a job
ends, before its final state is set, the files under its `baseOutputDirectory` are uploaded to the storage
emulator (new or changed ones: by md5), and `vertexdist outputs` / google-cloud-storage list and download
them as they would from Vertex. Only the output folder is published; other gs:// paths a job wrote stay
files under the data folder.

Every file is tried, empty ones included; files that cannot be published (a name Cloud Storage refuses, a file
gone while it was read) are collected into one `PublishError`, which fails the job (`EmulatorService`): a job
whose outputs are not all there never reads SUCCEEDED.

Only the job's own files are published: an output folder that is a symbolic link (or sits below one, under
the gs:// root) publishes nothing and fails the job, subfolders and files that are links are left out, and
a file is read only if it is still inside the output folder once every link is resolved.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vertexdist.backends.output_files import linked_folder, reached_within
from vertexdist.backends.outputs import FolderOutputs, output_uri
from vertexdist.emulator.storage.server import StorageEmulator
from vertexdist.errors import VertexdistError
from vertexdist.wire.gcs_uri import is_gs_uri, parse_gs_uri

SHOWN_FAILURES = 3


@dataclass
class PublishError(VertexdistError):
    """Some of a job's output files did not become objects."""

    uri: str = ""
    total: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)  # (path under the folder, why)
    reason: str = ""  # why nothing at all was published

    def __post_init__(self) -> None:
        if self.reason:
            super().__init__(
                f"nothing under {self.uri} was published to the emulated Cloud Storage: {self.reason}"
            )
            return
        shown = "; ".join(f"{path!r}: {why}" for path, why in self.failed[:SHOWN_FAILURES])
        more = f"; and {len(self.failed) - SHOWN_FAILURES} more" if len(self.failed) > SHOWN_FAILURES else ""
        super().__init__(
            f"{len(self.failed)} of {self.total} output file(s) under {self.uri} could not be published to"
            f" the emulated Cloud Storage: {shown}{more}"
        )


def publish_outputs(storage: StorageEmulator, gcs_root: Path, spec: dict[str, Any]) -> list[str]:
    """Upload the job's output folder from `gcs_root` into `storage`; the object names uploaded.

    Raises PublishError, after trying every file, if any of them could not be uploaded."""
    uri = output_uri(spec)
    if uri is None or not is_gs_uri(uri):
        return []
    folder = parse_gs_uri(uri, what="the output folder")
    bucket, prefix = folder.bucket, folder.prefix
    source = FolderOutputs(uri, gcs_root)
    if not prefix:
        return []
    link = linked_folder(gcs_root, source.folder)
    if link is not None:
        raise PublishError(
            uri=uri,
            reason=f"{link} is a symbolic link (to {link.readlink()}); a job's outputs are its own files",
        )
    if not source.folder.is_dir():
        return []
    storage.ensure_bucket(bucket)
    existing = storage.md5_hashes(bucket, f"{prefix}/")
    uploaded: list[str] = []
    files = source.files()
    failed: list[tuple[str, str]] = []
    for file in files:
        name = f"{prefix}/{file.path}"
        try:
            if not reached_within(source.folder, source.folder / file.path):
                raise PublishError(uri=uri, reason=f"{file.path} is reached through a symbolic link")
            if existing.get(name) != source.checksum(file)[1]:
                storage.upload(source.folder / file.path, f"gs://{bucket}/{name}")
                uploaded.append(name)
        except (OSError, VertexdistError) as exc:
            failed.append((file.path, getattr(exc, "message", None) or str(exc)))
    if failed:
        raise PublishError(uri=uri, total=len(files), failed=failed)
    return uploaded
