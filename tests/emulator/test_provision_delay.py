"""Issue 26: `emulator start --provision-delay`: a job stays PENDING that long before its replicas start, as
Vertex provisioning machines, unless it runs on a persistent resource the emulator has (its machines are up
already, and a stockout or Flex-start wait does not touch it). Real SDK clients, real replica processes."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vertexdist.emulator import Emulator
from vertexdist.emulator.capacity import CapacityFaults
from vertexdist.spec.fault_plan import parse_fault_plan
from vertexdist.wire import capacity_errors

PARENT = "projects/test-proj/locations/us-central1"
DELAY_S = 1.0
DONE = ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED")


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    emu = Emulator(data_dir=tmp_path_factory.mktemp("provision-emulator"), provision_delay_s=DELAY_S)
    emu.start()
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture
def jobs(emulator: Emulator) -> Any:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.aiplatform_v1 import JobServiceClient

    emulator.service.capacity = CapacityFaults()
    return JobServiceClient(
        transport="rest",
        client_options={"api_endpoint": emulator.vertex_endpoint},
        credentials=AnonymousCredentials(),
    )


@pytest.fixture
def resources(emulator: Emulator) -> Any:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.aiplatform_v1 import PersistentResourceServiceClient

    return PersistentResourceServiceClient(
        transport="rest",
        client_options={"api_endpoint": emulator.vertex_endpoint},
        credentials=AnonymousCredentials(),
    )


def make_resource(resources: Any, ident: str) -> str:
    from google.cloud.aiplatform_v1.types import MachineSpec, PersistentResource, ResourcePool

    pool = ResourcePool(machine_spec=MachineSpec(machine_type="n1-standard-4"), replica_count=1)
    operation = resources.create_persistent_resource(
        parent=PARENT,
        persistent_resource=PersistentResource(resource_pools=[pool]),
        persistent_resource_id=ident,
    )
    return str(operation.result().name)


def job(code: str, *, resource: str = "") -> dict[str, Any]:
    pool = {
        "machine_spec": {"machine_type": "n1-standard-4"},
        "replica_count": 1,
        "container_spec": {
            "image_uri": "example.com/standin:latest",
            "command": [sys.executable, "-c", code],
        },
    }
    spec: dict[str, Any] = {"worker_pool_specs": [pool]}
    if resource:
        spec["persistent_resource_id"] = resource
    return {"display_name": "provision", "job_spec": spec}


def pending_for(jobs: Any, name: str, begun: float, timeout: float = 60.0) -> tuple[float, Any]:
    """Seconds from `begun` until the job is first seen out of PENDING/QUEUED, and the job then."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = jobs.get_custom_job(name=name)
        if found.state.name not in ("JOB_STATE_QUEUED", "JOB_STATE_PENDING"):
            return time.monotonic() - begun, found
        time.sleep(0.02)
    raise AssertionError(f"{name} stayed PENDING {timeout}s")


