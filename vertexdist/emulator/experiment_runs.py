"""A finished job as a run of a Vertex AI Experiment, written into the emulator's metadata and TensorBoard
store the way the SDK writes a run (`aiplatform.start_run` ... `end_run`), so the SDK reads it back:
`ExperimentRun(...).get_params()`, `get_metrics()`, `get_time_series_data_frame()`, `get_experiment_df()`.

A job is a run when its CustomJobSpec names `experiment` (and maybe `experimentRun`), the context names
`CustomJob.run(experiment=..., experiment_run=...)` and a template's `experiment:` put there. Its params are
the trainer's arguments (`--name=value` / `--name value`; a tuning trial's parameters come this way too),
its time series the TensorBoard scalars it wrote under `<base output dir>/logs` (AIP_TENSORBOARD_LOG_DIR),
and its final metrics each series' last value.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vertexdist.emulator.experiment_store import Collection, ExperimentStore, Resource, Resources
from vertexdist.emulator.metadata_api import COLLECTIONS as METADATA
from vertexdist.emulator.tensorboard_api import COLLECTIONS as TENSORBOARD
from vertexdist.wire.gcs_uri import is_gs_uri, local_gs_path
from vertexdist.wire.proto_json import now_rfc3339

Param = str | int | float
_CONTEXT = re.compile(r"^(projects/[^/]+/locations/[^/]+)/metadataStores/([^/]+)/contexts/([^/]+)$")
_NUMBER = re.compile(r"^-?\d+(\.\d*)?([eE][-+]?\d+)?$")
_VERSION = "v1"
_SCHEMA_VERSION = "0.0.1"
_log = logging.getLogger(__name__)
_SOURCE_LABEL = "vertex_tensorboard_experiment_source"
TB_RUN_SUFFIX = "-tb-run"  # the SDK's _TB_RUN_ARTIFACT_POST_FIX_ID


@dataclass(frozen=True)
class JobRun:
    """What a job logs: its experiment's and run's names and what it measured."""

    parent: str  # projects/P/locations/L
    experiment: str
    run: str
    params: dict[str, Param] = field(default_factory=dict)
    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)

    @property
    def metrics(self) -> dict[str, float]:
        return {tag: points[-1][1] for tag, points in self.series.items() if points}


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


def trainer_args(job_spec: dict[str, Any]) -> list[str]:
    """The first worker pool's arguments (Python package or container)."""
    pools = job_spec.get("workerPoolSpecs") or [{}]
    pool = pools[0] or {}
    found = (pool.get("pythonPackageSpec") or pool.get("containerSpec") or {}).get("args") or []
    return [str(a) for a in found]


