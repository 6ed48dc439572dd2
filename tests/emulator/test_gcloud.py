"""The real Google Cloud CLI against the emulator: custom jobs (with `stream-logs`), tuning jobs, persistent
resources and a `gcloud storage` round trip (a multipart and a resumable upload, `mv`, `rm -r`).

gcloud is pointed at the emulator as docs/guide/gcloud.md says: a private `CLOUDSDK_CONFIG`,
`api_endpoint_overrides/aiplatform|logging|storage`, `auth/disable_credentials`, a project: one
configuration for the whole module. Each gcloud call takes seconds (its own start-up, 5-14 s on a loaded
machine), so this is one test per client path, and gcloud is called only for the requests that are its
own (creates, stream-logs' filter, a DELETE with no body, the storage forms: multipart, resumable, sliced
download, mv, rm -r) and one describe; waiting for a job's end and reading back what a call left (plain
GETs and lists) go through the Python clients.

Against the 16 gcloud calls of a configuration per test: 11, in one configuration."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from vertexdist.emulator import Emulator
from vertexdist.wire.projects import project_number

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("gcloud") is None, reason="the gcloud CLI is not installed here"),
]

PROJECT = "test-proj"
REGION = "us-central1"
BIG = 9 << 20  # over gcloud's storage/resumable_threshold (8 MiB): a resumable upload
Gcloud = Callable[..., str]


@pytest.fixture(scope="module")
def gcloud_env(emulator: Emulator, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """One gcloud configuration for every call of this module, pointed at the session emulator."""
    config = tmp_path_factory.mktemp("gcloud-config")
    env = {
        **os.environ,
        "CLOUDSDK_CONFIG": str(config),
        "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
        "CLOUDSDK_CORE_DISABLE_USAGE_REPORTING": "true",
        "CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK": "true",
    }
    settings = {
        "core/project": PROJECT,
        "core/check_gce_metadata": "false",
        "auth/disable_credentials": "true",
        "api_endpoint_overrides/aiplatform": emulator.vertex_endpoint + "/",
        "api_endpoint_overrides/logging": emulator.vertex_endpoint + "/",
        "api_endpoint_overrides/storage": emulator.storage_endpoint + "/",
    }
    # One properties file instead of a `gcloud config set` per setting (seconds each).
    sections: dict[str, list[str]] = {}
    for key, value in settings.items():
        section, name = key.split("/")
        sections.setdefault(section, []).append(f"{name} = {value}")
    (config / "configurations").mkdir()
    (config / "active_config").write_text("default")
    (config / "configurations" / "config_default").write_text(
        "".join(f"[{s}]\n" + "\n".join(lines) + "\n" for s, lines in sections.items())
    )
    return env


@pytest.fixture
def gcloud(emu: Emulator, gcloud_env: dict[str, str], tmp_path: Path) -> Gcloud:
    def run(*args: str, check: bool = True) -> str:
        done = subprocess.run(
            ["gcloud", *args], env=gcloud_env, cwd=tmp_path, capture_output=True, text=True, timeout=300
        )
        if check and done.returncode != 0:
            raise AssertionError(f"gcloud {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}")
        return done.stdout

    run.env = gcloud_env  # type: ignore[attr-defined]
    return run


def _job_config(path: Path, code: str) -> Path:
    path.write_text(
        "workerPoolSpecs:\n"
        "- machineSpec: {machineType: n1-standard-4}\n"
        "  replicaCount: 1\n"
        "  containerSpec:\n"
        "    imageUri: example.com/standin:latest\n"
        f"    command: [{sys.executable!r}, -c, {code!r}]\n"
    )
    return path


def test_custom_job_and_its_logs_through_gcloud(
    gcloud: Gcloud, emu: Emulator, job_client: Any, tmp_path: Path
) -> None:
    config = _job_config(tmp_path / "job.yaml", "print('hello from gcloud')")
    name = gcloud(
        "ai", "custom-jobs", "create", f"--region={REGION}", "--display-name=gcloud-job",
        f"--config={config}", "--format=value(name)",
    ).strip()  # fmt: skip
    assert name.startswith(f"projects/{PROJECT}/locations/{REGION}/customJobs/")
    # stream-logs (Cloud Logging's entries:list) follows until the job's line arrives; gcloud itself
    # keeps polling after a job ends, so the test stops it once the line is there.
    with subprocess.Popen(
        ["gcloud", "ai", "custom-jobs", "stream-logs", name],
        env=gcloud.env,  # type: ignore[attr-defined]
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as stream:
        assert stream.stdout is not None
        try:
            for line in stream.stdout:
                if "hello from gcloud" in line:
                    assert "workerpool0-0" in line
                    break
            else:
                pytest.fail(f"stream-logs ended (exit {stream.wait()}) without the job's line")
        finally:
            stream.kill()
    # Its end waited for through the Python client (no gcloud start-up per look), then described once.
    deadline = time.monotonic() + 120
    while not job_client.get_custom_job(name=name).end_time and time.monotonic() < deadline:
        time.sleep(0.1)
    state = gcloud("ai", "custom-jobs", "describe", name, "--format=value(state)").strip()
    assert state == "JOB_STATE_SUCCEEDED"
    parent = f"projects/{PROJECT}/locations/{REGION}"
    assert name in [job.name for job in job_client.list_custom_jobs(parent=parent)]


def test_tuning_job_and_persistent_resource_through_gcloud(
    gcloud: Gcloud, job_client: Any, emu: Emulator, tmp_path: Path
) -> None:
    trial = _job_config(tmp_path / "trial.yaml", "print('trial')").read_text()
    config = tmp_path / "study.yaml"
    config.write_text(
        "studySpec:\n"
        "  metrics: [{metricId: loss, goal: MINIMIZE}]\n"
        "  parameters: [{parameterId: lr, doubleValueSpec: {minValue: 0.001, maxValue: 0.1}}]\n"
        "trialJobSpec:\n" + "".join(f"  {line}\n" for line in trial.splitlines())
    )
    created = gcloud(
        "ai", "hp-tuning-jobs", "create", f"--region={REGION}", "--display-name=gcloud-study",
        f"--config={config}", "--max-trial-count=1", "--parallel-trial-count=1", "--format=value(name)",
    ).strip()  # fmt: skip
    assert "/hyperparameterTuningJobs/" in created
    assert job_client.get_hyperparameter_tuning_job(name=created).display_name == "gcloud-study"

    from google.auth.credentials import AnonymousCredentials
    from google.cloud.aiplatform_v1 import PersistentResourceServiceClient

    resources = PersistentResourceServiceClient(
        transport="rest",
        client_options={"api_endpoint": emu.vertex_endpoint},
        credentials=AnonymousCredentials(),
    )
    parent = f"projects/{PROJECT}/locations/{REGION}"
    gcloud(
        "ai", "persistent-resources", "create", "--persistent-resource-id=gcloud-pool",
        "--resource-pool-spec=replica-count=1,machine-type=n1-standard-4", f"--region={REGION}",
    )  # fmt: skip
    listed = [r.name for r in resources.list_persistent_resources(parent=parent)]
    assert f"{parent}/persistentResources/gcloud-pool" in listed
    # A DELETE with no body and no content type (the request guard once answered 415).
    gcloud("ai", "persistent-resources", "delete", "gcloud-pool", f"--region={REGION}")
    listed = [r.name for r in resources.list_persistent_resources(parent=parent)]
    assert f"{parent}/persistentResources/gcloud-pool" not in listed


def test_gcloud_storage_round_trip(gcloud: Gcloud, emu: Emulator, tmp_path: Path) -> None:
    small, big = tmp_path / "small.txt", tmp_path / "big.bin"
    small.write_text("hi from gcloud\n")
    big.write_bytes(os.urandom(BIG))
    gcloud("storage", "buckets", "create", "gs://gcloud-trip")
    gcloud("storage", "cp", str(small), str(big), "gs://gcloud-trip/in/")  # multipart, then resumable
    gcloud("storage", "mv", "gs://gcloud-trip/in/small.txt", "gs://gcloud-trip/kept/small.txt")
    back = tmp_path / "back"
    back.mkdir()
    gcloud("storage", "cp", "gs://gcloud-trip/in/big.bin", "gs://gcloud-trip/kept/small.txt", str(back))
    assert (back / "big.bin").read_bytes() == big.read_bytes()
    assert (back / "small.txt").read_text() == "hi from gcloud\n"
    gcloud("storage", "rm", "-r", "gs://gcloud-trip/in")  # it lists the folder's objects first
    # What is left, and the bucket's owner as the API answers it (the project that made it), read with the
    # Python client: the same list and bucket routes, without a gcloud start-up each.
    from google.cloud import storage

    client = storage.Client(project=PROJECT)
    assert [b.name for b in client.list_blobs("gcloud-trip")] == ["kept/small.txt"]
    assert str(client.get_bucket("gcloud-trip").project_number) == project_number(PROJECT)
