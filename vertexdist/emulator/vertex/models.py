"""Vertex's Model Registry (ModelService): upload, get, list, listVersions, mergeVersionAliases, patch,
deleteVersion and delete, on one store that pipelines' uploads share.

https://cloud.google.com/vertex-ai/docs/reference/rest/v1/projects.locations.models: a TrainingPipeline
with `modelToUpload` creates, once its job succeeds, a Model whose `artifactUri` is the job's
`baseOutputDirectory` + `/model` (where AIP_MODEL_DIR pointed), then names it in `modelToUpload.name`
(+ `versionId`) and `modelId`; `models:upload` does the same from an UploadModelRequest. With `parentModel`
the model is a new version of that one (https://cloud.google.com/vertex-ai/docs/model-registry/versioning):
the next version id, its aliases (an alias, `default` too, is on one version at a time, so it moves to the
new one). `models/ID` reads the default version, `models/ID@2` or `models/ID@alias` one version; a model is
stored once with its versions (`_versions`), its top-level fields those of the default version.
"""

from __future__ import annotations

import contextlib
import copy
import re
from collections.abc import Callable, Iterable
from typing import Any

from vertexdist.emulator.store import JobStore, Resource, new_id
from vertexdist.emulator.vertex.jobs import ApiError
from vertexdist.errors import VertexdistError
from vertexdist.wire.model_shapes import aliases_problem, model_problems, one_message, upload_problems
from vertexdist.wire.proto_json import now_rfc3339

VERSIONS_KEY = "_versions"
DEFAULT_ALIAS = "default"
# MergeVersionAliasesRequest.version_aliases: at most 128 characters, this pattern; never a number.
_ALIAS = re.compile(r"^[a-z][a-zA-Z0-9-]{0,126}[a-z0-9-]$")
# Fields of the model as a whole (a patch of them reaches every version); the rest belong to a version.
MODEL_FIELDS = ("displayName", "description")
PATCHABLE = ("displayName", "description", "labels", "versionDescription")
_COPIED = (
    "description",
    "versionDescription",
    "containerSpec",
    "predictSchemata",
    "metadata",
    "metadataSchemaUri",
)


def model_dir(job_spec: dict[str, Any]) -> str | None:
    """`{baseOutputDirectory}/model`: the folder AIP_MODEL_DIR named for the job's replicas."""
    prefix = ((job_spec.get("baseOutputDirectory") or {}).get("outputUriPrefix") or "").rstrip("/")
    return f"{prefix}/model" if prefix else None


def split_version(name: str) -> tuple[str, str | None]:
    """`.../models/ID@2` -> (`.../models/ID`, `2`); `@alias` likewise; no `@` -> (name, None)."""
    base, at, ref = name.rpartition("@")
    return (base, ref) if at and "/" not in ref else (name, None)


def check_aliases(aliases: Iterable[str], *, signed: bool = False) -> None:
    """Refuse what Vertex refuses in `versionAliases` (a `-` prefix allowed when `signed`)."""
    for alias in aliases:
        bare = alias[1:] if signed and alias.startswith("-") else alias
        if not _ALIAS.match(bare):
            raise ApiError.invalid(
                f"version alias {alias!r} must match [a-z][a-zA-Z0-9-]{{0,126}}[a-z0-9-] (at most 128"
                " characters, starting with a lowercase letter)"
            )


def new_version(wanted: Resource, name: str, version_id: str, display_name: str) -> Resource:
    """One version of a Model from the Model the caller asked for (pure); the first version is the default."""
    stamp = now_rfc3339()
    aliases = [str(a) for a in wanted.get("versionAliases") or []]
    check_aliases(aliases)
    if version_id == "1" and DEFAULT_ALIAS not in aliases:
        aliases.insert(0, DEFAULT_ALIAS)  # a model's first version is its default
    model: Resource = {
        "name": name,
        "displayName": wanted.get("displayName") or display_name,
        "versionId": version_id,
        "versionAliases": aliases,
        "versionCreateTime": stamp,
        "versionUpdateTime": stamp,
        "createTime": stamp,
        "updateTime": stamp,
        "labels": dict(wanted.get("labels") or {}),
        "supportedDeploymentResourcesTypes": ["DEDICATED_RESOURCES"],
        "modelSourceInfo": {"sourceType": "CUSTOM"},
        "etag": new_id(),
    }
    for copied in _COPIED:
        if copied in wanted:
            model[copied] = wanted[copied]
    if wanted.get("artifactUri"):
        model["artifactUri"] = wanted["artifactUri"]
    return model


