"""Finding a job's backend: from flags and the environment, a job's name or id, or a local run's id or
folder; and the output folder of an earlier job that a new one resumes.

Precedence is `backends.config.resolve_target`'s: flags, then the template (submit) or the job name (job
commands), then GOOGLE_CLOUD_PROJECT / GOOGLE_CLOUD_REGION; endpoints from flags, then VERTEX_API_ENDPOINT.
The environment is read (`env`, default `os.environ`), never written.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from vertexdist.backends import create_backend
from vertexdist.errors import UsageError
from vertexdist.wire.gcs_uri import GsUriError, is_gs_uri, parse_gs_uri

if TYPE_CHECKING:
    from vertexdist.backends.config import Target
    from vertexdist.backends.local import LocalBackend
    from vertexdist.backends.vertex import VertexBackend


def vertex_backend(target: Target) -> VertexBackend:
    """The Vertex backend for `target` (an emulator's too: it serves Cloud Logging's API for the logs)."""
    return create_backend("vertex", target)


def project_backend(
    project: str | None,
    location: str | None,
    endpoint: str | None,
    transport: str | None,
    env: Mapping[str, str] = os.environ,
    *,
    no_project_hint: str | None = None,
) -> VertexBackend:
    """The backend for a project and location named by the flags or the environment."""
    from vertexdist.backends.config import NO_PROJECT_HINT, resolve_target

    target = resolve_target(
        env=env,
        project=project,
        location=location,
        api_endpoint=endpoint,
        transport=transport,
        no_project_hint=no_project_hint or NO_PROJECT_HINT,
    )
    from vertexdist.jobs.emulator_storage import with_emulator_storage

    return vertex_backend(with_emulator_storage(target))


def job_backend(
    job: str,
    project: str | None,
    location: str | None,
    endpoint: str | None,
    transport: str | None,
    env: Mapping[str, str] = os.environ,
    *,
    no_project_hint: str | None = None,
) -> tuple[VertexBackend, str]:
    """The backend that holds `job`, and the job's full resource name. A full name's own project and
    location win over the flags; a bare id takes them from the flags or the environment."""
    from vertexdist.backends.config import check_job_ref, job_name, parse_job_name

    check_job_ref(job)
    parts = parse_job_name(job)
    if parts:
        project, location = parts["project"], parts["location"]
    backend = project_backend(project, location, endpoint, transport, env, no_project_hint=no_project_hint)
    name = job_name(job, backend.target)
    if not parts:
        name = _pipeline_or_custom_job(backend, name)
    return backend, name


def _pipeline_or_custom_job(backend: VertexBackend, pipeline_name: str) -> str:
    """A bare id names a TrainingPipeline (what submit makes) or, failing that, a HyperparameterTuningJob
    (what submit makes of a tuning template) or a CustomJob (what the SDK's CustomJob makes, and what `list`
    shows beside pipelines)."""
    from vertexdist.backends.errors import ApiCallError

    try:
        backend.describe(pipeline_name)
    except ApiCallError as exc:
        if exc.status != 404:
            raise
        for collection in ("hyperparameterTuningJobs", "customJobs"):
            other = pipeline_name.replace("/trainingPipelines/", f"/{collection}/")
            try:
                backend.describe(other)
            except ApiCallError as again:
                if again.status != 404:
                    raise
                continue
            return other
        raise exc from None
    return pipeline_name


# What a local-run leaves in its run folder at once: a job's spec, or a tuning job's request.
RUN_FOLDER_FILES = ("job.json", "request.json")


def local_job(ref: str) -> tuple[LocalBackend, str] | None:
    """A local-run job: its id (a folder under .vertexdist/runs) or its run folder; None for other refs."""
    from vertexdist.backends.local import UnknownLocalJob
    from vertexdist.backends.local.prepare import RUNS_DIR, LocalOptions, is_job_id

    folder = Path(ref)
    if is_job_id(ref.strip()) and not folder.exists():
        folder = RUNS_DIR / ref.strip()
        if not folder.is_dir():
            raise UnknownLocalJob(
                f"no run folder {folder} for the local job {ref}",
                hint="run this where local-run ran (its jobs go to .vertexdist/runs), or pass the run folder",
            )
    elif not (folder.is_dir() and any((folder / name).is_file() for name in RUN_FOLDER_FILES)):
        return None

    folder = folder.resolve()
    backend = create_backend("local", LocalOptions(runs_dir=folder.parent))
    return backend, folder.name


def any_job_backend(
    job: str, project: str | None, location: str | None, endpoint: str | None, transport: str | None
) -> tuple[LocalBackend | VertexBackend, str]:
    """A local-run job's backend (its id or run folder), else the Vertex (or emulator) job's."""
    found = local_job(job)
    if found is not None:
        return found
    return job_backend(job, project, location, endpoint, transport)


def resume_output_dir(
    job: str, *, project: str | None, location: str | None, endpoint: str | None, transport: str | None
) -> str:
    """The earlier job's output folder; UsageError when it names none."""
    if is_gs_uri(job):
        try:
            parse_gs_uri(job)
        except GsUriError:
            raise UsageError(
                f"--resume-from {job!r} names no bucket", hint="use gs://BUCKET/FOLDER"
            ) from None
        return job.rstrip("/")
    from vertexdist.backends.config import check_job_ref

    try:
        check_job_ref(job)
    except UsageError as exc:
        raise UsageError(f"--resume-from: {exc.message}", hint=f"{exc.hint}, or a gs:// folder") from None
    backend, name = job_backend(job, project, location, endpoint, transport)
    found = backend.describe(name)
    prefix = (found.spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    if not isinstance(prefix, str) or not prefix:
        raise UsageError(
            f"--resume-from {job}: {name} has no output folder (its spec names no baseOutputDirectory)",
            hint="pass the folder itself: --resume-from gs://BUCKET/FOLDER",
        )
    return prefix.rstrip("/")
