"""Rank health on the emulator: a fault plan's `hang` blocks a rank that marks its steps with
`vertexdist_launcher.health.step()`, and the job ends FAILED at `hang_timeout` with the verdict as its
`error.message`, read through the real Vertex client."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vertexdist.emulator.capacity import CapacityFaults
from vertexdist.emulator.server import Emulator
from vertexdist.spec.fault_plan import parse_fault_plan

pytestmark = [pytest.mark.integration]

PARENT = "projects/test-proj/locations/us-central1"
SHIPPED = Path(__file__).resolve().parents[2] / "vertexdist" / "shipped"
# No torch: a loop that marks its own steps.
CODE = f"""\
import sys, time
sys.path.insert(0, {str(SHIPPED)!r})
from vertexdist_launcher import health
health.start()
def read_batch():
    time.sleep(0.05)
for step in range(10_000):
    read_batch()
    health.step()
"""


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    emu = Emulator(data_dir=tmp_path_factory.mktemp("health-emulator"))
    emu.start()
    try:
        yield emu
    finally:
        emu.stop()


def test_a_hang_fault_ends_the_emulator_job_with_the_verdict_as_its_error(emulator: Emulator) -> None:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.aiplatform_v1 import JobServiceClient

    client = JobServiceClient(
        transport="rest",
        client_options={"api_endpoint": emulator.vertex_endpoint},
        credentials=AnonymousCredentials(),
    )
    plan = "- kind: hang\n  replica: workerpool0-0\n  after_step: 3\n"
    emulator.service.capacity = CapacityFaults(parse_fault_plan(plan, "plan.yaml"))
    pool = {
        "machine_spec": {"machine_type": "n1-standard-4"},
        "replica_count": 1,
        "container_spec": {
            "image_uri": "example.com/standin:latest",
            "command": [sys.executable, "-c", CODE],
            "env": [{"name": "VERTEXDIST_HEALTH", "value": json.dumps({"hang_timeout": 3})}],
        },
    }
    created = client.create_custom_job(
        parent=PARENT, custom_job={"display_name": "hang", "job_spec": {"worker_pool_specs": [pool]}}
    )
    deadline = time.monotonic() + 60
    found: Any = None
    while time.monotonic() < deadline:
        found = client.get_custom_job(name=created.name)
        if found.state.name in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"):
            break
        time.sleep(0.2)
    assert found.state.name == "JOB_STATE_FAILED", found
    message = found.error.message
    assert re.match(r"hung: no progress for \d+s; rank 0 \(workerpool0-0, local rank 0\) is in ", message), (
        message
    )
    assert "at step 4" in message, message
