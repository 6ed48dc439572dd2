"""`--resume-from JOB` of render and submit: the earlier Vertex (or emulator) job whose output folder the
new one continues (`vertexdist.jobs.find.resume_output_dir` reads it). Resuming is always explicit: without
the flag every job gets its own folder.
"""

from __future__ import annotations

from typing import Annotated

import typer

ResumeFrom = Annotated[
    str | None,
    typer.Option(
        "--resume-from",
        help="Continue an earlier job: use its output folder (checkpoints, model) instead of a new one."
        " A job name or id (read with `status`), or a gs:// folder.",
    ),
]
