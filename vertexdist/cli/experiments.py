"""`vertexdist experiments list|runs EXPERIMENT [--json]`: Vertex AI Experiments, on Vertex or in the emulator
(`--emulator`, `--endpoint`), through the SDK (`aiplatform.Experiment.list`, `get_experiment_df`), at the
place `vertexdist models` looks (`jobs.where`); or with `--local`, local-run's `experiment_run.json`
records under the runs folder. The table is `experiments_view`'s. Exit codes: 0 fine; 1 the call failed;
2 usage.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer

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

experiments_app = typer.Typer(
    help="Vertex AI Experiments: their runs, with params and metrics.", no_args_is_help=True
)
ExpProject = Annotated[
    str | None,
    typer.Option(
        "--project", help="Google Cloud project of the experiments (default: GOOGLE_CLOUD_PROJECT)."
    ),
]
ExpLocation = Annotated[
    str | None,
    typer.Option("--location", help="Vertex region (default: GOOGLE_CLOUD_REGION, then us-central1)."),
]
UseLocal = Annotated[
    bool,
    typer.Option("--local", help="local-run's runs (experiment_run.json in the run folders under --runs)."),
]
RunsDir = Annotated[Path, typer.Option("--runs", help="The local runs folder, with --local (local-run's).")]
RUNS_DIR = Path(".vertexdist/runs")


def _place(
    project: str | None,
    location: str | None,
    endpoint: str | None,
    transport: str | None,
    emulator: bool,
    emulator_data_dir: Path,
    local: bool,
) -> JobPlace | None:
    """Where to look; None: the local runs folder."""
    if sum((emulator, bool(endpoint), local)) > 1:
        raise UsageError("--emulator, --endpoint and --local each say where to look", hint="keep one of them")
    if local:
        return None
    return JobPlace(project, location, endpoint, transport, emulator_data_dir if emulator else None)


def list_experiments(
    project: ExpProject = None,
    location: ExpLocation = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
    local: UseLocal = False,
    runs_dir: RunsDir = RUNS_DIR,
    as_json: AsJson = False,
) -> None:
    """List the experiments of a project and location (or of the local runs)."""
    place = _place(project, location, endpoint, transport, emulator, emulator_data_dir, local)
    if place is None:
        from vertexdist.jobs.experiments import local_experiments

        names, where = local_experiments(runs_dir), str(runs_dir)
    else:
        from vertexdist.jobs.experiments import open_experiments_at
        from vertexdist.jobs.registry_place import experiment_places

        with open_experiments_at(experiment_places(place, os.environ, None)) as readers:
            names = sorted({name for experiments in readers for name in experiments.names()})
            where = ", ".join(experiments.target.parent for experiments in readers)
    if as_json:
        typer.echo(json.dumps({"experiments": names}, indent=2))
        return
    if not names:
        typer.echo(f"no experiments in {where}", err=True)
    for name in names:
        typer.echo(name)


def runs(
    experiment: str = typer.Argument(..., help="The experiment's name."),
    project: ExpProject = None,
    location: ExpLocation = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
    local: UseLocal = False,
    runs_dir: RunsDir = RUNS_DIR,
    as_json: AsJson = False,
) -> None:
    """The runs of an experiment as a table: run_name, state, a param.X and a metric.X column each."""
    from vertexdist.cli.experiments_view import table

    place = _place(project, location, endpoint, transport, emulator, emulator_data_dir, local)
    found: list[dict[str, Any]]
    if place is None:
        from vertexdist.jobs.experiments import local_runs

        found = local_runs(runs_dir, experiment)
    else:
        from vertexdist.jobs.experiments import open_experiments_at
        from vertexdist.jobs.registry_place import experiment_places

        with open_experiments_at(experiment_places(place, os.environ, experiment)) as readers:
            found = [run for experiments in readers for run in experiments.runs(experiment)]
    if as_json:
        shown = [{k: v for k, v in run.items() if k != "time_series"} for run in found]
        typer.echo(json.dumps({"experiment": experiment, "runs": shown}, indent=2))
        return
    if not found:
        typer.echo(f"no runs in experiment {experiment}", err=True)
        return
    for line in table(found):
        typer.echo(line)


experiments_app.command("list")(list_experiments)
experiments_app.command("runs")(runs)


def register(app: typer.Typer) -> None:
    app.add_typer(experiments_app, name="experiments")
