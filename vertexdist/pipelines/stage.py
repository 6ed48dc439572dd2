"""The trainer package a `training_step` names, put where the step's CustomJob reads it.

`submit` uploads the sdist before it creates the job; a pipeline's step creates its job later, on Vertex
(or the emulator), so the package must be in the staging bucket before the run: `stage_package` uploads it
unless the bucket holds it already (its URI carries the sdist's digest, as `render` shows it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vertexdist.wire.gcs_uri import parse_gs_uri


def stage_package(template: str | Path, storage_client: Any, *, create_bucket: bool = False) -> str | None:
    """Upload TEMPLATE's trainer sdist to its staging bucket if missing; its gs:// URI (None for an
    image job). `create_bucket` makes a missing bucket (for an emulator's storage)."""
    from vertexdist.packaging import package_uri, sdist_bytes
    from vertexdist.spec.loader import load_template

    loaded = load_template(template)
    if loaded.build is not None or not loaded.staging_bucket:
        return None
    built, data = sdist_bytes(loaded.trainer)
    uri = package_uri(loaded.staging_bucket, built)
    where = parse_gs_uri(uri, what="the package", object_name=True)
    bucket = storage_client.bucket(where.bucket)
    if create_bucket and not bucket.exists():
        storage_client.create_bucket(where.bucket)
    blob = bucket.blob(where.name)
    if not blob.exists():
        blob.upload_from_string(data, content_type="application/gzip")
    return uri