def read_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar tag under `folder`'s TensorBoard event files, by step (the last write of a step wins);
    tags of runs in subfolders are prefixed with their folder."""
    if not folder.is_dir():
        return {}
    from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

    multiplexer = EventMultiplexer(size_guidance={"scalars": 0})
    multiplexer.AddRunsFromDirectory(str(folder))
    multiplexer.Reload()
    found: dict[str, list[tuple[int, float]]] = {}
    for run, tags in sorted(multiplexer.Runs().items()):
        for tag in sorted(tags.get("scalars", [])):
            by_step = {
                int(e.step): float(e.value) for e in multiplexer.Scalars(run, tag) if math.isfinite(e.value)
            }
            if by_step:
                found[tag if run == "." else f"{run}/{tag}"] = sorted(by_step.items())
    return found


def job_run(job_spec: dict[str, Any], gcs_root: Path | None) -> JobRun | None:
    """The run a finished job makes, or None when its spec names no experiment. `gcs_root` holds the
    buckets' local copies (the job's output folder is read there); without `experimentRun` the run is named
    after the job's output folder (and a trial's id), one run per job and per trial."""
    match = _CONTEXT.match(str(job_spec.get("experiment") or ""))
    if match is None:
        return None
    parent, experiment = match.group(1), match.group(3)
    run_match = _CONTEXT.match(str(job_spec.get("experimentRun") or ""))
    output = str((job_spec.get("baseOutputDirectory") or {}).get("outputUriPrefix") or "").rstrip("/")
    folders = output.split("/")
    # A tuning trial's folder is its job's folder + /TRIAL_ID: the run is named by both.
    name = "-".join(folders[-2:]) if folders[-1].isdigit() else folders[-1]
    default_run = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-") or "run"
    run = run_match.group(3).removeprefix(f"{experiment}-") if run_match else default_run
    local = local_gs_path(output, gcs_root) if gcs_root is not None and is_gs_uri(output) else None
    series = read_scalars(local / "logs") if local is not None else {}
    return JobRun(parent, experiment, run, params_from_args(trainer_args(job_spec)), series)


class RunRecorder:
    """Writes `JobRun`s into an `ExperimentStore` as the SDK's records of an experiment run."""

    def __init__(self, store: ExperimentStore) -> None:
        self.store = store
        self.resources = Resources(store)

    def _ensure(self, parent: str, kind: Collection, ident: str, body: Resource) -> Resource:
        name = f"{parent}/{kind.noun}/{ident}"
        found = self.store.get(name)
        if found is not None:
            return found
        self.resources.create(parent, kind, body, {kind.id_param: ident}, _VERSION)
        return self.resources.need(name)

    def _tensorboard(self, parent: str, experiment: Resource) -> str:
        backing = (experiment.get("metadata") or {}).get("backing_tensorboard_resource")
        if isinstance(backing, str) and self.store.get(backing) is not None:
            return backing
        for board in self.store.children(parent, "tensorboards"):
            if board.get("isDefault"):
                return str(board["name"])
        created = self.resources.create(
            parent,
            TENSORBOARD["tensorboards"],
            {"displayName": "Default Tensorboard", "isDefault": True},
            {},
            _VERSION,
        )
        return str(created["response"]["name"])

    def record(self, run: JobRun) -> str:
        """Create (or complete) the run; returns its context's name."""
        store = f"{run.parent}/metadataStores/default"
        self._ensure(run.parent, METADATA["metadataStores"], "default", {})
        experiment = self._ensure(
            store,
            METADATA["contexts"],
            run.experiment,
            {
                "displayName": run.experiment,
                "schemaTitle": "system.Experiment",
                "schemaVersion": _SCHEMA_VERSION,
                "metadata": {"experiment_deleted": False},
            },
        )
        board = self._tensorboard(run.parent, experiment)
        if not (experiment.get("metadata") or {}).get("backing_tensorboard_resource"):
            self.store.update(
                experiment["name"],
                lambda r: r.setdefault("metadata", {}).update(backing_tensorboard_resource=board),
            )
        tb_experiment = self._ensure(
            board,
            TENSORBOARD["experiments"],
            run.experiment,
            {
                "displayName": run.experiment,
                "labels": {"vertex_tensorboard_experiment_source": "vertex_experiment"},
            },
        )
        tb_run = self._ensure(tb_experiment["name"], TENSORBOARD["runs"], run.run, {"displayName": run.run})
        context_id = f"{run.experiment}-{run.run}"
        context = self._ensure(
            store,
            METADATA["contexts"],
            context_id,
            {"displayName": run.run, "schemaTitle": "system.ExperimentRun", "schemaVersion": _SCHEMA_VERSION},
        )
        params, metrics = dict(run.params), run.metrics

        def complete(resource: Resource) -> None:
            metadata = resource.setdefault("metadata", {})
            metadata["_params"] = {**(metadata.get("_params") or {}), **params}
            metadata["_metrics"] = {**(metadata.get("_metrics") or {}), **metrics}
            metadata["_state"] = "COMPLETE"
            parents = resource.setdefault("parentContexts", [])
            if experiment["name"] not in parents:
                parents.append(experiment["name"])

        self.store.update(context["name"], complete)
        artifact = self._ensure(
            store,
            METADATA["artifacts"],
            context_id + TB_RUN_SUFFIX,
            {
                "uri": f"https://us-central1-aiplatform.googleapis.com/v1/{tb_run['name']}",
                "state": "LIVE",
                "schemaTitle": "google.VertexTensorboardRun",
                "schemaVersion": _SCHEMA_VERSION,
                "metadata": {"resourceName": tb_run["name"], "vertex_experiment_tracking": True},
            },
        )
        self.store.update(
            artifact["name"],
            lambda r: r.update(_contexts=sorted({*r.get("_contexts", []), context["name"]})),
        )
        self._write_series(tb_run["name"], run.series)
        return str(context["name"])

    def _write_series(self, tb_run: str, series: dict[str, list[tuple[int, float]]]) -> None:
        existing = {s.get("displayName"): s["name"] for s in self.store.children(tb_run, "timeSeries")}
        stamp = now_rfc3339()
        for tag, points in series.items():
            name = existing.get(tag)
            if name is None:
                created = self.resources.create(
                    tb_run,
                    TENSORBOARD["timeSeries"],
                    {"displayName": tag, "valueType": "SCALAR", "pluginName": "scalars"},
                    {},
                    _VERSION,
                )
                name = created["name"]
            values = [{"step": str(step), "wallTime": stamp, "scalar": {"value": v}} for step, v in points]
            self.store.update(name, _set_points(values))


def _set_points(values: list[dict[str, Any]]) -> Callable[[Resource], None]:
    def put(series: Resource) -> None:
        series["_points"] = values

    return put


def log_experiment_run(store: ExperimentStore, job_spec: dict[str, Any], gcs_root: Path) -> str | None:
    """Log a finished job whose spec names an experiment as its run (None when it names none). A failure
    here is logged, never the job's: the job did what it was asked."""
    try:
        run = job_run(job_spec, gcs_root)
        return RunRecorder(store).record(run) if run is not None else None
    except Exception as exc:
        _log.warning("logging the job as a run of experiment %s failed: %r", job_spec.get("experiment"), exc)
        return None
