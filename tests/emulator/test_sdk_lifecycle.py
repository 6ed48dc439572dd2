"""Issue 17 through the real SDK: Delete (long-running operations), the Model a pipeline uploads,
requirements in a job environment, container jobs isolated from the host, credentials inside a job.

One emulator for the session (conftest), environments cached between jobs; pip is offline here (a tiny
local wheel stands for PyPI).
"""

from __future__ import annotations

import json
import site
import subprocess
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from vertexdist.container.docker import docker_daemon_answers
from vertexdist.emulator import Emulator

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PROJECT = "test-proj"
BUCKET = "vd-staging"
PREBUILT = "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest"
SERVING = "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-0:latest"

# Code that runs on Vertex unchanged: the job's credentials from the metadata server, a requirement.
CREDENTIALS_SCRIPT = """\
import google.auth, google.auth.transport.requests, vdreqdemo
credentials, project = google.auth.default()
credentials.refresh(google.auth.transport.requests.Request())
email = credentials.service_account_email
print("creds", project, type(credentials).__module__, email, bool(credentials.token))
print("requirement", vdreqdemo.VALUE)
"""


def _logs(emu: Emulator, name: str) -> str:
    return "".join(path.read_text() for path in emu.service.log_files(name).values())


def _command_job(aiplatform: Any, name: str, code: str, image: str = "python:3.11") -> Any:
    return aiplatform.CustomJob(
        display_name=name,
        worker_pool_specs=[
            {
                "machine_spec": {"machine_type": "n1-standard-4"},
                "replica_count": 1,
                "container_spec": {"image_uri": image, "command": ["python3", "-c", code]},
            }
        ],
    )


def test_delete_job_and_pipeline_then_404(aiplatform: Any, emu: Emulator) -> None:
    from google.api_core import exceptions

    job = _command_job(aiplatform, "to-delete", "print('bye')")
    job.run()
    job.delete()
    with pytest.raises(exceptions.NotFound):
        aiplatform.CustomJob.get(job.resource_name)

    pipeline = aiplatform.CustomContainerTrainingJob(
        display_name="pipeline-to-delete", container_uri="python:3.11", command=["python3", "-c", "print(1)"]
    )
    pipeline.run(replica_count=1, machine_type="n1-standard-4")
    backing = emu.store.get(pipeline.resource_name)["trainingTaskMetadata"]["backingCustomJob"]
    pipeline.delete()
    with pytest.raises(exceptions.NotFound):
        aiplatform.CustomContainerTrainingJob.get(pipeline.resource_name)
    with pytest.raises(exceptions.NotFound):
        aiplatform.CustomJob.get(backing)


def test_delete_answers_a_done_operation_that_get_serves(emu: Emulator, job_client: Any, pool: Any) -> None:
    from google.cloud.aiplatform_v1.types import CustomJob

    parent = f"projects/{PROJECT}/locations/us-central1"
    created = job_client.create_custom_job(
        parent=parent, custom_job=CustomJob(display_name="op", job_spec={"worker_pool_specs": [pool("pass")]})
    )
    emu.store.wait_until(created.name, lambda j: j["state"] == "JOB_STATE_SUCCEEDED", 30)
    operation = job_client.delete_custom_job(name=created.name)
    operation.result(timeout=10)
    assert operation.metadata.generic_metadata.create_time  # DeleteOperationMetadata, decoded
    with urllib.request.urlopen(f"{emu.vertex_endpoint}/v1/{operation.operation.name}") as answer:
        got = json.load(answer)
    assert got["done"] is True and got["name"].startswith(f"{parent}/operations/")
    assert got["metadata"]["@type"].endswith("google.cloud.aiplatform.v1.DeleteOperationMetadata")
    assert got["response"] == {"@type": "type.googleapis.com/google.protobuf.Empty"}


def test_a_running_job_refuses_deletion(aiplatform: Any, emu: Emulator) -> None:
    from google.api_core import exceptions

    emu.service.hold_get_s = 0
    job = _command_job(aiplatform, "busy", "import time; time.sleep(60)")
    job.submit()
    job.wait_for_resource_creation()
    try:
        with pytest.raises(exceptions.BadRequest) as refused:
            job.delete()
        assert "and cannot be deleted. Please cancel it or wait for its completion" in str(refused.value)
        assert aiplatform.CustomJob.get(job.resource_name).display_name == "busy"
    finally:
        job.cancel()
    emu.store.wait_until(job.resource_name, lambda j: j["state"] == "JOB_STATE_CANCELLED", 30)
    job.delete()


