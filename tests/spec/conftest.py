"""Fixtures for template tests: a valid base template, written to a temp folder with overrides."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from vertexdist.spec import JobTemplate, load_template

REPO_ROOT = Path(__file__).resolve().parents[2]

BASE: dict[str, Any] = {
    "display_name": "test-job",
    "project": "vertexdist-demo",
    "location": "us-central1",
    "staging_bucket": "gs://vertexdist-demo/staging",
    "machine_type": "a2-highgpu-4g",
    "accelerator_type": "NVIDIA_TESLA_A100",
    "accelerator_count": 4,
    "replica_count": 2,
    "restart_job_on_worker_restart": True,
}

WriteTemplate = Callable[..., Path]
BuildTemplate = Callable[..., JobTemplate]


@pytest.fixture(autouse=True)
def _no_gce_probe() -> None:
    # The SDK-based tests must never try the metadata server.
    os.environ.setdefault("NO_GCE_CHECK", "true")


@pytest.fixture
def write_template(tmp_path: Path) -> WriteTemplate:
    """Write BASE updated with `changes` (a value of None removes the key) and return the file path."""

    def write(
        changes: dict[str, Any] | None = None, *, text: str | None = None, name: str = "job.yaml"
    ) -> Path:
        path = tmp_path / name
        if text is None:
            data = {**BASE}
            for key, value in (changes or {}).items():
                if value is None:
                    data.pop(key, None)
                else:
                    data[key] = value
            text = yaml.safe_dump(data, sort_keys=False)
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture
def build_template(write_template: WriteTemplate) -> BuildTemplate:
    """Load BASE updated with `changes` through the real loader."""

    def build(**changes: Any) -> JobTemplate:
        return load_template(write_template(changes))

    return build
