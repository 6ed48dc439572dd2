"""The emulator's REST API through the real GAPIC REST clients: fidelity, states, errors, enum encoding."""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from google.api_core import exceptions

from vertexdist.emulator import Emulator
from vertexdist.emulator.server import DataDirInUse

pytestmark = pytest.mark.integration

PARENT = "projects/test-proj/locations/us-central1"
SLEEP = "import time; time.sleep(60)"


def wait_state(client: Any, name: str, states: set[int], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        job = client.get_custom_job(name=name)
        if int(job.state) in states or time.monotonic() > deadline:
            return job
        time.sleep(0.05)


def test_custom_job_round_trip_run_and_cancel(emu: Emulator, job_client: Any, pool: Any) -> None:
    from google.cloud.aiplatform_v1 import types

    emu.service.hold_get_s = 0
    reducer = {
        "machine_spec": {"machine_type": "n1-highcpu-16"},
        "replica_count": 1,
        "container_spec": {
            "image_uri": "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"
        },
    }
    gpu = {"accelerator_type": "NVIDIA_TESLA_A100", "accelerator_count": 4}
    spec = {
        "worker_pool_specs": [
            {
                **pool(SLEEP, 1, "a2-highgpu-4g", **gpu),
                "disk_spec": {"boot_disk_type": "pd-ssd", "boot_disk_size_gb": 200},
            },
            pool(SLEEP, 2, "a2-highgpu-4g", **gpu),
            reducer,
        ],
        "scheduling": {"timeout": "3600s", "restart_job_on_worker_restart": True},
        "base_output_directory": {"output_uri_prefix": "gs://vd-staging/out"},
    }
    sent = types.CustomJob(display_name="round-trip", job_spec=spec, labels={"team": "ml"})
    created = job_client.create_custom_job(parent=PARENT, custom_job=sent)
    assert created.name.startswith(f"{PARENT}/customJobs/")
    assert created.state == types.JobState.JOB_STATE_QUEUED
    assert created.job_spec == sent.job_spec  # every field survives, enums included
    assert created.labels["team"] == "ml"

    running = wait_state(job_client, created.name, {3})
    assert running.state == types.JobState.JOB_STATE_RUNNING
    assert running.start_time and running.create_time <= running.start_time
    listed = [j.name for j in job_client.list_custom_jobs(parent=PARENT)]
    assert created.name in listed

    job_client.cancel_custom_job(name=created.name)
    done = wait_state(job_client, created.name, {7})
    assert done.state == types.JobState.JOB_STATE_CANCELLED
    assert done.error.code == 1 and done.end_time
    with pytest.raises(exceptions.BadRequest, match="already in state JOB_STATE_CANCELLED"):
        job_client.cancel_custom_job(name=created.name)


def test_failed_replica_sets_error(emu: Emulator, job_client: Any, pool: Any) -> None:
    from google.cloud.aiplatform_v1 import types

    job = types.CustomJob(
        display_name="fails", job_spec={"worker_pool_specs": [pool("import sys; sys.exit(3)")]}
    )
    created = job_client.create_custom_job(parent=PARENT, custom_job=job)
    done = job_client.get_custom_job(name=created.name)  # held until the job ends
    assert done.state == types.JobState.JOB_STATE_FAILED
    assert "workerpool0-0" in done.error.message and "3" in done.error.message


def test_unknown_job_is_404_and_invalid_request_is_400(emu: Emulator, job_client: Any, pool: Any) -> None:
    from google.cloud.aiplatform_v1 import types

    missing = f"{PARENT}/customJobs/123"
    with pytest.raises(exceptions.NotFound, match="was not found"):
        job_client.get_custom_job(name=missing)
    with pytest.raises(exceptions.NotFound):
        job_client.cancel_custom_job(name=missing)
    bad = types.CustomJob(
        display_name="bad",
        job_spec={
            "worker_pool_specs": [
                pool("pass", 1, "n1-standard-4", accelerator_type="NVIDIA_TESLA_A100", accelerator_count=3)
            ]
        },
    )
    with pytest.raises(
        exceptions.BadRequest,
        match='Accelerator "NVIDIA_TESLA_A100" is not supported for machine type "n1-standard-4"',
    ):
        job_client.create_custom_job(parent=PARENT, custom_job=bad)
    two_chiefs = types.CustomJob(display_name="bad", job_spec={"worker_pool_specs": [pool("pass", 2)]})
    with pytest.raises(exceptions.BadRequest, match="must be 1 for the primary replica pool"):
        job_client.create_custom_job(parent=PARENT, custom_job=two_chiefs)
    with pytest.raises(exceptions.BadRequest, match="not supported"):
        list(job_client.list_custom_jobs(request={"parent": PARENT, "filter": "create_time>1"}))


def _raw(url: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method="POST" if body is not None else "GET")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as response:
        return dict(json.loads(response.read()))


def test_enums_follow_the_requested_encoding(emu: Emulator, pool: Any) -> None:
    emu.service.hold_get_s = 0
    base = f"{emu.vertex_endpoint}/v1/{PARENT}/customJobs"
    created = _raw(base, {"displayName": "enc", "jobSpec": {"workerPoolSpecs": [pool(SLEEP)]}})
    assert created["state"] == "JOB_STATE_QUEUED"
    as_int = _raw(f"{emu.vertex_endpoint}/v1/{created['name']}?%24alt=json%3Benum-encoding%3Dint")
    assert isinstance(as_int["state"], int)
    _raw(f"{emu.vertex_endpoint}/v1/{created['name']}:cancel", {})
    with pytest.raises(urllib.error.HTTPError) as info:
        _raw(f"{emu.vertex_endpoint}/v1/{PARENT}/customJobs/999")
    assert info.value.code == 404
    assert json.loads(info.value.read())["error"]["status"] == "NOT_FOUND"


def test_training_pipeline_creates_a_backing_custom_job(emu: Emulator, pool: Any) -> None:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.aiplatform_v1 import PipelineServiceClient, types

    client = PipelineServiceClient(
        transport="rest",
        client_options={"api_endpoint": emu.vertex_endpoint},
        credentials=AnonymousCredentials(),
    )
    # Snake case and float numbers, as the SDK's CustomTrainingJob writes trainingTaskInputs.
    inputs = {"worker_pool_specs": [{**pool("print('ok')"), "replica_count": 1.0}]}
    pipeline = types.TrainingPipeline(
        display_name="tp",
        training_task_definition="gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml",
        training_task_inputs=inputs,
    )
    created = client.create_training_pipeline(parent=PARENT, training_pipeline=pipeline)
    backing = created.training_task_metadata["backingCustomJob"]
    assert backing.startswith(f"{PARENT}/customJobs/")
    done = client.get_training_pipeline(name=created.name)
    assert done.state == types.PipelineState.PIPELINE_STATE_SUCCEEDED
    assert done.start_time and done.end_time
    wrong = types.TrainingPipeline(
        display_name="x", training_task_definition="gs://other.yaml", training_task_inputs=inputs
    )
    with pytest.raises(exceptions.BadRequest, match="trainingTaskDefinition"):
        client.create_training_pipeline(parent=PARENT, training_pipeline=wrong)


def test_both_servers_bind_loopback_only(emu: Emulator) -> None:
    assert emu.http.server_address[0] == "127.0.0.1"
    assert emu.vertex_endpoint.startswith("http://127.0.0.1:")
    assert emu.storage_endpoint.startswith("http://127.0.0.1:")


def test_jobs_survive_a_restart_and_running_ones_fail_with_the_reason(tmp_path: Any) -> None:
    body = {
        "displayName": "survivor",
        "jobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {"machineType": "n1-standard-4"},
                    "replicaCount": 1,
                    "containerSpec": {"imageUri": "x", "command": [sys.executable, "-c", "print('done')"]},
                }
            ]
        },
    }
    with Emulator(data_dir=tmp_path, hold_get_s=5) as first:
        url = f"{first.vertex_endpoint}/v1/{PARENT}/customJobs"
        finished = _raw(url, body)
        assert _raw(f"{first.vertex_endpoint}/v1/{finished['name']}")["state"] == "JOB_STATE_SUCCEEDED"
        body["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["command"][-1] = SLEEP
        first.service.hold_get_s = 0
        running = _raw(url, body)
        deadline = time.monotonic() + 20
        while _raw(f"{first.vertex_endpoint}/v1/{running['name']}")["state"] != "JOB_STATE_RUNNING":
            assert time.monotonic() < deadline
            time.sleep(0.05)
    with Emulator(data_dir=tmp_path) as second:
        with pytest.raises(DataDirInUse, match="in use by another emulator"):
            Emulator(data_dir=tmp_path)
        again = _raw(f"{second.vertex_endpoint}/v1/{finished['name']}")
        assert again["state"] == "JOB_STATE_SUCCEEDED" and again["createTime"] == finished["createTime"]
        lost = _raw(f"{second.vertex_endpoint}/v1/{running['name']}")
        assert lost["state"] == "JOB_STATE_FAILED"
        assert "emulator stopped while this job was running" in lost["error"]["message"]
        names = [
            j["name"] for j in _raw(url.replace(first.vertex_endpoint, second.vertex_endpoint))["customJobs"]
        ]
        assert set(names) == {finished["name"], running["name"]}
