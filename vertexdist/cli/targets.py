"""Where `submit` and the job commands send their calls: one set of target options. Finding the backend
for them is the service's (`vertexdist.jobs.find`): precedence is `backends.config.resolve_target`'s."""

from __future__ import annotations

from typing import Annotated

import typer

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
