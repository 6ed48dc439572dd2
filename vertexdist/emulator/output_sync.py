"""What an emulator job wrote to its output folder, made objects of the emulated Cloud Storage.

Replicas write `gs://B/p` as files under `<data dir>/gcs/B/p` (VERTEXDIST_GCS_ROOT: Vertex mounts buckets
at /gcs with gcsfuse), which the storage emulator does not see: it keeps its own objects. So when a job
ends, before its final state is set, the files under its `baseOutputDirectory` are uploaded to the storage
emulator (new or changed ones: by md5), and `vertexdist outputs` / google-cloud-storage list and download
them as they would from Vertex. Only the output folder is published; other gs:// paths a job wrote stay
files under the data folder.
"""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path, PurePosixPath
from typing import Any

from vertexdist.emulator.gcs import StorageEmulator, split_gs_uri


def _md5(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode()


def publish_outputs(storage: StorageEmulator, gcs_root: Path, spec: dict[str, Any]) -> list[str]:
    """Upload the job's output folder from `gcs_root` into `storage`; the object names uploaded."""
    uri = ((spec.get("baseOutputDirectory") or {}).get("outputUriPrefix") or "").rstrip("/")
    if not uri.startswith("gs://") or "/" not in uri[5:]:
        return []
    bucket, prefix = split_gs_uri(uri + "/")
    folder = Path(gcs_root, bucket, *PurePosixPath(prefix).parts)
    if not folder.is_dir():
        return []
    storage.ensure_bucket(bucket)
    existing = storage.md5_hashes(bucket, prefix)
    uploaded = []
    for root, _dirs, names in os.walk(folder):
        for file_name in sorted(names):
            path = Path(root, file_name)
            if path.is_symlink() or not path.is_file():
                continue
            name = "/".join((prefix.rstrip("/"), path.relative_to(folder).as_posix())).lstrip("/")
            if existing.get(name) != _md5(path.read_bytes()):
                storage.upload(path, f"gs://{bucket}/{name}")
                uploaded.append(name)
    return uploaded