def test_run_hands_back_the_uploaded_model_with_the_trained_files(
    host_gcs: Any, aiplatform: Any, emu: Emulator, tmp_path: Path
) -> None:
    from google.api_core import exceptions
    from google.cloud import storage

    script = tmp_path / "train.py"
    script.write_text(
        "import os, pathlib\n"
        "from google.cloud import storage\n"
        "model_dir = os.environ['AIP_MODEL_DIR']\n"
        "bucket, _, prefix = model_dir[5:].partition('/')\n"
        "storage.Client(project='x').bucket(bucket).blob(prefix + 'weights.txt').upload_from_string('w')\n"
        "local = pathlib.Path(model_dir.replace('gs://', '/gcs/'))  # Cloud Storage FUSE, as on Vertex\n"
        "local.mkdir(parents=True, exist_ok=True)\n"
        "(local / 'config.json').write_text('{}')\n"
    )
    job = aiplatform.CustomTrainingJob(
        display_name="with-model",
        script_path=str(script),
        container_uri=PREBUILT,
        model_serving_container_image_uri=SERVING,
    )
    model = job.run(replica_count=1, machine_type="n1-standard-4", model_display_name="chapter-model")
    assert isinstance(model, aiplatform.Model)
    assert model.display_name == "chapter-model"
    assert (
        model.uri
        == job._gca_resource.training_task_inputs["base_output_directory"]["output_uri_prefix"] + "/model"
    )
    bucket, _, prefix = model.uri[5:].partition("/")
    names = {
        b.name.rsplit("/", 1)[1] for b in storage.Client(project=PROJECT).list_blobs(bucket, prefix=prefix)
    }
    assert {"weights.txt", "config.json"} <= names
    assert model.resource_name in [m.resource_name for m in aiplatform.Model.list()]
    assert aiplatform.Model(model.resource_name).container_spec.image_uri == SERVING

    # A second training run as a new version of that model (the model-registry sample's flow).
    again = aiplatform.CustomTrainingJob(
        display_name="with-model-v2",
        script_path=str(script),
        container_uri=PREBUILT,
        model_serving_container_image_uri=SERVING,
    )
    v2 = again.run(
        replica_count=1,
        machine_type="n1-standard-4",
        parent_model=model.resource_name,
        model_version_aliases=["candidate"],
    )
    assert (v2.resource_name, v2.version_id) == (model.resource_name, "2")
    assert aiplatform.Model(model.resource_name).version_id == "2"  # the new version became the default
    assert aiplatform.Model(model.resource_name, version="1").uri == model.uri
    assert aiplatform.Model(model.resource_name, version="candidate").uri != model.uri
    model.delete()
    with pytest.raises(exceptions.NotFound):
        aiplatform.Model(model.resource_name)


def test_requirements_install_into_a_job_env_cached_and_the_host_is_unchanged(
    aiplatform: Any, emu: Emulator, tmp_path: Path, offline_pip: Path, pip_freeze: Callable[[], str]
) -> None:
    before = pip_freeze()
    script = tmp_path / "task.py"
    script.write_text(CREDENTIALS_SCRIPT)
    envs = emu.data_dir / "package-cache" / "envs"
    for attempt in range(2):
        job = aiplatform.CustomTrainingJob(
            display_name=f"reqs-{attempt}",
            script_path=str(script),
            container_uri=PREBUILT,
            requirements=["vdreqdemo"],
        )
        job.run(replica_count=1, machine_type="n1-standard-4")
        logs = _logs(emu, job.resource_name)
        assert "requirement 42" in logs
        assert f"creds {PROJECT} google.auth.compute_engine.credentials service-{PROJECT}@" in logs
        ready = sorted(envs.glob("*/.vertexdist-env-ready"))
        if attempt == 0:
            first = [(p, p.stat().st_mtime_ns) for p in ready]
    assert [(p, p.stat().st_mtime_ns) for p in ready] == first  # the second job made no environment
    assert pip_freeze() == before


