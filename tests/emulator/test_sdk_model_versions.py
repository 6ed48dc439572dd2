"""google-cloud-aiplatform's own model-version test against the emulator (adapted from python-aiplatform's
tests/system/aiplatform/test_model_version_management.py, as the other SDK tests here are: the emulator's
endpoints and anonymous credentials instead of a real project).

It stages into the SDK's default bucket (`PROJECT-vertex-staging-LOCATION`), and on its second upload checks
that bucket's owner: `bucket.project_number` against Resource Manager's number for the project. The SDK
builds its `ProjectsClient` with no options, so the test points it at the emulator (REST, v3), as a user's
`client_options` would."""

from __future__ import annotations

import functools
import uuid
from pathlib import Path
from typing import Any

import pytest

from vertexdist.emulator import Emulator
from vertexdist.wire.projects import project_number

pytestmark = [pytest.mark.integration]

PROJECT = "test-proj"
LOCATION = "us-central1"


@pytest.fixture
def sdk(emu: Emulator, monkeypatch: pytest.MonkeyPatch) -> Any:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform, resourcemanager

    monkeypatch.setattr(
        resourcemanager,
        "ProjectsClient",
        functools.partial(
            resourcemanager.ProjectsClient,
            transport="rest",
            client_options={"api_endpoint": emu.vertex_endpoint},
        ),
    )
    aiplatform.init(
        project=PROJECT,
        location=LOCATION,
        staging_bucket=None,
        credentials=AnonymousCredentials(),
        api_endpoint=emu.vertex_endpoint,
        api_transport="rest",
    )
    monkeypatch.setattr(aiplatform.initializer.global_config, "_staging_bucket", None)
    return aiplatform


def test_resource_manager_gives_the_number_the_sdk_checks_buckets_by(sdk: Any, emu: Emulator) -> None:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import resourcemanager

    client = resourcemanager.ProjectsClient(credentials=AnonymousCredentials())
    project = client.get_project(name=f"projects/{PROJECT}")
    assert project.name == f"projects/{project_number(PROJECT)}" and project.project_id == PROJECT


def test_upload_and_manage_model_versions(sdk: Any, emu: Emulator, tmp_path: Path) -> None:
    from google.cloud import storage
    from google.cloud.aiplatform.models import ModelRegistry

    model_path = tmp_path / "my_model.bst"
    model_path.write_bytes(b"a stand-in booster: the registry stores the file, nothing loads it")
    model_id = "my_model_id" + uuid.uuid4().hex
    aliases = ["system-test-model", "testing"]

    model = sdk.Model.upload_xgboost_model_file(
        model_file_path=str(model_path),
        version_aliases=aliases,
        model_id=model_id,
        version_description="My description",
    )
    client = storage.Client(project=PROJECT)
    bucket = storage.Blob.from_string(uri=model.uri, client=client).bucket
    assert "-vertex-staging-" in bucket.name  # the SDK's own default bucket
    assert model.version_description == "My description"
    assert model.version_aliases == aliases
    assert "default" in model.version_aliases

    # The second upload finds the bucket there and checks its owner (Resource Manager's number).
    model2 = sdk.Model.upload_xgboost_model_file(
        model_file_path=str(model_path), parent_model=model_id, is_default_version=False
    )
    assert model2.version_id == "2"
    assert model2.resource_name == model.resource_name
    assert model2.version_aliases == []

    info = model2.versioning_registry.get_version_info("testing")
    versions = model2.versioning_registry.list_versions()
    assert len(versions) == 2
    listed = versions[0]
    assert info.version_id == listed.version_id == model.version_id
    assert info.version_aliases == listed.version_aliases == model.version_aliases
    assert info.version_description == listed.version_description == model.version_description
    assert info.model_display_name == listed.model_display_name == model.display_name
    assert info.version_update_time == listed.version_update_time == model.version_update_time

    clone = model2.versioning_registry.get_model()
    assert (clone.resource_name, clone.version_id, clone.name) == (
        model.resource_name,
        model.version_id,
        model.name,
    )

    registry = ModelRegistry(model)
    registry.add_version_aliases(["new-alias"], "default")
    registry.remove_version_aliases(["testing"], "new-alias")
    assert "testing" not in registry.get_model("new-alias").version_aliases

    registry.delete_version("2")
    assert "2" not in [version.version_id for version in registry.list_versions()]