def model_version(pipeline: Resource, job: Resource, name: str, version_id: str) -> Resource:
    """One version of the Model a succeeded pipeline uploads (pure): `modelToUpload`, the model folder."""
    wanted = dict(pipeline.get("modelToUpload") or {})
    wanted.setdefault("artifactUri", model_dir(job.get("jobSpec") or {}))
    model = new_version(wanted, name, version_id, pipeline.get("displayName", ""))
    model["trainingPipeline"] = pipeline["name"]
    return model


def _with_default(family: Resource | None, versions: list[Resource]) -> Resource:
    default = next(v for v in reversed(versions) if DEFAULT_ALIAS in v["versionAliases"])
    stored = copy.deepcopy(default)
    if family is not None:
        stored["createTime"] = family["createTime"]
        stored["updateTime"] = now_rfc3339()
    stored[VERSIONS_KEY] = versions
    return stored


def with_version(family: Resource | None, version: Resource) -> Resource:
    """The stored model after adding `version` (pure): its aliases taken from older versions, the
    top-level fields those of the default version."""
    versions = [copy.deepcopy(v) for v in (family or {}).get(VERSIONS_KEY, [])]
    for older in versions:
        older["versionAliases"] = [a for a in older["versionAliases"] if a not in version["versionAliases"]]
    versions.append(version)
    return _with_default(family, versions)


def _find(family: Resource, ref: str | None) -> int | None:
    versions = family.get(VERSIONS_KEY, [])
    for index, version in enumerate(versions):
        if ref is None and DEFAULT_ALIAS in version["versionAliases"]:
            return index
        if ref is not None and (ref == version["versionId"] or ref in version["versionAliases"]):
            return index
    return None


def version_of(family: Resource, ref: str | None) -> Resource | None:
    """The version `ref` (an id or an alias) names, the default one for None (pure, internal keys out)."""
    if ref is None:
        return {k: v for k, v in family.items() if k != VERSIONS_KEY}
    index = _find(family, ref)
    if index is None:
        return None
    return {**family[VERSIONS_KEY][index], "createTime": family["createTime"]}


def merged_aliases(family: Resource, ref: str | None, changes: list[str]) -> Resource:
    """The model after MergeVersionAliases on version `ref` (pure): `alias` adds (moving it off any other
    version), `-alias` removes; the default alias can move but not go."""
    check_aliases(changes, signed=True)
    index = _find(family, ref)
    if index is None:
        raise ApiError.not_found(f"{family['name']}@{ref}")
    adds = [c for c in changes if not c.startswith("-")]
    removes = {c[1:] for c in changes if c.startswith("-")} - set(adds)
    if DEFAULT_ALIAS in removes:
        raise ApiError.invalid("the default alias cannot be removed; add it to another version instead")
    versions = copy.deepcopy(family[VERSIONS_KEY])
    stamp = now_rfc3339()
    for i, version in enumerate(versions):
        if i == index:
            kept = [a for a in version["versionAliases"] if a not in removes]
            version["versionAliases"] = kept + [a for a in adds if a not in kept]
            version["versionUpdateTime"] = stamp
        else:
            version["versionAliases"] = [a for a in version["versionAliases"] if a not in adds]
    return _with_default(family, versions)


