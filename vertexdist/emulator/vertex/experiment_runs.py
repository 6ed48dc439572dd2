"""A finished job as a run of a Vertex AI Experiment, written into the emulator's metadata and TensorBoard
store the way the SDK writes a run (`aiplatform.start_run` ... `end_run`), so the SDK reads it back:
`ExperimentRun(...).get_params()`, `get_metrics()`, `get_time_series_data_frame()`, `get_experiment_df()`.
Which run, and what it logs, is `wire.experiment_run`'s; the scalars are read from the job's output folder
`logs/` (AIP_TENSORBOARD_LOG_DIR) in the buckets' local copies.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from vertexdist.emulator.vertex.experiment_store import Collection, ExperimentStore, Resource, Resources
from vertexdist.emulator.vertex.metadata import COLLECTIONS as METADATA
from vertexdist.emulator.vertex.tensorboard import COLLECTIONS as TENSORBOARD
from vertexdist.tensorboard_scalars import read_scalars
from vertexdist.wire.experiment_run import JobRun, job_run, output_uri
from vertexdist.wire.gcs_uri import is_gs_uri, local_gs_path
from vertexdist.wire.proto_json import now_rfc3339

_log = logging.getLogger(__name__)
_VERSION = "v1"
_SCHEMA_VERSION = "0.0.1"
_SOURCE_LABEL = "vertex_tensorboard_experiment_source"
TB_RUN_SUFFIX = "-tb-run"  # the SDK's _TB_RUN_ARTIFACT_POST_FIX_ID


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
            self.store.points.replace(name, values)


def log_experiment_run(store: ExperimentStore, job_spec: dict[str, Any], gcs_root: Path) -> str | None:
    """Log a finished job whose spec names an experiment as its run (None when it names none). A failure
    here is logged, never the job's: the job did what it was asked."""
    try:
        output = output_uri(job_spec)
        local = local_gs_path(output, gcs_root) if is_gs_uri(output) else None
        run = job_run(job_spec, read_scalars(local / "logs") if local is not None else {})
        return RunRecorder(store).record(run) if run is not None else None
    except Exception as exc:
        _log.warning("logging the job as a run of experiment %s failed: %r", job_spec.get("experiment"), exc)
        return None
