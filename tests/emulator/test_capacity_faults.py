"""Capacity faults from a fault plan (issue 22): quota, stockout, preemption and Flex-start waits, driven
through the real google-cloud-aiplatform client against one emulator; replicas are real processes."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.api_core import exceptions as gexc

from vertexdist.emulator import Emulator
from vertexdist.emulator.capacity import CapacityFaults, not_emulated
from vertexdist.spec.fault_plan import FaultPlanError, parse_fault_plan
from vertexdist.wire import capacity_errors

PARENT = "projects/test-proj/locations/us-central1"


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    emu = Emulator(data_dir=tmp_path_factory.mktemp("capacity-emulator"))
    emu.start()
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture
def client(emulator: Emulator) -> Any:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.aiplatform_v1 import JobServiceClient

    return JobServiceClient(
        transport="rest",
        client_options={"api_endpoint": emulator.vertex_endpoint},
        credentials=AnonymousCredentials(),
    )


def arm(emulator: Emulator, plan: str) -> CapacityFaults:
    faults = CapacityFaults(parse_fault_plan(plan, "plan.yaml"))
    emulator.service.capacity = faults
    return faults


def job(code: str, *, machine: str = "n1-standard-4", scheduling: dict[str, Any] | None = None) -> Any:
    pool = {
        "machine_spec": {"machine_type": machine},
        "replica_count": 1,
        "container_spec": {
            "image_uri": "example.com/standin:latest",
            "command": [sys.executable, "-c", code],
        },
    }
    spec: dict[str, Any] = {"worker_pool_specs": [pool]}
    if scheduling:
        spec["scheduling"] = scheduling
    return {"display_name": "capacity", "job_spec": spec}


def wait_done(client: Any, name: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = client.get_custom_job(name=name)
        if found.state.name in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"):
            return found
        time.sleep(0.1)
    raise AssertionError(f"{name} did not end in {timeout}s")


def reason(found: Any) -> str:
    return capacity_errors.reason_of(
        found.state.name, {"code": found.error.code, "message": found.error.message}
    )


def test_a_quota_fault_refuses_the_create_with_429_resource_exhausted_once(
    emulator: Emulator, client: Any
) -> None:
    faults = arm(emulator, "- kind: quota\n  times: 1\n")
    with pytest.raises(gexc.TooManyRequests) as refused:  # REST: by HTTP status
        client.create_custom_job(parent=PARENT, custom_job=job("pass"))
    assert refused.value.code == 429
    assert "The following quota metrics exceed quota limits" in refused.value.message
    assert "custom_model_training_cpus" in refused.value.message
    assert capacity_errors.is_quota_refusal(429, refused.value.message)
    assert faults.fired == [("quota", PARENT)]
    created = client.create_custom_job(parent=PARENT, custom_job=job("pass"))  # times: 1 is spent
    assert wait_done(client, created.name).state.name == "JOB_STATE_SUCCEEDED"


def test_the_quota_metric_names_the_jobs_gpu() -> None:
    assert capacity_errors.gpu_quota_metric("NVIDIA_TESLA_A100").endswith(
        "custom_model_training_nvidia_a100_gpus"
    )
    assert capacity_errors.gpu_quota_metric("NVIDIA_L4").endswith("_nvidia_l4_gpus")
    assert capacity_errors.gpu_quota_metric("NVIDIA_H100_80GB").endswith("_nvidia_h100_gpus")


def test_a_stockout_fails_matching_jobs_as_vertex_does_and_spares_others(
    emulator: Emulator, client: Any
) -> None:
    arm(emulator, "- kind: stockout\n  location: us-central1\n  machine_type: n1-standard-8\n  times: 5\n")
    spared = client.create_custom_job(parent=PARENT, custom_job=job("pass"))
    hit = client.create_custom_job(parent=PARENT, custom_job=job("pass", machine="n1-standard-8"))
    found = wait_done(client, hit.name)
    assert found.state.name == "JOB_STATE_FAILED"
    assert found.error.code == capacity_errors.CODE_RESOURCE_EXHAUSTED
    assert found.error.message.startswith("Resources are insufficient in region: us-central1")
    assert reason(found) == "STOCKOUT"
    assert wait_done(client, spared.name).state.name == "JOB_STATE_SUCCEEDED"


def test_a_preempted_replica_gets_sigterm_then_the_job_fails_as_preempted(
    emulator: Emulator, client: Any
) -> None:
    code = (
        "import signal, sys, time\n"
        "def on_term(*_): print('got SIGTERM at', time.time(), flush=True); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, on_term)\n"
        "print('started', time.time(), flush=True)\n"
        "time.sleep(60)\n"
    )
    faults = arm(emulator, "- kind: preempt\n  replica: workerpool0-0\n  after: 4s\n  grace: 5s\n")
    started = time.time()
    created = client.create_custom_job(parent=PARENT, custom_job=job(code))
    found = wait_done(client, created.name, timeout=30)
    assert found.state.name == "JOB_STATE_FAILED"
    assert found.error.code == capacity_errors.CODE_RESOURCE_EXHAUSTED
    assert "workerpool0-0 was preempted" in found.error.message
    assert reason(found) == "PREEMPTED"
    # The replica's own SIGTERM handler ran (a checkpoint would be written there), at least `after` in.
    log = emulator.service.log_files(created.name)["workerpool0-0"].read_text()
    assert "got SIGTERM at" in log
    assert float(log.split("got SIGTERM at")[1].split()[0]) - started >= 4.0
    assert faults.fired == [("preempt", created.name)]


def test_a_replica_that_ignores_sigterm_is_killed_after_the_grace(emulator: Emulator, client: Any) -> None:
    code = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(120)\n"
    arm(emulator, "- kind: preempt\n  after: 0.5s\n  grace: 1s\n")
    begun = time.monotonic()
    created = client.create_custom_job(parent=PARENT, custom_job=job(code))
    found = wait_done(client, created.name, timeout=40)
    assert found.state.name == "JOB_STATE_FAILED" and reason(found) == "PREEMPTED"
    assert time.monotonic() - begun < 30  # not the script's 120 s: SIGKILL came after the 1 s grace


def test_a_flex_start_job_waits_pending_for_its_capacity_then_runs(emulator: Emulator, client: Any) -> None:
    arm(emulator, "- kind: flex_wait\n  wait: 1.5s\n")
    begun = time.monotonic()
    created = client.create_custom_job(
        parent=PARENT,
        custom_job=job("pass", scheduling={"strategy": "FLEX_START", "max_wait_duration": "60s"}),
    )
    time.sleep(0.5)
    assert client.get_custom_job(name=created.name).state.name == "JOB_STATE_PENDING"
    assert wait_done(client, created.name).state.name == "JOB_STATE_SUCCEEDED"
    assert time.monotonic() - begun >= 1.5


def test_a_flex_start_wait_past_max_wait_duration_fails_the_job(emulator: Emulator, client: Any) -> None:
    arm(emulator, "- kind: flex_wait\n  wait: never\n")
    standard = client.create_custom_job(parent=PARENT, custom_job=job("pass"))  # not FLEX_START: not hit
    created = client.create_custom_job(
        parent=PARENT,
        custom_job=job("pass", scheduling={"strategy": "FLEX_START", "max_wait_duration": "1s"}),
    )
    found = wait_done(client, created.name)
    assert found.state.name == "JOB_STATE_FAILED"
    assert found.error.code == capacity_errors.CODE_RESOURCE_EXHAUSTED
    assert "max_wait_duration (1s)" in found.error.message and reason(found) == "STOCKOUT"
    assert wait_done(client, standard.name).state.name == "JOB_STATE_SUCCEEDED"


def test_an_ordinary_failure_is_a_user_error_not_capacity(emulator: Emulator, client: Any) -> None:
    arm(emulator, "")
    created = client.create_custom_job(parent=PARENT, custom_job=job("raise SystemExit(1)"))
    found = wait_done(client, created.name)
    assert found.state.name == "JOB_STATE_FAILED" and reason(found) == "USER_ERROR"


@pytest.mark.parametrize(
    ("state", "error", "expected"),
    [
        ("JOB_STATE_SUCCEEDED", None, "SUCCEEDED"),
        ("PIPELINE_STATE_CANCELLED", {"code": 1, "message": "CANCELED"}, "CANCELLED"),
        ("JOB_STATE_EXPIRED", None, "STOCKOUT"),
        ("JOB_STATE_RUNNING", None, "RUNNING"),
        (
            "JOB_STATE_FAILED",
            {"code": 8, "message": "The following quota metrics exceed quota limits: x"},
            "QUOTA",
        ),
        ("JOB_STATE_FAILED", {"code": 13, "message": "replica workerpool0-0 exited with 1"}, "USER_ERROR"),
    ],
)
def test_reason_of_reads_every_ended_shape(
    state: str, error: dict[str, object] | None, expected: str
) -> None:
    assert capacity_errors.reason_of(state, error) == expected


def test_a_bad_fault_plan_names_the_entry_and_field(tmp_path: Path, cli_run: Any) -> None:
    plan = tmp_path / "faults.yaml"
    plan.write_text("- kind: quota\n- kind: preempt\n  grace: soon\n")
    code, _out, err = cli_run("emulator", "start", "--fault-plan", str(plan))
    assert code != 0
    assert f"{plan}:3" in err and "entry 1 (preempt).grace" in err
    assert "Traceback" not in err


# `after` is 3 s so that the first run has set its SIGTERM handler, even on a loaded machine, before
# the fault fires.
# First run: note it in the replica's folder (kept across restarts), then wait to be stopped, with HANDLER
# on SIGTERM. A later run (the restarted replica) says so and succeeds.
RESTARTED = (
    "import os, signal, sys, time\n"
    "if not os.path.exists('ran-once'):\n"
    "    open('ran-once', 'w').write('x')\n"
    "    signal.signal(signal.SIGTERM, HANDLER)\n"
    "    print('first run', flush=True)\n"
    "    time.sleep(60)\n"
    "print('second run', flush=True)\n"
)
CHECKPOINT_AND_EXIT = "lambda *_: (print('got SIGTERM', flush=True), sys.exit(0))"


def test_a_preemption_with_worker_restarts_restarts_the_replica_and_the_job_succeeds(
    emulator: Emulator, client: Any
) -> None:
    faults = arm(emulator, "- kind: preempt\n  outcome: worker_restarts\n  after: 3s\n  grace: 5s\n")
    code = RESTARTED.replace("HANDLER", CHECKPOINT_AND_EXIT)
    created = client.create_custom_job(parent=PARENT, custom_job=job(code))
    found = wait_done(client, created.name, timeout=40)
    assert found.state.name == "JOB_STATE_SUCCEEDED", found.error.message
    assert capacity_errors.reason_of(found.state.name, None) == "SUCCEEDED"  # not PREEMPTED (§8.6)
    log = emulator.service.log_files(created.name)["workerpool0-0"].read_text()
    assert (
        log.index("got SIGTERM") < log.index("replica restart workerpool0-0 (1/5)") < log.index("second run")
    )
    assert faults.fired == [("preempt", created.name)]


def test_maintenance_stops_the_replica_after_its_grace_and_restarts_it(
    emulator: Emulator, client: Any
) -> None:
    arm(emulator, "- kind: maintenance\n  after: 3s\n  grace: 1s\n")
    code = RESTARTED.replace("HANDLER", "signal.SIG_IGN")  # so only the SIGKILL after the grace ends it
    begun = time.monotonic()
    created = client.create_custom_job(parent=PARENT, custom_job=job(code))
    found = wait_done(client, created.name, timeout=40)
    assert found.state.name == "JOB_STATE_SUCCEEDED", found.error.message
    assert time.monotonic() - begun < 30  # the fault's 1 s grace, not GCE's 30 s nor the script's 60 s
    log = emulator.service.log_files(created.name)["workerpool0-0"].read_text()
    assert log.index("first run") < log.index("replica restart workerpool0-0 (1/5)") < log.index("second run")


def test_every_fault_kind_is_carried_out_now(tmp_path: Path) -> None:
    plan = parse_fault_plan(
        "- kind: maintenance\n  grace: 2s\n- kind: preempt\n  outcome: worker_restarts\n", "p.yaml"
    )
    assert not_emulated(plan) is None
    armed = CapacityFaults(plan).replica_faults("job", {"workerPoolSpecs": [{"replicaCount": 1}]})
    assert [(f.kind, f.grace_s, f.restarts) for f in armed] == [
        ("maintenance", 2.0, True),
        ("preempt", 30.0, True),
    ]


def test_parse_errors_are_fault_plan_errors() -> None:
    with pytest.raises(FaultPlanError, match="entry 0"):
        parse_fault_plan("- kind: stockout\n  location: us-centrl1\n")


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


def test_the_documented_sigterm_pattern_saves_a_checkpoint_when_preempted(
    emulator: Emulator, client: Any
) -> None:
    root = Path(__file__).parents[2]
    patterns = [
        page.read_text().split("<!-- sigterm-pattern -->\n```python\n", 1)[1].split("```", 1)[0]
        for page in (root / "docs/guide/managed-jobs.md", root / "README.md")
    ]
    assert patterns[0] == patterns[1], "the README shows the guide's pattern, as it is tested here"
    pattern = patterns[0]
    prelude = (
        "import os, time\n"
        "os.environ.setdefault('AIP_CHECKPOINT_DIR', '/tmp')\n"
        "start_step, total_steps = 1, 10**6\n"
        "def train_one_step(step): time.sleep(0.05)\n"
        "def save_checkpoint(folder, step): print('checkpoint at step', step, flush=True)\n"
    )
    arm(emulator, "- kind: preempt\n  after: 4s\n  grace: 10s\n")
    created = client.create_custom_job(parent=PARENT, custom_job=job(prelude + pattern))
    found = wait_done(client, created.name, timeout=40)
    assert reason(found) == "PREEMPTED"
    log = emulator.service.log_files(created.name)["workerpool0-0"].read_text()
    saved = [int(line.split()[-1]) for line in log.splitlines() if line.startswith("checkpoint at step")]
    assert saved and saved[-1] % 500 != 0  # the last one came from SIGTERM, not from the every-500 schedule