def patched(family: Resource, ref: str | None, body: Resource, mask: list[str]) -> Resource:
    """The model after UpdateModel (pure): displayName and description reach every version, labels and
    versionDescription the version named (the default one without `@`)."""
    index = _find(family, ref)
    if index is None:
        raise ApiError.not_found(f"{family['name']}@{ref}")
    for field in mask:
        if field not in PATCHABLE:
            raise ApiError.invalid(
                f"update_mask path {field!r} is not updatable (use {', '.join(PATCHABLE)})"
            )
    versions = copy.deepcopy(family[VERSIONS_KEY])
    stamp = now_rfc3339()
    for i, version in enumerate(versions):
        for field in mask:
            if field in MODEL_FIELDS or i == index:
                if field in body:
                    version[field] = copy.deepcopy(body[field])
                else:
                    version.pop(field, None)
                version["versionUpdateTime"] = stamp
        version["etag"] = new_id()
    return _with_default(family, versions)


def without_version(family: Resource, ref: str) -> Resource:
    """The model after DeleteModelVersion (pure): neither its default version nor its only one may go."""
    index = _find(family, ref)
    if index is None:
        raise ApiError.not_found(f"{family['name']}@{ref}")
    versions = copy.deepcopy(family[VERSIONS_KEY])
    if DEFAULT_ALIAS in versions[index]["versionAliases"]:
        raise ApiError(
            400,
            "FAILED_PRECONDITION",
            f"version {versions[index]['versionId']} of {family['name']} is the default version: make another"
            " version the default first, or delete the whole model",
        )
    del versions[index]
    return _with_default(family, versions)


def mask_paths(text: str) -> list[str]:
    """`updateMask=display_name,labels` -> the camelCase fields it names."""
    paths = [p.strip() for p in text.split(",") if p.strip()]
    return [re.sub(r"_([a-z])", lambda m: m.group(1).upper(), p) for p in paths]


