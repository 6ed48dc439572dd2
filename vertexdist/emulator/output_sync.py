"""What an emulator job wrote to its output folder, made objects of the emulated Cloud Storage.

Replicas write `gs://B/p` as files under `<data dir>/gcs/B/p` (VERTEXDIST_GCS_ROOT: Vertex mounts buckets
at /gcs with gcsfuse), which the storage emulator does not see: it keeps its own objects. So when a job
ends, before its final state is set, the files under its `baseOutputDirectory` are uploaded to the storage
emulator (new or changed ones: by md5), and `vertexdist outputs` / google-cloud-storage list and download
them as they would from Vertex. Only the output folder is published; other gs:// paths a job wrote stay
files under the data folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vertexdist.backends.outputs import FolderOutputs, output_uri
from vertexdist.emulator.gcs import StorageEmulator
from vertexdist.wire.gcs_uri import is_gs_uri, parse_gs_uri


def publish_outputs(storage: StorageEmulator, gcs_root: Path, spec: dict[str, Any]) -> list[str]:
    """Upload the job's output folder from `gcs_root` into `storage`; the object names uploaded."""
    uri = output_uri(spec)
    if uri is None or not is_gs_uri(uri):
        return []
    folder = parse_gs_uri(uri, what="the output folder")
    bucket, prefix = folder.bucket, folder.prefix
    source = FolderOutputs(uri, gcs_root)
    if not prefix or not source.folder.is_dir():
        return []
    storage.ensure_bucket(bucket)
    existing = storage.md5_hashes(bucket, f"{prefix}/")
    uploaded = []
    for file in source.files():
        name = f"{prefix}/{file.path}"
        if existing.get(name) != source.checksum(file)[1]:
            storage.upload(source.folder / file.path, f"gs://{bucket}/{name}")
            uploaded.append(name)
    return uploaded