def test_custom_container_script_runs_isolated_and_leaves_the_host_alone(
    aiplatform: Any,
    emu: Emulator,
    tmp_path: Path,
    offline_pip: Path,
    pip_freeze: Callable[[], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")  # host mode, daemon or not
    before = pip_freeze()
    user_site = Path(site.getusersitepackages())
    user_site_before = sorted(user_site.rglob("*")) if user_site.exists() else None
    script = tmp_path / "task.py"
    script.write_text(CREDENTIALS_SCRIPT)
    # The SDK's custom-image form: `pip install --upgrade pip && pip3 install --user /gcs/... && python3 -m`.
    job = aiplatform.CustomJob.from_local_script(
        display_name="custom-image",
        script_path=str(script),
        container_uri="python:3.11",
        requirements=["vdreqdemo"],
    )
    job.run()
    logs = _logs(emu, job.resource_name)
    assert "requirement 42" in logs and f"creds {PROJECT}" in logs
    sandbox = emu.data_dir / "jobs" / job.resource_name.rsplit("/", 1)[1] / "containers" / "workerpool0-0"
    assert list((sandbox / "user").rglob("vdreqdemo/__init__.py"))  # the --user install stayed in the job
    assert pip_freeze() == before
    assert (sorted(user_site.rglob("*")) if user_site.exists() else None) == user_site_before


def test_an_image_without_a_command_needs_a_runtime(
    aiplatform: Any, emu: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")  # host mode, daemon or not
    job = aiplatform.CustomJob(
        display_name="entrypoint-only",
        worker_pool_specs=[
            {
                "machine_spec": {"machine_type": "n1-standard-4"},
                "replica_count": 1,
                "container_spec": {"image_uri": "python:3.11"},
            }
        ],
    )
    with pytest.raises(RuntimeError):
        job.run()
    message = emu.store.get(job.resource_name)["error"]["message"]
    assert "has no command" in message and "docker or podman" in message


needs_docker = pytest.mark.skipif(
    not docker_daemon_answers(),
    reason="no Docker daemon answers here (make test starts a private one as root: tests/docker_daemon.py)",
)


@pytest.mark.docker
@needs_docker
def test_container_jobs_run_in_the_runtime_when_one_answers(aiplatform: Any, emu: Emulator) -> None:
    from vertexdist.container.standin import ensure_standin

    image = ensure_standin()  # made before the suite by tests/docker_daemon.py; its Python is in /opt/venv
    job = _command_job(aiplatform, "in-docker", "import sys; print('in', sys.prefix)", image)
    job.run()
    assert "in /opt/venv" in _logs(emu, job.resource_name)


ENTRYPOINT_CODE = (
    "import json, os; t = json.loads(os.environ['CLUSTER_SPEC'])['task']; "
    "print('entrypoint', t['type'], t['index'])"
)


def _entrypoint_image() -> str:
    """An image whose ENTRYPOINT prints its replica's place, built on the stand-in (cached by the daemon)."""
    from vertexdist.container.standin import ensure_standin

    image = "vertexdist-test/entrypoint-only:1"
    dockerfile = f'FROM {ensure_standin()}\nENTRYPOINT ["python", "-c", {json.dumps(ENTRYPOINT_CODE)}]\n'
    built = subprocess.run(
        ["docker", "build", "--tag", image, "-"],
        input=dockerfile,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    return image


@pytest.mark.docker
@needs_docker
def test_an_image_without_a_command_runs_its_entrypoint_in_containers(aiplatform: Any, emu: Emulator) -> None:
    image = _entrypoint_image()
    job = aiplatform.CustomContainerTrainingJob(display_name="entrypoint-only", container_uri=image)
    job.run(replica_count=2, machine_type="n1-standard-4")
    assert job.state.name == "PIPELINE_STATE_SUCCEEDED"
    logs = _logs(emu, job.resource_name)
    assert "entrypoint workerpool0 0" in logs and "entrypoint workerpool1 0" in logs
    left = subprocess.run(
        ["docker", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True, check=True
    ).stdout
    assert "workerpool" not in left
