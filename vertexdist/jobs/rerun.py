"""`describe` and `rerun` of a job from its run record: read the record (a Vertex or emulator job's from
beside its outputs, a local run's from its run folder), and submit the very same request again — the same
package bytes, put back at their URI if they are gone — with only a new output folder."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vertexdist.errors import UsageError
from vertexdist.jobs.run_record import RECORD_FILE

if TYPE_CHECKING:
    from vertexdist.backends.base import JobStatus
    from vertexdist.backends.local import LocalBackend
    from vertexdist.backends.vertex import VertexBackend


def _is_local(backend: LocalBackend | VertexBackend) -> bool:
    return not hasattr(backend, "clients")


def read_record(backend: LocalBackend | VertexBackend, name: str) -> dict[str, Any]:
    """The run record of job `name`."""
    if _is_local(backend):
        path = backend.run_dir(name) / RECORD_FILE  # type: ignore[union-attr]
        if not path.is_file():
            raise UsageError(f"the local run {name} has no run record ({path})", hint="local-run keeps one")
        found: dict[str, Any] = json.loads(path.read_text())
        return found
    from vertexdist.backends.vertex import VertexBackend
    from vertexdist.jobs.record_store import read_from_bucket

    assert isinstance(backend, VertexBackend)
    spec = backend.describe(name).spec
    output = ((spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")) or ""
    if not output:
        raise UsageError(f"{name} names no output folder, so it has no run record")
    return read_from_bucket(backend, name, output)


def rerun(
    backend: LocalBackend | VertexBackend, name: str, notice: Callable[[str], None]
) -> tuple[str, dict[str, Any]]:
    """Submit job `name`'s recorded request again with a fresh output folder; (the new job, its record)."""
    from vertexdist.backends.vertex import Submission, VertexBackend
    from vertexdist.backends.vertex.request import new_job_folder
    from vertexdist.jobs.record_store import ensure_package, keep_in_bucket, package_bytes
    from vertexdist.jobs.run_record import rerun_request
    from vertexdist.render import REQUEST_HASH_LABEL
    from vertexdist.render.secrets import restore_secrets, secret_env
    from vertexdist.wire.proto_json import now_rfc3339

    if not isinstance(backend, VertexBackend):
        raise UsageError(
            f"{name} is a local run", hint="run its template again with local-run; rerun is for Vertex jobs"
        )
    record = read_record(backend, name)
    if ensure_package(backend, record):
        notice(f"the package was gone from {record['package']['uri']}: put back from the record")
    # The record keeps secret env values masked; the job's own spec has them (read_record described it).
    secrets = secret_env(backend.describe(name).spec)
    request = rerun_request(restore_secrets(record["request"], secrets), new_job_folder())
    resource = next(v for k, v in request.items() if k != "parent")
    package = record.get("package") or {}
    submission = Submission(
        request=request,
        request_hash=str((resource.get("labels") or {}).get(REQUEST_HASH_LABEL, "")),
        package_uri=package.get("uri"),
    )
    new = backend.schedule(submission)
    again = {**record, "job": new, "request": request, "created": now_rfc3339(), "attempts": [new]}
    again["rerun_of"] = name
    try:
        data = package_bytes(backend, record) if package else None
        keep_in_bucket(backend, again, None, data)
    except Exception as exc:  # the job exists: say it and go on
        notice(f"the run record of {new} was not kept: {type(exc).__name__}: {exc}")
    return new, again


def wait_for(
    backend: LocalBackend | VertexBackend,
    name: str,
    on_status: Callable[[JobStatus], None] = lambda _status: None,
) -> JobStatus:
    """Poll the job until it ends (as submit does: often on an emulator, backing off on Vertex); each
    status read goes to `on_status`."""
    from vertexdist.backends.watch import follow_policy, watch

    target = getattr(backend, "target", None)
    policy = follow_policy(target is not None and target.is_emulator, logs=False)
    return watch(backend, name, on_status=on_status, policy=policy)
