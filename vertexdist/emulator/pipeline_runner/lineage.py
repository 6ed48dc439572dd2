"""A PipelineJob's record in ML Metadata, as Vertex writes it (the emulator's metadata store, `default`).

- a `system.Pipeline` context per pipeline name, and a `system.PipelineRun` context per run (its child),
  named in the job's `jobDetail.pipelineContext` and `jobDetail.pipelineRunContext`;
- in the run's context, a `system.Run` execution whose metadata holds the run's parameters as
  `input:NAME` (what google-cloud-aiplatform's `PipelineJob._query_experiment_row` reads as the run's
  params), its state following the run's;
- per task that ran, an execution (`system.ContainerExecution`) with its inputs and outputs, and each output
  artifact (its schema, URI and metadata: a `system.Metrics` artifact's metadata is the metrics the SDK
  shows) with an OUTPUT event from that execution and an INPUT event to each task that reads it: lineage.

`PipelineJob.submit(experiment=...)` then adds the run's context as a child of the experiment's, and
`aiplatform.get_experiment_df` lists it with its params and metrics.
"""

from __future__ import annotations

from typing import Any

from vertexdist.emulator.vertex.experiment_store import Resource, visible
from vertexdist.emulator.vertex.metadata import COLLECTIONS, MetadataApi

_VERSION = "v1"
_SCHEMA_VERSION = "0.0.1"
_STATES = {"SUCCEEDED": "COMPLETE", "FAILED": "FAILED", "CANCELLED": "CANCELLED", "RUNNING": "RUNNING"}


def _id(text: str) -> str:
    """A metadata id from a name (lower case letters, digits and hyphens, 128 at most; pure)."""
    cleaned = "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")
    return cleaned[:128] or "pipeline"


class PipelineLineage:
    """One project and location's pipeline records in the emulator's metadata store."""

    def __init__(self, metadata: MetadataApi) -> None:
        self.metadata = metadata
        self.store = metadata.store
        self.resources = metadata.resources

    def _ensure(self, parent: str, noun: str, ident: str, body: Resource) -> Resource:
        kind = COLLECTIONS[noun]
        name = f"{parent}/{noun}/{ident}"
        if self.store.get(name) is None:
            self.resources.create(parent, kind, body, {kind.id_param: ident}, _VERSION)
        return self.resources.need(name)

    def start(self, job_name: str, pipeline_name: str, parameters: dict[str, Any]) -> dict[str, Any]:
        """The run's contexts and `system.Run` execution, made; the `jobDetail` fields that name them."""
        parent = job_name.split("/pipelineJobs/")[0]
        store = f"{parent}/metadataStores/default"
        self._ensure(parent, "metadataStores", "default", {})
        pipeline = self._ensure(
            store,
            "contexts",
            _id(pipeline_name),
            {
                "displayName": pipeline_name,
                "schemaTitle": "system.Pipeline",
                "schemaVersion": _SCHEMA_VERSION,
            },
        )
        job_id = job_name.rsplit("/", 1)[1]
        run = self._ensure(
            store,
            "contexts",
            job_id,
            {
                "displayName": job_id,
                "schemaTitle": "system.PipelineRun",
                "schemaVersion": _SCHEMA_VERSION,
                "parentContexts": [pipeline["name"]],
                "metadata": {"pipeline_job_resource_name": job_name},
            },
        )
        self._execution(
            store,
            f"{job_id}-run",
            run["name"],
            {
                "displayName": job_id,
                "schemaTitle": "system.Run",
                "schemaVersion": _SCHEMA_VERSION,
                "state": "RUNNING",
                "metadata": {f"input:{k}": v for k, v in parameters.items()},
            },
        )
        return {
            "pipelineContext": visible(pipeline),
            "pipelineRunContext": visible(self.store.get(run["name"]) or run),
        }

    def _execution(self, store: str, ident: str, context: str, body: Resource) -> str:
        execution = self._ensure(store, "executions", ident, body)
        self.store.update(
            execution["name"], lambda r: r.update(_contexts=sorted({*r.get("_contexts", []), context}))
        )
        return str(execution["name"])

    def task(
        self,
        run_context: str,
        task_name: str,
        task_id: str,
        state: str,
        parameters: dict[str, Any],
        inputs: dict[str, list[dict[str, Any]]],
        outputs: dict[str, list[dict[str, Any]]],
    ) -> None:
        """A task's execution, its output artifacts, and the events that tie them (lineage)."""
        store = run_context.split("/contexts/")[0]
        execution = self._execution(
            store,
            task_id,
            run_context,
            {
                "displayName": task_name,
                "schemaTitle": "system.ContainerExecution",
                "schemaVersion": _SCHEMA_VERSION,
                "state": _STATES.get(state, "COMPLETE"),
                "metadata": {f"input:{k}": v for k, v in parameters.items()},
            },
        )
        events: list[dict[str, Any]] = []
        for kind, listed in (("INPUT", inputs), ("OUTPUT", outputs)):
            for key, artifacts in listed.items():
                for artifact in artifacts:
                    name = self._artifact(store, run_context, artifact)
                    events.append({"artifact": name, "type": kind, "labels": {"key": key}})
        if events:
            self.metadata._add_events(execution, {"events": events})

    def _artifact(self, store: str, run_context: str, artifact: dict[str, Any]) -> str:
        """The artifact with that URI (made once; a later task's reading of it links to the same one)."""
        uri = str(artifact.get("uri", ""))
        ident = _id(uri.removeprefix("gs://"))[-128:].strip("-") or "artifact"
        kind = artifact.get("type", {})
        made = self._ensure(
            store,
            "artifacts",
            ident,
            {
                "displayName": str(artifact.get("name") or uri.rsplit("/", 1)[-1]),
                "uri": uri,
                "state": "LIVE",
                "schemaTitle": kind.get("schemaTitle", "system.Artifact"),
                "schemaVersion": kind.get("schemaVersion", _SCHEMA_VERSION),
                "metadata": dict(artifact.get("metadata") or {}),
            },
        )
        self.store.update(
            made["name"], lambda r: r.update(_contexts=sorted({*r.get("_contexts", []), run_context}))
        )
        return str(made["name"])

    def finish(self, run_context: str, state: str) -> None:
        store = run_context.split("/contexts/")[0]
        job_id = run_context.rsplit("/", 1)[1]
        name = f"{store}/executions/{job_id}-run"
        if self.store.get(name) is not None:
            self.store.update(name, lambda r: r.update(state=_STATES.get(state, "COMPLETE")))
