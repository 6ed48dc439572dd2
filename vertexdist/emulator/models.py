"""The part of Vertex's Model Registry that custom training touches (ModelService Get/List/Delete).

https://cloud.google.com/vertex-ai/docs/reference/rest/v1/projects.locations.models: a TrainingPipeline
with `modelToUpload` creates, once its job succeeds, a Model whose `artifactUri` is the job's
`baseOutputDirectory` + `/model` (where AIP_MODEL_DIR pointed), then names it in `modelToUpload.name`
(+ `versionId`) and `modelId`. With `parentModel` the model is a new version of that one
(https://cloud.google.com/vertex-ai/docs/model-registry/versioning): the next version id, its aliases
(an alias, `default` too, moves to the new version). `models/ID` reads the default version, `models/ID@2`
or `models/ID@alias` one version; a model is stored once with its versions (`_versions`).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from typing import Any

from vertexdist.emulator.store import JobStore, Resource, new_id
from vertexdist.errors import VertexdistError
from vertexdist.wire.proto_json import now_rfc3339

VERSIONS_KEY = "_versions"
DEFAULT_ALIAS = "default"


def model_dir(job_spec: dict[str, Any]) -> str | None:
    """`{baseOutputDirectory}/model`: the folder AIP_MODEL_DIR named for the job's replicas."""
    prefix = ((job_spec.get("baseOutputDirectory") or {}).get("outputUriPrefix") or "").rstrip("/")
    return f"{prefix}/model" if prefix else None


def split_version(name: str) -> tuple[str, str | None]:
    """`.../models/ID@2` -> (`.../models/ID`, `2`); `@alias` likewise; no `@` -> (name, None)."""
    base, at, ref = name.rpartition("@")
    return (base, ref) if at and "/" not in ref else (name, None)


def model_version(pipeline: Resource, job: Resource, name: str, version_id: str) -> Resource:
    """One version of the Model a succeeded pipeline uploads (pure): `modelToUpload`, the model folder."""
    wanted = dict(pipeline.get("modelToUpload") or {})
    stamp = now_rfc3339()
    aliases = [str(a) for a in wanted.get("versionAliases") or []]
    if version_id == "1" and DEFAULT_ALIAS not in aliases:
        aliases.insert(0, DEFAULT_ALIAS)  # a model's first version is its default
    model: Resource = {
        "name": name,
        "displayName": wanted.get("displayName") or pipeline.get("displayName", ""),
        "versionId": version_id,
        "versionAliases": aliases,
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


def with_version(family: Resource | None, version: Resource) -> Resource:
    """The stored model after adding `version` (pure): its aliases taken from older versions, the
    top-level fields those of the default version."""
    versions = [copy.deepcopy(v) for v in (family or {}).get(VERSIONS_KEY, [])]
    for older in versions:
        older["versionAliases"] = [a for a in older["versionAliases"] if a not in version["versionAliases"]]
    versions.append(version)
    default = next(v for v in reversed(versions) if DEFAULT_ALIAS in v["versionAliases"])
    stored = copy.deepcopy(default)
    if family is not None:
        stored["createTime"] = family["createTime"]
    stored[VERSIONS_KEY] = versions
    return stored


def version_of(family: Resource, ref: str | None) -> Resource | None:
    """The version `ref` (an id or an alias) names, the default one for None (pure, internal keys out)."""
    if ref is None:
        return {k: v for k, v in family.items() if k != VERSIONS_KEY}
    for version in family.get(VERSIONS_KEY, []):
        if ref == version["versionId"] or ref in version["versionAliases"]:
            return {**version, "createTime": family["createTime"]}
    return None


class ModelRegistry:
    """Models in the job store (persisted like jobs). `publish(artifact_uri)` makes the files the job wrote
    under its local Cloud Storage folder readable at the model's URI through the storage API too."""

    def __init__(self, store: JobStore, publish: Callable[[str], object] | None = None) -> None:
        self._store = store
        self._publish = publish

    def upload_for_pipeline(self, pipeline: Resource, job: Resource) -> dict[str, Any]:
        """Create the pipeline's model (or version); the fields the pipeline gets: `modelToUpload` named
        and versioned, `modelId`. A pipeline without `modelToUpload` uploads nothing and gets nothing."""
        if not pipeline.get("modelToUpload"):
            return {}
        parent_model = split_version(str(pipeline.get("parentModel") or ""))[0] or None
        family = self._store.get(parent_model) if parent_model else None
        if family is not None:
            name = family["name"]
            version_id = str(1 + max(int(v["versionId"]) for v in family.get(VERSIONS_KEY, [family])))
        else:
            location = pipeline["name"].split("/trainingPipelines/")[0]
            name, version_id = f"{location}/models/{pipeline.get('modelId') or new_id()}", "1"
        version = model_version(pipeline, job, name, version_id)
        stored = with_version(family, version)
        if family is None:
            self._store.insert(stored)
        else:

            def replace_all(current: Resource) -> None:
                current.clear()
                current.update(stored)

            self._store.update(name, replace_all)
        if self._publish is not None and version.get("artifactUri"):
            # The model exists whatever the copy does; a storage hiccup must not fail a finished job.
            with contextlib.suppress(OSError, VertexdistError):
                self._publish(str(version["artifactUri"]))
        uploaded = {**dict(pipeline.get("modelToUpload") or {}), "name": name, "versionId": version_id}
        return {"modelToUpload": uploaded, "modelId": name.rsplit("/", 1)[1]}

    def get(self, name: str) -> Resource | None:
        base, ref = split_version(name)
        family = self._store.get(base)
        return version_of(family, ref) if family is not None else None

    def delete(self, name: str) -> Resource | None:
        return self._store.delete(split_version(name)[0])
