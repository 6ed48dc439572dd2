"""`vertexdist models list|describe|versions|download MODEL[@VERSION|@ALIAS]`: the Model Registry, on Vertex
or in the emulator (`--emulator`), through the SDK's ModelServiceClient.

MODEL is a model's id or its full name (projects/P/locations/L/models/ID); `@2` names version 2, `@prod`
the version with that alias, none the default version. The text views are `models_view`'s. Exit codes:
0 fine; 1 the call failed; 2 usage.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from vertexdist.cli.models_view import model_lines, model_table, version_table
from vertexdist.cli.targets import (
    EMULATOR_DATA_DIR,
    AsJson,
    EmulatorDataDir,
    Endpoint,
    Transport,
    UseEmulator,
)
from vertexdist.errors import UsageError
from vertexdist.jobs.where import JobPlace

models_app = typer.Typer(
    help="Models in the Vertex AI Model Registry, and their versions.", no_args_is_help=True
)
ModelProject = Annotated[
    str | None,
    typer.Option(
        "--project",
        help="Google Cloud project of the models (a full MODEL name names its own;"
        " default: GOOGLE_CLOUD_PROJECT).",
    ),
]
ModelLocation = Annotated[
    str | None,
    typer.Option("--location", help="Vertex region (default: GOOGLE_CLOUD_REGION, then us-central1)."),
]
ModelRef = Annotated[
    str,
    typer.Argument(help="MODEL, MODEL@VERSION or MODEL@ALIAS: an id or projects/P/locations/L/models/ID."),
]


def _place(
    project: str | None,
    location: str | None,
    endpoint: str | None,
    transport: str | None,
    emulator: bool,
    emulator_data_dir: Path,
    ref: str | None = None,
) -> JobPlace:
    import os

    from vertexdist.cli.jobs import place
    from vertexdist.jobs.models import place_of
    from vertexdist.jobs.registry_place import model_places

    at = place_of(ref, place(project, location, endpoint, transport, emulator, emulator_data_dir))
    # --emulator with no project: the model's project in the emulator's folder (one place for one model)
    return model_places(at, os.environ, ref or "")[0] if ref is not None else at


def list_models(
    filter_text: str = typer.Option(
        "", "--filter", help='Vertex\'s list filter, e.g. labels.team="vision" or display_name="chapter".'
    ),
    project: ModelProject = None,
    location: ModelLocation = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
    as_json: AsJson = False,
) -> None:
    """List the models of a project and location (each as its default version); with --emulator and no
    project, of every project the emulator's folder holds models or jobs in."""
    import os

    from vertexdist.jobs.models import open_models_at
    from vertexdist.jobs.registry_place import model_places

    at = _place(project, location, endpoint, transport, emulator, emulator_data_dir)
    with open_models_at(model_places(at, os.environ, None)) as readers:
        found = [model for models in readers for model in models.list_models(filter_text)]
        parent = ", ".join(models.target.parent for models in readers)
    if as_json:
        typer.echo(json.dumps(found, indent=2))
        return
    if not found:
        typer.echo(f"no models in {parent}" + (f" matching {filter_text}" if filter_text else ""), err=True)
        return
    for line in model_table(found):
        typer.echo(line)


def describe(
    ref: ModelRef,
    project: ModelProject = None,
    location: ModelLocation = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
    as_json: AsJson = False,
) -> None:
    """Show one version of a model (the default one unless @VERSION or @ALIAS names another)."""
    from vertexdist.jobs.models import open_models

    with open_models(
        _place(project, location, endpoint, transport, emulator, emulator_data_dir, ref)
    ) as models:
        found = models.get(ref)
    if as_json:
        typer.echo(json.dumps(found, indent=2))
        return
    for line in model_lines(found):
        typer.echo(line)


def versions(
    ref: ModelRef,
    project: ModelProject = None,
    location: ModelLocation = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
    as_json: AsJson = False,
) -> None:
    """List every version of a model, oldest first, with its aliases."""
    from vertexdist.jobs.models import open_models

    with open_models(
        _place(project, location, endpoint, transport, emulator, emulator_data_dir, ref)
    ) as models:
        found = models.versions(ref)
    if as_json:
        typer.echo(json.dumps(found, indent=2))
        return
    if not found:
        typer.echo(f"no versions of {ref}", err=True)
    for line in version_table(found):
        typer.echo(line)


def download(
    ref: ModelRef,
    dest: Path = typer.Option(..., "--to", help="Copy the version's files into this folder."),
    project: ModelProject = None,
    location: ModelLocation = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
    as_json: AsJson = False,
) -> None:
    """Copy a model version's files (its artifactUri) into a folder; an interrupted copy resumes."""
    from vertexdist.cli.outputs_view import show_download
    from vertexdist.jobs.models import open_models

    with open_models(
        _place(project, location, endpoint, transport, emulator, emulator_data_dir, ref)
    ) as models:
        found = models.get(ref)
        source = models.files(found)
        files = source.files()
        if not files:
            raise UsageError(
                f"version {found.get('versionId')} of {found.get('name')} has no files under {source.uri}",
                hint="the job that made it wrote nothing to AIP_MODEL_DIR",
            )
        show_download(source, files, dest, as_json=as_json)


models_app.command("list")(list_models)
models_app.command("describe")(describe)
models_app.command("versions")(versions)
models_app.command("download")(download)


def register(app: typer.Typer) -> None:
    app.add_typer(models_app, name="models")
