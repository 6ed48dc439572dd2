"""Where `submit` and the job commands send their calls: one set of target options. Finding the backend
for them is the service's (`vertexdist.jobs.find`): precedence is `backends.config.resolve_target`'s."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

Project = Annotated[
    str | None,
    typer.Option(
        "--project", help="Google Cloud project (default: the template's, then GOOGLE_CLOUD_PROJECT)."
    ),
]
Location = Annotated[
    str | None,
    typer.Option("--location", help="Vertex region (default: the template's, then GOOGLE_CLOUD_REGION)."),
]
# The job commands take no template: a full job name names its own project and region.
JobProject = Annotated[
    str | None,
    typer.Option(
        "--project",
        help="Google Cloud project of a bare job id (a full name names its own; default:"
        " GOOGLE_CLOUD_PROJECT; with --emulator, the emulator's folder knows it).",
    ),
]
JobLocation = Annotated[
    str | None,
    typer.Option(
        "--location",
        help="Vertex region of a bare job id (default: GOOGLE_CLOUD_REGION, then us-central1).",
    ),
]
ListProject = Annotated[
    str | None,
    typer.Option(
        "--project",
        help="Google Cloud project to list (default: GOOGLE_CLOUD_PROJECT; with --emulator, every project"
        " in the emulator's folder).",
    ),
]
ListLocation = Annotated[
    str | None,
    typer.Option(
        "--location", help="Vertex region to list (default: GOOGLE_CLOUD_REGION, then us-central1)."
    ),
]
UseEmulator = Annotated[
    bool,
    typer.Option(
        "--emulator",
        help="The jobs of `submit --emulator`: the emulator serving --emulator-data-dir"
        " (`vertexdist emulator start`), else one started for this command.",
    ),
]
EmulatorDataDir = Annotated[
    Path,
    typer.Option("--emulator-data-dir", help="With --emulator: the emulator's folder."),
]
Endpoint = Annotated[
    str | None,
    typer.Option(
        "--endpoint",
        help="Vertex API endpoint, e.g. http://127.0.0.1:PORT for the emulator (VERTEX_API_ENDPOINT); an"
        " emulator's brings its Cloud Storage endpoint (STORAGE_EMULATOR_HOST may stay unset).",
    ),
]
Transport = Annotated[
    str | None,
    typer.Option(
        "--transport", help="grpc or rest (VERTEXDIST_API_TRANSPORT; default grpc, rest for the emulator)."
    ),
]
EMULATOR_DATA_DIR = Path(".vertexdist/emulator")
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
