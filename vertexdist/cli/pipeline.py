"""`vertexdist pipeline run|list|status|cancel|logs`: Vertex AI PipelineJobs (on Vertex or the emulator).

`run FILE.py|FILE.yaml` compiles the file's `@dsl.pipeline` function (or takes a compiled PipelineSpec) and
submits it through google-cloud-aiplatform; `--follow` prints each task's state as it changes. Needs the
`pipelines` extra (kfp) to compile. Exit codes: 0 fine (a followed run SUCCEEDED); 1 the run failed or a
call failed; 2 usage. `logs RUN [--task NAME] [--follow]` reads each task's lines from Cloud Logging
(`jobs.pipeline_logs`), on Vertex and on the emulator alike.
"""

from __future__ import annotations

import tempfile
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Annotated, Any

import typer

from vertexdist.cli.targets import EMULATOR_DATA_DIR, EmulatorDataDir, Endpoint, Transport, UseEmulator

pipeline_app = typer.Typer(
    help="Vertex AI Pipelines: run a KFP pipeline, follow it, list runs.", no_args_is_help=True
)
Project = Annotated[
    str | None, typer.Option("--project", help="Google Cloud project (default: GOOGLE_CLOUD_PROJECT).")
]
Location = Annotated[
    str | None,
    typer.Option("--location", help="Vertex region (default: GOOGLE_CLOUD_REGION, then us-central1)."),
]
RunName = Annotated[str, typer.Argument(help="The PipelineJob: its full resource name.")]


def _runs(
    project: str | None,
    location: str | None,
    endpoint: str | None,
    transport: str | None,
    emulator: bool,
    emulator_data_dir: Path,
) -> AbstractContextManager[Any]:
    from vertexdist.cli.jobs import place
    from vertexdist.jobs.where import open_project

    return open_project(place(project, location, endpoint, transport, emulator, emulator_data_dir))


def run(
    file: Path = typer.Argument(
        ..., help="A .py file with one @dsl.pipeline function, or a compiled .yaml/.json."
    ),
    param: list[str] = typer.Option([], "--param", help="A pipeline parameter, KEY=VALUE (repeatable)."),
    pipeline_root: str | None = typer.Option(
        None,
        "--pipeline-root",
        help="gs:// folder for the run's outputs (default: the spec's, if it has one).",
    ),
    experiment: str | None = typer.Option(
        None, "--experiment", help="Make the run a run of this experiment."
    ),
    no_cache: bool = typer.Option(False, "--no-cache", help="Run every task, reusing no earlier outputs."),
    follow: bool = typer.Option(False, "--follow", help="Print each task's state until the run ends."),
    project: Project = None,
    location: Location = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
) -> None:
    """Compile FILE (if it is Python) and submit it as a PipelineJob."""
    from vertexdist.jobs.pipeline_runs import PipelineRuns, compiled, parse_params

    params = parse_params(param)
    with tempfile.TemporaryDirectory(prefix="vertexdist-pipeline-") as scratch:
        templates: set[Path] = set()
        spec_file = compiled(file, Path(scratch), templates)
        with _runs(project, location, endpoint, transport, emulator, emulator_data_dir) as backend:
            runs = PipelineRuns(backend.target)
            for uri in runs.stage(templates):
                typer.echo(f"package staged {uri}")
            job = runs.submit(
                spec_file,
                params=params,
                pipeline_root=pipeline_root,
                enable_caching=False if no_cache else None,
                experiment=experiment,
            )
            typer.echo(f"submitted {job.resource_name}")
            if follow:
                state = runs.follow(job.resource_name, typer.echo)
                typer.echo(state)
                if state != "PIPELINE_STATE_SUCCEEDED":
                    raise typer.Exit(1)


def list_runs(
    project: Project = None,
    location: Location = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
) -> None:
    """List the project's PipelineJobs, newest first."""
    from vertexdist.jobs.pipeline_runs import PipelineRuns

    with _runs(project, location, endpoint, transport, emulator, emulator_data_dir) as backend:
        for job in PipelineRuns(backend.target).list():
            typer.echo(f"{job.state.name:<26} {job.display_name:<24} {job.resource_name}")


def status(
    name: RunName,
    project: Project = None,
    location: Location = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
) -> None:
    """A run's state and each task's state, times and CustomJob. Exits 1 when it failed or was cancelled."""
    from vertexdist.jobs.pipeline_runs import PipelineRuns, task_lines

    with _runs(project, location, endpoint, transport, emulator, emulator_data_dir) as backend:
        job = PipelineRuns(backend.target).get(name)
        typer.echo(f"{job.resource_name}: {job.state.name}")
        if job.gca_resource.error.message:
            typer.echo(f"error: {job.gca_resource.error.message}")
        for line in task_lines(job.gca_resource, {}):
            typer.echo(f"  {line}")
        if job.state.name in ("PIPELINE_STATE_FAILED", "PIPELINE_STATE_CANCELLED"):
            raise typer.Exit(1)


def cancel(
    name: RunName,
    project: Project = None,
    location: Location = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
) -> None:
    """Cancel a run: its running tasks stop, and no new task starts but exit handlers."""
    from vertexdist.jobs.pipeline_runs import PipelineRuns

    with _runs(project, location, endpoint, transport, emulator, emulator_data_dir) as backend:
        PipelineRuns(backend.target).get(name).cancel()
        typer.echo(f"cancelling {name}")


def logs(
    name: RunName,
    task: str | None = typer.Option(None, "--task", help="Only this task's lines (its name in the run)."),
    follow: bool = typer.Option(False, "--follow", help="Print lines as they come until the run ends."),
    project: Project = None,
    location: Location = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
) -> None:
    """Each task's log lines, prefixed by the task's name, from Cloud Logging (each task runs as a
    CustomJob; a training step's own CustomJob too). With --follow, exits 1 when the run did not succeed."""
    from google.protobuf import json_format

    from vertexdist.jobs.pipeline_logs import PipelineLogs
    from vertexdist.jobs.pipeline_runs import PipelineRuns

    with _runs(project, location, endpoint, transport, emulator, emulator_data_dir) as backend:
        runs = PipelineRuns(backend.target)

        def get() -> dict[str, Any]:
            found: dict[str, Any] = json_format.MessageToDict(runs.get(name).gca_resource._pb)
            return found

        state = PipelineLogs(backend.target, get).show(typer.echo, task=task, follow=follow)
        if follow and state != "PIPELINE_STATE_SUCCEEDED":
            typer.echo(state)
            raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    pipeline_app.command("run")(run)
    pipeline_app.command("list")(list_runs)
    pipeline_app.command("status")(status)
    pipeline_app.command("cancel")(cancel)
    pipeline_app.command("logs")(logs)
    app.add_typer(pipeline_app, name="pipeline")
