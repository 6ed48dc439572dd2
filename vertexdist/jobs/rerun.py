"""`describe` and `rerun` of a job from its run record: read the record (a Vertex or emulator job's from
beside its outputs, a local run's from its run folder), and submit the very same request again — the same
package bytes, put back at their URI if they are gone — with only a new output folder."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vertexdist.errors import UsageError, VertexdistError
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


def record_doubts(backend: LocalBackend | VertexBackend, name: str, record: dict[str, Any]) -> list[str]:
    """Warning lines where a Vertex job's record differs from the job itself (none for a local run, whose
    record is in the user's own run folder)."""
    from vertexdist.jobs.rerun_check import RecordMismatch, check_against_job

    if _is_local(backend):
        return []
    job = backend.describe(name)
    try:
        found = check_against_job(
            record, name, display_name=job.display_name, labels=job.labels, spec=job.spec
        )
    except RecordMismatch as exc:
        found = [exc.message]
    if not found:
        return []
    return [f"warning: this run record is not what {name} was sent (rerun refuses it):"] + [
        f"  {line}" for line in found
    ]


def user_secrets(record: dict[str, Any], secrets_file: Path | None) -> tuple[dict[str, str], str]:
    """Secret env values from where the user keeps them, and where that is (for messages): a `--secrets` file
    (a YAML or JSON map NAME: value) first, then the template file the record names when it is still there
    and is the caller's own, then the caller's environment. Never from the job's masked spec."""
    import os

    import yaml

    found: dict[str, str] = {}
    places: list[str] = []
    if secrets_file is not None:
        try:
            loaded = yaml.safe_load(secrets_file.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise UsageError(f"{secrets_file}: cannot read it as a map of NAME: value ({exc})") from exc
        if not isinstance(loaded, dict) or not all(isinstance(k, str) for k in loaded):
            raise UsageError(f"{secrets_file}: is not a map of NAME: value", hint="e.g. API_TOKEN: s3cr3t")
        found.update({k: str(v) for k, v in loaded.items()})
        places.append(str(secrets_file))
    template = (record.get("template") or {}).get("path")
    if isinstance(template, str) and template:
        path = Path(template)
        try:
            own = path.is_file() and path.stat().st_uid == os.getuid()
        except OSError:
            own = False
        if own:
            from vertexdist.spec.loader import load_template

            try:
                env = load_template(path).trainer.env
            except VertexdistError:
                env = {}
            found.update({k: v for k, v in env.items() if k not in found})
            places.append(f"the template {path}")
    found.update({k: v for k, v in os.environ.items() if k not in found})
    places.append("your environment")
    return found, ", ".join(places)


def rerun(
    backend: LocalBackend | VertexBackend,
    name: str,
    notice: Callable[[str], None],
    secrets_file: Path | None = None,
) -> tuple[str, dict[str, Any]]:
    """Submit job `name`'s request again with a fresh output folder; (the new job, its record).

    The request is the one the job itself was sent: the record is used only where it agrees with the job's
    spec, labels and request-hash label (`rerun_check`), secret values come from the user's own places, and
    the package is put back only at a URI the job names, with the SHA-256 that URI names."""
    from vertexdist.backends.vertex import Submission, VertexBackend
    from vertexdist.backends.vertex.request import new_job_folder
    from vertexdist.jobs.record_store import ensure_package, keep_in_bucket, package_bytes
    from vertexdist.jobs.rerun_check import package_to_restore, verified_request
    from vertexdist.jobs.run_record import rerun_request
    from vertexdist.render import REQUEST_HASH_LABEL
    from vertexdist.render.health_mark import without_mark
    from vertexdist.wire.proto_json import now_rfc3339

    if not isinstance(backend, VertexBackend):
        raise UsageError(
            f"{name} is a local run", hint="run its template again with local-run; rerun is for Vertex jobs"
        )
    job = backend.describe(name)
    record = read_record(backend, name)
    secrets, secrets_from = user_secrets(record, secrets_file)
    sent = verified_request(
        record,
        name,
        display_name=job.display_name,
        labels=job.labels,
        spec=job.spec,
        secrets=secrets,
        secrets_from=secrets_from,
    )
    package = package_to_restore(record, job.spec)
    if package is not None and ensure_package(backend, record):
        notice(f"the package was gone from {package[0]}: put back from the record")
    request = rerun_request(without_mark(sent), new_job_folder())
    resource = next(v for k, v in request.items() if k != "parent")
    submission = Submission(
        request=request,
        request_hash=str((resource.get("labels") or {}).get(REQUEST_HASH_LABEL, "")),
        package_uri=package[0] if package else None,
    ).for_new_job()  # a health mark of its own
    request = submission.request
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
