"""`vertexdist trials JOB`: a HyperparameterTuningJob's trials as a table (parameters, state, final metric),
the best one marked; `--json` prints them in Vertex's trial shape with `best` added.

Against Vertex or the emulator (VERTEX_API_ENDPOINT / --endpoint), like `status`. Exits 1 when the job
failed or was cancelled, as `status` does.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from vertexdist.cli.jobs import place
from vertexdist.cli.targets import (
    EMULATOR_DATA_DIR,
    AsJson,
    EmulatorDataDir,
    Endpoint,
    JobLocation,
    JobProject,
    Transport,
    UseEmulator,
)
from vertexdist.jobs.where import open_job

if TYPE_CHECKING:
    from vertexdist.backends.base import TuningStatus
    from vertexdist.wire.trials import Trial

FAILED_STATES = frozenset({"FAILED", "CANCELLED", "EXPIRED"})
TuningJobRef = Annotated[
    str,
    typer.Argument(
        help="Tuning job name (projects/P/locations/L/hyperparameterTuningJobs/ID) or its ID; or a local-run"
        " tuning job id (local-...) or run folder."
    ),
]


def _value(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return "" if value is None else str(value)


def trial_rows(found: TuningStatus) -> tuple[list[str], list[list[str]]]:
    """The table's header and rows: one row per trial, the best one's id marked with `*`."""
    study = found.study
    metric = study.objective.id if study else "metric"
    names = [p.id for p in study.parameters] if study else []
    for trial in found.trials:  # conditional parameters show up as they appear
        names += [pid for pid, _ in trial.parameters if pid not in names]
    best = found.best
    header = ["trial", "state", *names, metric, "step"]
    rows = []
    for trial in found.trials:
        values = trial.parameter_values
        final = trial.final_measurement
        rows.append(
            [
                trial.id + (" *" if best is not None and trial.id == best.id else ""),
                trial.state,
                *(_value(values.get(name)) for name in names),
                _value(final.values.get(metric) if final else None),
                "" if final is None else str(final.step),
            ]
        )
    return header, rows


def table_lines(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in [header, *rows]]  # fmt: skip


def trial_json(trial: Trial, best: bool) -> dict[str, object]:
    from vertexdist.wire.trials import trial_to_json

    return {**trial_to_json(trial), "best": best}


def trials(
    job: TuningJobRef,
    project: JobProject = None,
    location: JobLocation = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
    as_json: AsJson = False,
) -> None:
    """Show a tuning job's trials: parameters, state, final metric; the best marked with *."""
    at = place(project, location, endpoint, transport, emulator, emulator_data_dir)
    with open_job(job, at) as (backend, name):
        found = backend.tuning_status(name)
    best = found.best
    if as_json:
        typer.echo(
            json.dumps([trial_json(t, best is not None and t.id == best.id) for t in found.trials], indent=2)
        )
    else:
        status = found.status
        typer.echo(f"{status.name}  {status.state}  {len(found.trials)} trials")
        if found.trials:
            typer.echo("\n".join(table_lines(*trial_rows(found))))
        if best is not None and found.study is not None:
            value = (
                best.final_measurement.values.get(found.study.objective.id)
                if best.final_measurement
                else None
            )
            typer.echo(f"best: trial {best.id} ({found.study.objective.id} {_value(value)})")
        from vertexdist.cli.tuning_view import failure_lines

        for line in failure_lines(found.trials):  # why each failed trial failed: its replica's last lines
            typer.echo(line)
        if status.error:
            typer.echo(f"error: {status.error}", err=True)
    if found.status.state in FAILED_STATES:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("trials")(trials)
