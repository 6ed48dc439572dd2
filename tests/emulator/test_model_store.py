"""Issue 34: the Model Registry's store, without a server: a pipeline's upload and an upload share it,
and a pipeline whose parent model is gone fails instead of making a new model."""

from __future__ import annotations

import pytest

from vertexdist.emulator.store import JobStore
from vertexdist.emulator.vertex.jobs import ApiError
from vertexdist.emulator.vertex.models import ModelRegistry, merged_aliases

LOCATION = "projects/p/locations/us-central1"


def _pipeline(ident: str, **extra: object) -> dict[str, object]:
    return {
        "name": f"{LOCATION}/trainingPipelines/{ident}",
        "displayName": f"job-{ident}",
        "modelToUpload": {"displayName": "m", "containerSpec": {"imageUri": "img"}},
        **extra,
    }


def _job(prefix: str) -> dict[str, object]:
    return {"jobSpec": {"baseOutputDirectory": {"outputUriPrefix": prefix}}}


def test_a_pipeline_and_an_upload_add_versions_to_one_model() -> None:
    registry = ModelRegistry(JobStore())
    fields = registry.upload_for_pipeline(_pipeline("1", modelId="m1"), _job("gs://b/j1"))
    name = f"{LOCATION}/models/m1"
    assert fields == {
        "modelToUpload": {**_pipeline("1")["modelToUpload"], "name": name, "versionId": "1"},
        "modelId": "m1",
    }  # type: ignore[dict-item]
    made = registry.upload(
        LOCATION, {"model": {"displayName": "m", "artifactUri": "gs://b/x"}, "parentModel": name}
    )
    assert (made["name"], made["versionId"]) == (name, "2")
    assert [(v["versionId"], v.get("artifactUri")) for v in registry.versions(name)] == [
        ("1", "gs://b/j1/model"),
        ("2", "gs://b/x"),
    ]
    with pytest.raises(ApiError, match="already exists"):
        registry.upload(LOCATION, {"model": {"displayName": "m"}, "modelId": "m1"})


def test_a_pipeline_whose_parent_model_is_gone_fails() -> None:
    store = JobStore()
    fields = ModelRegistry(store).upload_for_pipeline(
        _pipeline("2", parentModel=f"{LOCATION}/models/404"), _job("gs://b/j2")
    )
    assert fields["state"] == "PIPELINE_STATE_FAILED" and "was not found" in fields["error"]["message"]
    assert store.list(LOCATION, "models") == []  # and no new model was made instead


def test_merging_aliases_moves_them_and_keeps_a_default() -> None:
    store = JobStore()
    registry = ModelRegistry(store)
    name = registry.upload(LOCATION, {"model": {"displayName": "m"}})["name"]
    registry.upload(LOCATION, {"model": {"displayName": "m", "versionAliases": ["ab"]}, "parentModel": name})
    family = store.get(name)
    assert family is not None
    moved = merged_aliases(family, "1", ["ab", "-default", "default"])  # add and remove cancel out: kept
    assert [v["versionAliases"] for v in moved["_versions"]] == [["default", "ab"], []]
    with pytest.raises(ApiError, match="cannot be removed"):
        merged_aliases(family, "2", ["-default"])
    with pytest.raises(ApiError, match="must match"):
        merged_aliases(family, "1", ["12"])
