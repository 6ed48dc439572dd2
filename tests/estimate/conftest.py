"""Templates for the estimate tests, built in code from a small valid base (the real model and rules run)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from vertexdist.spec import JobTemplate, load_template

REPO_ROOT = Path(__file__).resolve().parents[2]
DONE_CHECK_TEMPLATE = REPO_ROOT / "job_templates" / "a2-ultragpu-8g-rs.yaml"

BASE: dict[str, Any] = {
    "display_name": "estimate-test",
    "project": "vertexdist-demo",
    "location": "us-central1",
    "staging_bucket": "gs://vertexdist-demo/staging",
    "machine_type": "a2-ultragpu-8g",
    "accelerator_type": "NVIDIA_A100_80GB",
    "accelerator_count": 8,
    "replica_count": 4,
    "restart_job_on_worker_restart": True,
}

MakeTemplate = Callable[..., JobTemplate]


@pytest.fixture(autouse=True)
def _no_gce_probe() -> None:
    os.environ.setdefault("NO_GCE_CHECK", "true")


@pytest.fixture
def make_template() -> MakeTemplate:
    def make(**changes: Any) -> JobTemplate:
        return JobTemplate(**{**BASE, **changes})

    return make


@pytest.fixture
def done_check_template() -> JobTemplate:
    """The shipped 4 x a2-ultragpu-8g template with 13 reduction servers, as the loader reads it."""
    return load_template(DONE_CHECK_TEMPLATE)
