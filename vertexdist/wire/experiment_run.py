"""A finished job as a run of a Vertex AI Experiment (pure): which experiment and run its CustomJobSpec names
(`experiment`, `experimentRun`: what `CustomJob.run(experiment=..., experiment_run=...)` and a template's
`experiment:` put there), its params (the trainer's arguments: `--name=value`, `--name value`, `--flag`;
a tuning trial's parameters come this way too), its time series (TensorBoard scalars, read elsewhere) and
its final metrics (each series' last value). The emulator writes it into its metadata store
(`emulator.vertex.experiment_runs`); local-run into the run folder (`to_record`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Param = str | int | float
Series = dict[str, list[tuple[int, float]]]
_CONTEXT = re.compile(r"^(projects/[^/]+/locations/[^/]+)/metadataStores/([^/]+)/contexts/([^/]+)$")
_NUMBER = re.compile(r"^-?\d+(\.\d*)?([eE][-+]?\d+)?$")


@dataclass(frozen=True)
class JobRun:
    """What a job logs: its experiment's and run's names and what it measured."""

    parent: str  # projects/P/locations/L
    experiment: str
    run: str
    params: dict[str, Param] = field(default_factory=dict)
    series: Series = field(default_factory=dict)

    @property
    def metrics(self) -> dict[str, float]:
        return {tag: points[-1][1] for tag, points in self.series.items() if points}

    def to_record(self) -> dict[str, Any]:
        """The run as JSON: names, params, metrics and the time series as [step, value] pairs."""
        return {
            "experiment": self.experiment,
            "experiment_run": self.run,
            "run_context": f"{self.parent}/metadataStores/default/contexts/{self.experiment}-{self.run}",
            "params": self.params,
            "metrics": self.metrics,
            "time_series": {tag: [list(p) for p in points] for tag, points in self.series.items()},
        }


def _value(text: str) -> Param:
    if _NUMBER.match(text):
        return int(text) if text.lstrip("-").isdigit() else float(text)
    return text


def params_from_args(args: list[str]) -> dict[str, Param]:
    """`--name=value`, `--name value` and `--flag` (as "true") of a trainer's arguments; the rest is no
    param. A name given twice keeps its last value, as argparse does."""
    params: dict[str, Param] = {}
    at = 0
    while at < len(args):
        arg = args[at]
        at += 1
        if not arg.startswith("--") or arg == "--":
            continue
        name, eq, value = arg[2:].partition("=")
        if not eq:
            if at < len(args) and not args[at].startswith("--"):
                value, at = args[at], at + 1
            else:
                value = "true"
        if name:
            params[name.replace("-", "_")] = _value(value)
    return params


def trainer_args(job_spec: Mapping[str, Any]) -> list[str]:
    """The first worker pool's arguments (Python package or container)."""
    pools = job_spec.get("workerPoolSpecs") or [{}]
    pool = pools[0] or {}
    found = (pool.get("pythonPackageSpec") or pool.get("containerSpec") or {}).get("args") or []
    return [str(a) for a in found]


def output_uri(job_spec: Mapping[str, Any]) -> str:
    return str((job_spec.get("baseOutputDirectory") or {}).get("outputUriPrefix") or "").rstrip("/")


def job_run(job_spec: Mapping[str, Any], series: Series | None = None) -> JobRun | None:
    """The run a finished job makes, or None when its spec names no experiment. Without `experimentRun`
    the run is named after the job's output folder (and a trial's id), one run per job and per trial."""
    match = _CONTEXT.match(str(job_spec.get("experiment") or ""))
    if match is None:
        return None
    parent, experiment = match.group(1), match.group(3)
    run_match = _CONTEXT.match(str(job_spec.get("experimentRun") or ""))
    folders = output_uri(job_spec).split("/")
    # A tuning trial's folder is its job's folder + /TRIAL_ID: the run is named by both.
    name = "-".join(folders[-2:]) if folders[-1].isdigit() else folders[-1]
    default_run = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-") or "run"
    run = run_match.group(3).removeprefix(f"{experiment}-") if run_match else default_run
    return JobRun(parent, experiment, run, params_from_args(trainer_args(job_spec)), dict(series or {}))
