"""The real Google Cloud CLI against the emulator: custom jobs (with `stream-logs`), tuning jobs, persistent
resources and a `gcloud storage` round trip (a multipart and a resumable upload, `mv`, `rm -r`).

gcloud is pointed at the emulator as docs/guide/gcloud.md says: a private `CLOUDSDK_CONFIG`,
`api_endpoint_overrides/aiplatform|logging|storage`, `auth/disable_credentials`, a project. Each gcloud call
takes seconds (its own start-up), so this is one test per client path, kept few."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

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


@pytest.fixture
def gcloud(emu: Emulator, tmp_path: Path) -> Gcloud:
    config = tmp_path / "gcloud-config"
    config.mkdir()
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
        "api_endpoint_overrides/aiplatform": emu.vertex_endpoint + "/",
        "api_endpoint_overrides/logging": emu.vertex_endpoint + "/",
        "api_endpoint_overrides/storage": emu.storage_endpoint + "/",
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

    def run(*args: str, check: bool = True) -> str:
        done = subprocess.run(
            ["gcloud", *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
        )
        if check and done.returncode != 0:
            raise AssertionError(f"gcloud {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}")
        return done.stdout

    run.env = env  # type: ignore[attr-defined]
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


def test_custom_job_and_its_logs_through_gcloud(gcloud: Gcloud, emu: Emulator, tmp_path: Path) -> None:
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
    deadline = time.monotonic() + 120
    state = ""
    while state != "JOB_STATE_SUCCEEDED" and time.monotonic() < deadline:
        state = gcloud("ai", "custom-jobs", "describe", name, "--format=value(state)").strip()
    assert state == "JOB_STATE_SUCCEEDED"
    assert name in gcloud("ai", "custom-jobs", "list", f"--region={REGION}", "--format=value(name)")


def test_tuning_job_and_persistent_resource_through_gcloud(gcloud: Gcloud, tmp_path: Path) -> None:
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
    described = gcloud("ai", "hp-tuning-jobs", "describe", created, f"--region={REGION}", "--format=json")
    assert '"displayName": "gcloud-study"' in described

    gcloud(
        "ai", "persistent-resources", "create", "--persistent-resource-id=gcloud-pool",
        "--resource-pool-spec=replica-count=1,machine-type=n1-standard-4", f"--region={REGION}",
    )  # fmt: skip
    listed = gcloud("ai", "persistent-resources", "list", f"--region={REGION}", "--format=value(name)")
    assert "persistentResources/gcloud-pool" in listed
    # A DELETE with no body and no content type (the request guard once answered 415).
    gcloud("ai", "persistent-resources", "delete", "gcloud-pool", f"--region={REGION}")


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
    gcloud("storage", "rm", "-r", "gs://gcloud-trip/in")
    listed = gcloud("storage", "ls", "-r", "gs://gcloud-trip/**")
    assert listed.split() == ["gs://gcloud-trip/kept/small.txt"]
    # the bucket's owner, as the API answers it (--raw): the project that made it
    number = gcloud(
        "storage", "buckets", "describe", "gs://gcloud-trip", "--raw", "--format=value(projectNumber)"
    )
    assert number.strip() == project_number(PROJECT)
