"""The part of Vertex's Model Registry that custom training touches (ModelService Get/List/Delete).

https://cloud.google.com/vertex-ai/docs/reference/rest/v1/projects.locations.models: a TrainingPipeline
with `modelToUpload` creates, once its job succeeds, a Model whose `artifactUri` is the job's
`baseOutputDirectory` + `/model` (where AIP_MODEL_DIR pointed), then names it in `modelToUpload.name`
and `modelId`. Models are version 1 with the `default` alias (parentModel versions are not emulated).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from typing import Any

from vertexdist.emulator.store import JobStore, Resource, new_id
from vertexdist.errors import VertexdistError
from vertexdist.wire.proto_json import now_rfc3339

_VERSION_SUFFIX = re.compile(r"@[^/@]+$")


def model_dir(job_spec: dict[str, Any]) -> str | None:
    """`{baseOutputDirectory}/model`: the folder AIP_MODEL_DIR named for the job's replicas."""
    prefix = ((job_spec.get("baseOutputDirectory") or {}).get("outputUriPrefix") or "").rstrip("/")
    return f"{prefix}/model" if prefix else None


def without_version(name: str) -> str:
    """`.../models/ID@1` or `.../models/ID@default` names the model `.../models/ID` (one version here)."""
    return _VERSION_SUFFIX.sub("", name)


def model_resource(pipeline: Resource, job: Resource, model_id: str | None = None) -> Resource:
    """The Model a succeeded pipeline uploads (pure): its `modelToUpload`, the job's model folder."""
    wanted = dict(pipeline.get("modelToUpload") or {})
    parent = pipeline["name"].split("/trainingPipelines/")[0]
    stamp = now_rfc3339()
    model: Resource = {
        "name": f"{parent}/models/{model_id or new_id()}",
        "displayName": wanted.get("displayName") or pipeline.get("displayName", ""),
        "versionId": "1",
        "versionAliases": ["default"],
        "versionCreateTime": stamp,
        "versionUpdateTime": stamp,
        "createTime": stamp,
        "updateTime": stamp,
        "trainingPipeline": pipeline["name"],
        "labels": dict(wanted.get("labels") or {}),
        "supportedDeploymentResourcesTypes": ["DEDICATED_RESOURCES"],
        "modelSourceInfo": {"sourceType": "CUSTOM"},
        "etag": new_id(),
    }
    for copied in ("description", "versionDescription", "containerSpec", "predictSchemata", "metadata"):
        if copied in wanted:
            model[copied] = wanted[copied]
    artifacts = wanted.get("artifactUri") or model_dir(job.get("jobSpec") or {})
    if artifacts:
        model["artifactUri"] = artifacts
    return model


class ModelRegistry:
    """Models in the job store (persisted like jobs). `publish(artifact_uri)` makes the files the job wrote
    under its local Cloud Storage folder readable at the model's URI through the storage API too."""

    def __init__(self, store: JobStore, publish: Callable[[str], object] | None = None) -> None:
        self._store = store
        self._publish = publish

    def upload_for_pipeline(self, pipeline: Resource, job: Resource) -> dict[str, Any]:
        """Create the pipeline's model; the fields the pipeline gets: `modelToUpload` named, `modelId`.
        A pipeline without `modelToUpload` uploads nothing and gets nothing."""
        if not pipeline.get("modelToUpload"):
            return {}
        wanted_id = pipeline.get("modelId") or None
        model = self._store.insert(model_resource(pipeline, job, wanted_id))
        if self._publish is not None and model.get("artifactUri"):
            # The model exists whatever the copy does; a storage hiccup must not fail a finished job.
            with contextlib.suppress(OSError, VertexdistError):
                self._publish(str(model["artifactUri"]))
        uploaded = {
            **dict(pipeline.get("modelToUpload") or {}),
            "name": model["name"],
            "versionId": model["versionId"],
        }
        return {"modelToUpload": uploaded, "modelId": model["name"].rsplit("/", 1)[1]}

    def get(self, name: str) -> Resource | None:
        return self._store.get(without_version(name))

    def list(self, parent: str) -> list[Resource]:
        return self._store.list(parent, "models")

    def delete(self, name: str) -> Resource | None:
        return self._store.delete(without_version(name))
