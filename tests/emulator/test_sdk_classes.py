"""The Vertex docs' SDK examples, unchanged, against the emulator (REST, anonymous credentials).

CustomJob (run, submit, cancel, list, get), CustomTrainingJob (script), CustomPythonPackageTrainingJob
(package), CustomContainerTrainingJob. The replicas really run: scripts are packaged by the SDK, uploaded
to the emulated bucket, installed and run with Vertex's environment.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from vertexdist.emulator import Emulator

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PROJECT = "test-proj"
BUCKET = "vd-staging"
PREBUILT = "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest"
SCRIPT = """\
import json, os, sys
spec = json.loads(os.environ["CLUSTER_SPEC"])
task = spec["task"]
print("task", task["type"], task["index"], "rank", os.environ.get("RANK"), "args", sys.argv[1:])
print("model dir", os.environ["AIP_MODEL_DIR"])
"""


def _replica_logs(emu: Emulator, name: str) -> dict[str, str]:
    return {replica: path.read_text() for replica, path in emu.service.log_files(name).items()}


def _one_replica_job(aiplatform: Any, display_name: str, image_uri: str, code: str) -> Any:
    """A CustomJob of one replica that runs `code` with this Python (the emulator runs it on the host)."""
    return aiplatform.CustomJob(
        display_name=display_name,
        worker_pool_specs=[
            {
                "machine_spec": {"machine_type": "n1-standard-4"},
                "replica_count": 1,
                "container_spec": {"image_uri": image_uri, "command": [sys.executable, "-c", code]},
            }
        ],
    )


def test_custom_job_run_list_get(aiplatform: Any, emu: Emulator) -> None:
    job = _one_replica_job(aiplatform, "docs-custom-job", "example.com/x", "print('cj ok')")
    job.run()
    assert job.state.name == "JOB_STATE_SUCCEEDED"
    assert job.resource_name in [j.resource_name for j in aiplatform.CustomJob.list()]
    again = aiplatform.CustomJob.get(job.resource_name)
    assert again.display_name == "docs-custom-job"
    assert "cj ok" in _replica_logs(emu, job.resource_name)["workerpool0-0"]


def test_custom_job_submit_then_cancel(aiplatform: Any, emu: Emulator) -> None:
    emu.service.hold_get_s = 0
    job = _one_replica_job(aiplatform, "docs-cancel", "x", "import time; time.sleep(60)")
    job.submit()
    job.wait_for_resource_creation()
    job.cancel()
    deadline = time.monotonic() + 20
    while job.state.name != "JOB_STATE_CANCELLED":
        assert time.monotonic() < deadline, job.state
        time.sleep(0.1)


def test_custom_training_job_from_script(aiplatform: Any, emu: Emulator, tmp_path: Path) -> None:
    script = tmp_path / "task.py"
    script.write_text(SCRIPT)
    job = aiplatform.CustomTrainingJob(
        display_name="docs-script", script_path=str(script), container_uri=PREBUILT
    )
    model = job.run(replica_count=2, machine_type="n1-standard-4", args=["--epochs", "2"], sync=True)
    assert model is None  # no model_serving_container: nothing to upload, as on Vertex
    assert job.state.name == "PIPELINE_STATE_SUCCEEDED"
    logs = _replica_logs(emu, job.resource_name)
    assert "task workerpool0 0 rank 0 args ['--epochs', '2']" in logs["workerpool0-0"]
    assert "task workerpool1 0 rank 1" in logs["workerpool1-0"]
    assert "aiplatform-custom-training-" in logs["workerpool0-0"]  # the SDK's default base output dir


def test_python_package_training_job(aiplatform: Any, emu: Emulator, tmp_path: Path) -> None:
    from google.cloud import storage

    from vertexdist.packaging import build_sdist

    package = tmp_path / "mytrainer"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "task.py").write_text(SCRIPT)

    trainer = SimpleNamespace(package=package, script=None, requirements=[])
    built = build_sdist(trainer, tmp_path / "dist")
    blob = storage.Client(project=PROJECT).bucket(BUCKET).blob(f"pkgs/{built.filename}")
    blob.upload_from_filename(str(built.path))
    job = aiplatform.CustomPythonPackageTrainingJob(
        display_name="docs-package",
        python_package_gcs_uri=f"gs://{BUCKET}/pkgs/{built.filename}",
        python_module_name="mytrainer.task",
        container_uri=PREBUILT,
    )
    job.run(replica_count=1, machine_type="n1-standard-4", args=["--lr", "0.1"])
    assert job.state.name == "PIPELINE_STATE_SUCCEEDED"
    assert "args ['--lr', '0.1']" in _replica_logs(emu, job.resource_name)["workerpool0-0"]


def test_custom_container_training_job(aiplatform: Any, emu: Emulator) -> None:
    job = aiplatform.CustomContainerTrainingJob(
        display_name="docs-container",
        container_uri="example.com/trainer:latest",
        command=[sys.executable, "-c", "import os; print('world', os.environ['WORLD_SIZE'])"],
    )
    job.run(replica_count=2, machine_type="n1-standard-4")
    assert job.state.name == "PIPELINE_STATE_SUCCEEDED"
    assert "world 2" in _replica_logs(emu, job.resource_name)["workerpool0-0"]
    listed = [j.resource_name for j in aiplatform.CustomContainerTrainingJob.list()]
    assert job.resource_name in listed
