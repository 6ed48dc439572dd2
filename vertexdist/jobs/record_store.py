"""Where run records are kept: beside a Vertex (or emulator) job's outputs in Cloud Storage, with a copy of
its package, and in a local run's folder (`run_record` makes them)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vertexdist.errors import UsageError
from vertexdist.jobs.run_record import RECORD_FILE, record_folder, request_output_dir
from vertexdist.render.secrets import mask_values, secret_env
from vertexdist.wire.gcs_uri import parse_gs_uri

if TYPE_CHECKING:
    from vertexdist.backends.vertex import Submission, VertexBackend
    from vertexdist.spec.models import JobTemplate


def _blob(backend: VertexBackend, uri: str) -> Any:
    where = parse_gs_uri(uri, what="the run record", object_name=True)
    return backend.clients.storage.bucket(where.bucket).blob(where.name)


def keep_in_bucket(
    backend: VertexBackend,
    record: dict[str, Any],
    package_path: Path | None,
    package_data: bytes | None = None,
) -> str:
    """Upload the record (and the package's bytes beside it: from `package_path`, or `package_data` under
    the recorded file name); the record's URI."""
    folder = record_folder(request_output_dir(record["request"]), record["job"])
    if package_path is not None:
        _blob(backend, f"{folder}/{package_path.name}").upload_from_filename(str(package_path))
    elif package_data is not None and record.get("package"):
        _blob(backend, f"{folder}/{record['package']['file']}").upload_from_string(package_data)
    uri = f"{folder}/{RECORD_FILE}"
    # Secret env values stay in the job alone (its spec, which a rerun reads them back from), never in a
    # bucket object: the template's text and the request are kept with them masked.
    kept = mask_values(record, tuple(secret_env(record["request"]).values()))
    _blob(backend, uri).upload_from_string(json.dumps(kept, indent=2), content_type="application/json")
    return uri


def read_from_bucket(backend: VertexBackend, job: str, output_dir: str) -> dict[str, Any]:
    """The record of `job`, whose output folder is `output_dir`."""
    uri = f"{record_folder(output_dir, job)}/{RECORD_FILE}"
    blob = _blob(backend, uri)
    if not blob.exists():
        raise UsageError(
            f"{job} has no run record at {uri}",
            hint="jobs submitted by vertexdist keep one; a job made another way has none",
        )
    found: dict[str, Any] = json.loads(blob.download_as_bytes())
    return found


def package_bytes(backend: VertexBackend, record: dict[str, Any]) -> bytes:
    """The recorded package's bytes, from the copy kept with the record."""
    package = record["package"]
    folder = record_folder(request_output_dir(record["request"]), record["job"])
    data: bytes = _blob(backend, f"{folder}/{package['file']}").download_as_bytes()
    return data


def ensure_package(backend: VertexBackend, record: dict[str, Any]) -> bool:
    """Put the recorded package back at its URI unless the object there has the very same SHA-256; True if
    it had to. Raises when the kept copy is not the recorded bytes."""
    import hashlib

    package = record.get("package")
    if not package or not package.get("uri"):
        return False
    blob = _blob(backend, str(package["uri"]))
    if blob.exists() and hashlib.sha256(blob.download_as_bytes()).hexdigest() == package["sha256"]:
        return False
    data = package_bytes(backend, record)
    if hashlib.sha256(data).hexdigest() != package["sha256"]:
        raise UsageError(
            f"the package kept with {record['job']}'s record is not the one it ran",
            hint="its SHA-256 differs from the record's; the record's folder was changed",
        )
    blob.upload_from_string(data)
    return True


def _image_uri(request: Any) -> str | None:
    """The first container image a request runs (a `build` job's), if any."""
    if isinstance(request, dict):
        spec = request.get("containerSpec")
        if isinstance(spec, dict) and spec.get("imageUri"):
            return str(spec["imageUri"])
        values: list[Any] = list(request.values())
    elif isinstance(request, list):
        values = list(request)
    else:
        return None
    for value in values:
        found = _image_uri(value) if isinstance(value, dict | list) else None
        if found:
            return found
    return None


def keep_submission_record(
    backend: VertexBackend,
    template: JobTemplate,
    job: str,
    submission: Submission,
    notice: Callable[[str], None],
    *,
    rerun_of: str | None = None,
) -> str | None:
    """Keep the record of a job just created; the job runs whatever happens here, so a failure is a notice."""
    from vertexdist.errors import VertexdistError
    from vertexdist.jobs.run_record import make_record

    try:
        resource = submission.resource
        image = _image_uri(resource.get("trainingTaskInputs") or resource)
        record = make_record(
            template,
            job,
            submission.request,
            package_path=submission.package_path,
            package_uri=submission.package_uri,
            image_uri=image if submission.package_path is None else None,
            rerun_of=rerun_of,
        )
        return keep_in_bucket(backend, record, submission.package_path)
    except (OSError, ValueError, VertexdistError) as exc:
        notice(f"the run record of {job} was not kept: {exc}")
        return None
    except Exception as exc:  # a storage client error: the job exists, so say it and go on
        notice(f"the run record of {job} was not kept: {type(exc).__name__}: {exc}")
        return None


def keep_local_record(
    template: JobTemplate, run_dir: Path, job_id: str, fault_plan: Path | None
) -> Path | None:
    """A local run's record in its run folder: the CustomJobSpec it ran (job.json), its package, its code."""
    from vertexdist.backends.local.logs import kept_secrets
    from vertexdist.jobs.run_record import make_record
    from vertexdist.private_files import write_private_json

    spec_file = run_dir / "job.json"
    if not spec_file.is_file():
        return None
    packages = sorted((run_dir / "package").glob("*/*.tar.gz"))
    spec = json.loads(spec_file.read_text())
    uris = [
        u
        for pool in spec.get("workerPoolSpecs") or []
        for u in (pool.get("pythonPackageSpec") or {}).get("packageUris") or []
    ]
    record = make_record(
        template,
        job_id,
        spec,
        package_path=packages[0] if packages else None,
        package_uri=uris[0] if uris else None,
        image_uri=None if packages else _image_uri(spec),
        fault_plan=fault_plan.read_text() if fault_plan is not None and fault_plan.is_file() else None,
    )
    path = run_dir / RECORD_FILE
    # The template's text holds the secret env values that job.json has masked already: the run folder keeps
    # them in secrets.json alone (0600), for masking; a local run is rerun by local-run, not from this record.
    write_private_json(path, mask_values(record, kept_secrets(run_dir)))
    return path
