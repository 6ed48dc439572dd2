"""`--resume-from JOB` of render and submit: the output folder of the earlier Vertex (or emulator) job to
continue, read from that job's spec (its baseOutputDirectory) through the backend's `describe`.

A gs:// folder is taken as is. Resuming is always explicit: without the flag every job gets its own folder.
"""

from __future__ import annotations

from typing import Annotated

import typer

from vertexdist.errors import UsageError

ResumeFrom = Annotated[
    str | None,
    typer.Option(
        "--resume-from",
        help="Continue an earlier job: use its output folder (checkpoints, model) instead of a new one."
        " A job name or id (read with `status`), or a gs:// folder.",
    ),
]


def resume_output_dir(
    job: str, *, project: str | None, location: str | None, endpoint: str | None, transport: str | None
) -> str:
    """The earlier job's output folder; UsageError when it names none."""
    if job.startswith("gs://"):
        folder = job.rstrip("/")
        if not folder.removeprefix("gs://"):
            raise UsageError(f"--resume-from {job!r} names no bucket", hint="use gs://BUCKET/FOLDER")
        return folder
    from vertexdist.backends.config import check_job_ref
    from vertexdist.cli.targets import job_backend

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