class ModelRegistry:
    """Models in the job store (persisted like jobs). `publish(artifact_uri)` makes the files the job wrote
    under its local Cloud Storage folder readable at the model's URI through the storage API too."""

    def __init__(
        self,
        store: JobStore,
        publish: Callable[[str], object] | None = None,
        files_at: Callable[[str], int] | None = None,
    ) -> None:
        """`publish` copies a model folder's files into the storage emulator; `files_at` counts the files a
        job wrote under a gs:// folder (none: the pipeline fails rather than register an empty model)."""
        self._store = store
        self._publish = publish
        self._files_at = files_at

    def _add(
        self,
        location: str,
        wanted: Resource,
        parent_model: str,
        model_id: str,
        make: Callable[[str, str], Resource],
    ) -> Resource:
        """Store a new model or a new version of `parent_model`; returns the new version."""
        parent = split_version(parent_model)[0] or None
        family = self._store.get(parent) if parent else None
        if parent and family is None:
            raise ApiError.not_found(parent)
        if family is not None:
            name = family["name"]
            version_id = str(1 + max(int(v["versionId"]) for v in family.get(VERSIONS_KEY, [family])))
        else:
            ident = model_id or new_id()
            name, version_id = f"{location}/models/{ident}", "1"
            if self._store.get(name) is not None:
                raise ApiError(409, "ALREADY_EXISTS", f"model {name} already exists")
        version = make(name, version_id)
        if family is not None:  # the display name is the model's, shared by its versions (MODEL_FIELDS)
            version["displayName"] = family["displayName"]
        stored = with_version(family, version)
        if family is None:
            self._store.insert(stored)
        else:
            self._replace(name, stored)
        return version

    def _replace(self, name: str, stored: Resource) -> None:
        def replace_all(current: Resource) -> None:
            current.clear()
            current.update(stored)

        self._store.update(name, replace_all, touch=False)

    def upload_for_pipeline(self, pipeline: Resource, job: Resource) -> dict[str, Any]:
        """Create the pipeline's model (or version); the fields the pipeline gets: `modelToUpload` named
        and versioned, `modelId`. A pipeline without `modelToUpload` uploads nothing and gets nothing."""
        if not pipeline.get("modelToUpload"):
            return {}
        location = pipeline["name"].split("/trainingPipelines/")[0]
        wanted = pipeline["modelToUpload"].get("artifactUri") or model_dir(job.get("jobSpec") or {})
        folder = str(wanted or "")
        if self._files_at is not None and folder and self._files_at(folder) == 0:
            # As local-run refuses it: a model with no files serves nothing, and the job's log says why.
            message = (
                f"the model upload failed: the job wrote nothing to its model folder {folder}"
                " (AIP_MODEL_DIR): the registered model would be empty"
            )
            return {"state": "PIPELINE_STATE_FAILED", "error": {"code": 9, "message": message}}
        try:
            version = self._add(
                location,
                pipeline["modelToUpload"],
                str(pipeline.get("parentModel") or ""),
                str(pipeline.get("modelId") or ""),
                lambda name, version_id: model_version(pipeline, job, name, version_id),
            )
        except ApiError as error:  # e.g. its parent model is gone: the pipeline fails, as on Vertex
            message = f"the model upload failed: {error.message}"
            return {"state": "PIPELINE_STATE_FAILED", "error": {"code": 9, "message": message}}
        if self._publish is not None and version.get("artifactUri"):
            # The model exists whatever the copy does; a storage hiccup must not fail a finished job.
            with contextlib.suppress(OSError, VertexdistError):
                self._publish(str(version["artifactUri"]))
        name = version["name"]
        uploaded = {
            **dict(pipeline.get("modelToUpload") or {}),
            "name": name,
            "versionId": version["versionId"],
        }
        return {"modelToUpload": uploaded, "modelId": name.rsplit("/", 1)[1]}

    def upload(self, parent: str, body: Resource) -> Resource:
        """ModelService.UploadModel: the new version (its `name` the model's, `versionId` its id). Its
        shapes are checked first (`wire.model_shapes`): no name is formed from an id that is not one."""
        problems = upload_problems(body, parent)
        if problems:
            raise ApiError.invalid(one_message(problems))
        wanted = body.get("model")
        if not isinstance(wanted, dict) or not wanted.get("displayName"):
            raise ApiError.invalid("model.display_name is required")
        return self._add(
            parent,
            wanted,
            str(body.get("parentModel") or ""),
            str(body.get("modelId") or ""),
            lambda name, version_id: new_version(wanted, name, version_id, ""),
        )

    def get(self, name: str) -> Resource | None:
        base, ref = split_version(name)
        family = self._store.get(base)
        return version_of(family, ref) if family is not None else None

    def _family(self, name: str) -> tuple[Resource, str | None]:
        base, ref = split_version(name)
        family = self._store.get(base)
        if family is None:
            raise ApiError.not_found(base)
        return family, ref

    def versions(self, name: str) -> list[Resource]:
        """Every version of the model, oldest first."""
        family, _ref = self._family(name)
        return [version_of(family, v["versionId"]) or {} for v in family.get(VERSIONS_KEY, [])]

    def merge_aliases(self, name: str, changes: list[str]) -> Resource:
        problem = aliases_problem(changes, signed=True)
        if problem:
            raise ApiError.invalid(f"versionAliases: {problem}")
        family, ref = self._family(name)
        stored = merged_aliases(family, ref, changes)
        self._replace(family["name"], stored)
        index = _find(family, ref)
        assert index is not None  # merged_aliases found it
        return version_of(stored, family[VERSIONS_KEY][index]["versionId"]) or {}

    def patch(self, name: str, body: Resource, mask: list[str]) -> Resource:
        problems = model_problems(body, "model", fields=tuple(mask))
        if problems:
            raise ApiError.invalid(one_message(problems))
        family, ref = self._family(name)
        stored = patched(family, ref, body, mask)
        self._replace(family["name"], stored)
        return version_of(stored, ref) or {}

    def delete_version(self, name: str) -> Resource:
        family, ref = self._family(name)
        if ref is None:
            raise ApiError.invalid(f"{name} names no version: use MODEL@VERSION (or delete the model)")
        stored = without_version(family, ref)
        self._replace(family["name"], stored)
        return stored

    def delete(self, name: str) -> Resource | None:
        return self._store.delete(split_version(name)[0])