def wait_done(jobs: Any, name: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = jobs.get_custom_job(name=name)
        if found.state.name in DONE:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{name} did not end in {timeout}s")


def test_a_plain_job_stays_pending_for_the_delay_then_runs(jobs: Any, tmp_path: Path) -> None:
    marker = tmp_path / "started"
    begun = time.monotonic()
    created = jobs.create_custom_job(
        parent=PARENT, custom_job=job(f"open({str(marker)!r}, 'w').write('x'); import time; time.sleep(0.3)")
    )
    time.sleep(DELAY_S / 2)
    assert jobs.get_custom_job(name=created.name).state.name == "JOB_STATE_PENDING"
    assert not marker.exists()  # no replica yet
    waited, _ = pending_for(jobs, created.name, begun)
    assert waited >= DELAY_S
    assert wait_done(jobs, created.name).state.name == "JOB_STATE_SUCCEEDED"
    assert marker.exists()


def test_a_job_on_a_persistent_resource_starts_without_the_delay(jobs: Any, resources: Any) -> None:
    make_resource(resources, "warm-delay")
    code = "import time; time.sleep(3)"
    # Both at once: the plain one waits out the delay; the one on the resource is not held back by it.
    plain = jobs.create_custom_job(parent=PARENT, custom_job=job(code))
    begun = time.monotonic()
    reserved = jobs.create_custom_job(parent=PARENT, custom_job=job(code, resource="warm-delay"))
    waited, found = pending_for(jobs, reserved.name, begun)
    assert found.state.name == "JOB_STATE_RUNNING"
    assert jobs.get_custom_job(name=plain.name).state.name == "JOB_STATE_PENDING"
    assert waited < DELAY_S
    jobs.cancel_custom_job(name=plain.name)
    jobs.cancel_custom_job(name=reserved.name)
    assert wait_done(jobs, plain.name).state.name == "JOB_STATE_CANCELLED"
    assert wait_done(jobs, reserved.name).state.name == "JOB_STATE_CANCELLED"


def test_a_job_cancelled_in_the_delay_ends_cancelled_with_no_replica_started(
    jobs: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "started"
    created = jobs.create_custom_job(parent=PARENT, custom_job=job(f"open({str(marker)!r}, 'w').write('x')"))
    time.sleep(DELAY_S / 3)
    assert jobs.get_custom_job(name=created.name).state.name == "JOB_STATE_PENDING"
    jobs.cancel_custom_job(name=created.name)
    found = wait_done(jobs, created.name)
    assert found.state.name == "JOB_STATE_CANCELLED"
    assert found.error.message == "CANCELED"
    assert not found.start_time  # it never ran
    time.sleep(DELAY_S)  # past the end of the delay: still nothing started
    assert not marker.exists()
    assert jobs.get_custom_job(name=created.name).state.name == "JOB_STATE_CANCELLED"


def test_a_stockout_spares_a_job_on_a_persistent_resource(
    emulator: Emulator, jobs: Any, resources: Any
) -> None:
    make_resource(resources, "warm-stockout")
    plan = parse_fault_plan("- kind: stockout\n  machine_type: n1-standard-4\n", "plan.yaml")
    faults = CapacityFaults(plan)
    emulator.service.capacity = faults
    reserved = jobs.create_custom_job(parent=PARENT, custom_job=job("pass", resource="warm-stockout"))
    assert wait_done(jobs, reserved.name).state.name == "JOB_STATE_SUCCEEDED"
    assert faults.fired == []  # its `times` is left for a job that needs new machines
    plain = jobs.create_custom_job(parent=PARENT, custom_job=job("pass"))
    found = wait_done(jobs, plain.name)
    assert found.state.name == "JOB_STATE_FAILED"
    assert (
        capacity_errors.reason_of(
            found.state.name, {"code": found.error.code, "message": found.error.message}
        )
        == "STOCKOUT"
    )
    assert faults.fired == [("stockout", plain.name)]


def test_reserved_capacity_meets_no_stockout_or_flex_wait() -> None:
    plan = parse_fault_plan("- kind: stockout\n- kind: flex_wait\n  wait: 5s\n", "plan.yaml")
    faults = CapacityFaults(plan)
    spec = {"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"}}]}
    flex = {**spec, "scheduling": {"strategy": "FLEX_START"}}
    assert not faults.stockout("j1", "us-central1", spec, reserved=True)
    assert faults.flex_wait("j1", flex, reserved=True) is None
    assert faults.fired == []
    assert faults.stockout("j2", "us-central1", spec)
    assert faults.flex_wait("j2", flex) is not None


@pytest.fixture
def cli_run(capsys: pytest.CaptureFixture[str]) -> Any:
    from vertexdist.cli import main

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            main.run(list(args))
        captured = capsys.readouterr()
        code = exit_info.value.code
        return (code if isinstance(code, int) else 1), captured.out, captured.err

    return run


@pytest.mark.parametrize("value", ["soon", "-1s", "1.5"])
def test_a_bad_provision_delay_is_a_usage_error(cli_run: Any, value: str) -> None:
    code, _out, err = cli_run("emulator", "start", "--provision-delay", value)
    assert code == 2
    assert "--provision-delay" in err and "duration" in err
    assert "Traceback" not in err


def test_the_provision_delay_reads_durations_as_fault_plans_do() -> None:
    from vertexdist.cli.emulator import _provision_delay_s

    assert _provision_delay_s("0") == 0.0
    assert _provision_delay_s("2s") == 2.0
    assert _provision_delay_s("1m") == 60.0
    assert _provision_delay_s("0.5s") == 0.5
