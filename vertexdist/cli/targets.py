"""Where `submit` and the job commands send their calls: one set of target options, and the backend for it.

Precedence is `backends.config.resolve_target`'s: flags, then the template (submit) or the job name (job
commands), then GOOGLE_CLOUD_PROJECT / GOOGLE_CLOUD_REGION; endpoints from flags, then VERTEX_API_ENDPOINT.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from vertexdist.backends.config import Target
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
    """The Vertex backend for `target`, reading replica logs from the emulator when it is one."""
    from vertexdist.backends.vertex import VertexBackend

    if target.is_emulator and target.api_endpoint:
        from vertexdist.emulator.log_client import EmulatorLogs

        return VertexBackend(target, log_source=EmulatorLogs(target.api_endpoint))
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
