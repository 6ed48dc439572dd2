"""local-run's record of a job whose template has `experiment:`: the run it would be on Vertex, as JSON in
the run folder (`experiment_run.json`): its experiment and run names, params (the trainer's arguments),
final metrics and time series (the TensorBoard scalars it wrote under its output folder's `logs/`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vertexdist.tensorboard_scalars import read_scalars
from vertexdist.wire.experiment_run import job_run

EXPERIMENT_RUN = "experiment_run.json"


def experiment_record(job_spec: Mapping[str, Any], output_path: Path | None) -> dict[str, Any] | None:
    """The record, or None when the job names no experiment."""
    if job_run(job_spec) is None:
        return None
    series = read_scalars(output_path / "logs") if output_path is not None else {}
    run = job_run(job_spec, series)
    return run.to_record() if run is not None else None
