"""Where `submit` and the job commands send their calls: one set of target options, and the backend for it.

Precedence is `backends.config.resolve_target`'s: flags, then the template (submit) or the job name (job
commands), then GOOGLE_CLOUD_PROJECT / GOOGLE_CLOUD_REGION; endpoints from flags, then VERTEX_API_ENDPOINT.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from vertexdist.backends.config import Target
    from vertexdist.backends.local import LocalBackend
    from vertexdist.backends.vertex import VertexBackend

Project = Annotated[
    str | None,
    typer.Option(
        "--project",
        help="Google Cloud project (default: the template's or the job name's, then GOOGLE_CLOUD_PROJECT).",
    ),
]
Location = Annotated[
    str | None,
    typer.Option(
        "--location",
        help="Vertex region (default: the template's or the job name's, then GOOGLE_CLOUD_REGION).",
    ),
]
Endpoint = Annotated[
    str | None,
    typer.Option(
        "--endpoint",
        help="Vertex API endpoint, e.g. http://127.0.0.1:PORT for the emulator (VERTEX_API_ENDPOINT).",
    ),
]
Transport = Annotated[
    str | None,
    typer.Option(
        "--transport", help="grpc or rest (VERTEXDIST_API_TRANSPORT; default grpc, rest for the emulator)."
    ),
]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def vertex_backend(target: Target) -> VertexBackend:
    """The Vertex backend for `target` (an emulator's too: it serves Cloud Logging's API for the logs)."""
    from vertexdist.backends.vertex import VertexBackend

    return VertexBackend(target)


def project_backend(
    project: str | None, location: str | None, endpoint: str | None, transport: str | None
) -> VertexBackend:
    """The backend for a project and location named by the flags or the environment."""
    from vertexdist.backends.config import resolve_target

    target = resolve_target(
        env=os.environ, project=project, location=location, api_endpoint=endpoint, transport=transport
    )
    return vertex_backend(target)


def job_backend(
    job: str, project: str | None, location: str | None, endpoint: str | None, transport: str | None
) -> tuple[VertexBackend, str]:
    """The backend that holds `job`, and the job's full resource name. A full name's own project and
    location win over the flags; a bare id takes them from the flags or the environment."""
    from vertexdist.backends.config import check_job_ref, job_name, parse_job_name

    check_job_ref(job)
    parts = parse_job_name(job)
    if parts:
        project, location = parts["project"], parts["location"]
    backend = project_backend(project, location, endpoint, transport)
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


def local_job(ref: str) -> tuple[LocalBackend, str] | None:
    """A local-run job: its id (a folder under .vertexdist/runs) or its run folder; None for other refs."""
    from vertexdist.backends.local import LocalBackend, UnknownLocalJob
    from vertexdist.local.template_job import RUNS_DIR, LocalOptions, is_job_id

    folder = Path(ref)
    if is_job_id(ref.strip()) and not folder.exists():
        folder = RUNS_DIR / ref.strip()
        if not folder.is_dir():
            raise UnknownLocalJob(
                f"no run folder {folder} for the local job {ref}",
                hint="run this where local-run ran (its jobs go to .vertexdist/runs), or pass the run folder",
            )
    elif not (folder.is_dir() and (folder / "job.json").is_file()):
        return None

    folder = folder.resolve()
    return LocalBackend(LocalOptions(runs_dir=folder.parent)), folder.name


def any_job_backend(
    job: str, project: str | None, location: str | None, endpoint: str | None, transport: str | None
) -> tuple[LocalBackend | VertexBackend, str]:
    """A local-run job's backend (its id or run folder), else the Vertex (or emulator) job's."""
    found = local_job(job)
    if found is not None:
        return found
    return job_backend(job, project, location, endpoint, transport)
