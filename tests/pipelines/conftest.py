"""One emulator for the pipeline tests, and the SDK pointed at it: its PipelineJob client, storage and
Resource Manager (`PipelineJob.submit()` checks the pipeline root bucket's owner through
google-cloud-resource-manager's `ProjectsClient`, which the SDK builds with no options; pointed at nothing,
it retries for about a minute)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

os.environ["NO_GCE_CHECK"] = "true"
pytest.importorskip("kfp")

from vertexdist.emulator import Emulator

PROJECT = "pipe-proj"
LOCATION = "us-central1"
ROOT = "gs://vd-pipelines/root"


@pytest.fixture(scope="session")
def pipeline_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    emu = Emulator(data_dir=tmp_path_factory.mktemp("pipeline-emulator"), hold_get_s=5.0)
    emu.start()
    _EMULATORS.append(emu)
    try:
        yield emu
    finally:
        _EMULATORS.remove(emu)
        emu.stop()


_EMULATORS: list[Emulator] = []


def current_emulator() -> Emulator:
    return _EMULATORS[-1]


@pytest.fixture
def aip(pipeline_emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> Any:
    """google.cloud.aiplatform initialised against the emulator (anonymous, REST)."""
    import functools

    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform, resourcemanager

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", pipeline_emulator.storage_endpoint)
    monkeypatch.setattr(
        resourcemanager,
        "ProjectsClient",
        functools.partial(
            resourcemanager.ProjectsClient,
            transport="rest",
            client_options={"api_endpoint": pipeline_emulator.vertex_endpoint},
        ),
    )
    aiplatform.init(
        project=PROJECT,
        location=LOCATION,
        credentials=AnonymousCredentials(),
        api_endpoint=pipeline_emulator.vertex_endpoint,
        api_transport="rest",
    )
    return aiplatform
