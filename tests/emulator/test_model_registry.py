"""Issue 34: the emulator's Model Registry through the real SDK — models.upload (an operation), get by
`@version` and `@alias`, list with a filter, listVersions, mergeVersionAliases, patch, deleteVersion,
delete — on the store that pipelines' uploads share."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from vertexdist.emulator import Emulator

SERVING = "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-0:latest"


def test_upload_versions_aliases_patch_and_delete(aiplatform: Any, emu: Emulator) -> None:
    from google.api_core import exceptions

    tag = uuid.uuid4().hex[:8]
    first = aiplatform.Model.upload(
        display_name=f"reg-{tag}",
        artifact_uri=f"gs://vd-staging/models/{tag}/v1",
        serving_container_image_uri=SERVING,
        serving_container_predict_route="/predict",
        serving_container_health_route="/health",
        serving_container_ports=[8080],
        labels={"team": tag},
        description="the first cut",
    )
    assert first.version_id == "1"
    assert first.version_aliases == ["default"]
    assert first.container_spec.predict_route == "/predict"
    assert [p.container_port for p in first.container_spec.ports] == [8080]

    second = aiplatform.Model.upload(
        display_name=f"reg-{tag}",
        artifact_uri=f"gs://vd-staging/models/{tag}/v2",
        serving_container_image_uri=SERVING,
        parent_model=first.resource_name,
        is_default_version=False,
        version_aliases=["candidate"],
        version_description="tried on more data",
    )
    assert (second.resource_name, second.version_id) == (first.resource_name, "2")
    assert aiplatform.Model(first.resource_name).version_id == "1"  # not the default: 1 stays it
    assert aiplatform.Model(f"{first.resource_name}@candidate").uri.endswith("/v2")
    assert aiplatform.Model(first.name, version="2").version_description == "tried on more data"

    listed = aiplatform.Model.list(filter=f'labels.team="{tag}"')
    assert [(m.resource_name, m.version_id) for m in listed] == [(first.resource_name, "1")]
    assert [m.resource_name for m in aiplatform.Model.list(filter=f"model={first.name}")] == [
        first.resource_name
    ]
    with pytest.raises(exceptions.BadRequest, match="not supported"):
        aiplatform.Model.list(filter='color="blue"')

    registry = aiplatform.models.ModelRegistry(first)
    versions = registry.list_versions()
    assert [(v.version_id, list(v.version_aliases)) for v in versions] == [
        ("1", ["default"]),
        ("2", ["candidate"]),
    ]
    registry.add_version_aliases(["default", "prod"], version="2")  # default moves to version 2
    assert aiplatform.Model(first.resource_name).version_id == "2"
    assert aiplatform.Model(f"{first.name}@prod").version_id == "2"
    assert list(registry.get_version_info("1").version_aliases) == []
    with pytest.raises(exceptions.BadRequest, match="default"):
        registry.remove_version_aliases(["default"], version="2")
    with pytest.raises(exceptions.BadRequest, match="default version"):
        registry.delete_version("2")

    updated = aiplatform.Model(first.resource_name).update(
        display_name=f"renamed-{tag}", labels={"team": tag, "stage": "prod"}
    )
    assert updated.display_name == f"renamed-{tag}"
    assert aiplatform.Model(first.resource_name, version="1").display_name == f"renamed-{tag}"
    assert aiplatform.Model(first.resource_name, version="1").labels == {"team": tag}  # a version's own
    assert aiplatform.Model(first.resource_name).labels == {"team": tag, "stage": "prod"}

    registry.delete_version("1")
    assert [v.version_id for v in registry.list_versions()] == ["2"]
    with pytest.raises(exceptions.NotFound):
        aiplatform.Model(first.resource_name, version="1")

    aiplatform.Model(first.resource_name).delete()
    with pytest.raises(exceptions.NotFound):
        aiplatform.Model(first.resource_name)
    with pytest.raises(exceptions.NotFound):
        aiplatform.Model.upload(
            display_name="orphan",
            artifact_uri="gs://vd-staging/x",
            serving_container_image_uri=SERVING,
            parent_model=first.resource_name,
        )
