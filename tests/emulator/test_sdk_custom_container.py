"""google-cloud-aiplatform's own `test_from_local_script_custom_container` against the emulator, in a real
container (python-aiplatform, tests/system/aiplatform/test_custom_job.py: `CustomJob.from_local_script` of a
script that prints one line, with the custom image `gcr.io/deeplearning-platform-release/base-cpu`, then
`run()` and the job SUCCEEDED).

For a custom image the SDK's job runs `pip install --upgrade pip && pip3 install -q --user /gcs/.../package
&& python3 -m ...` inside the container. Here the daemon's networks have no route out and pip is offline
(`offline_pip`: a local wheelhouse, no index), so the container gets the emulator's pip settings with the
wheelhouse mounted (`vertexdist.local.container_pip`), as a host-mode job inherits them.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from vertexdist.container.docker import docker_daemon_answers
from vertexdist.emulator import Emulator

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.docker]

SDK_IMAGE = "gcr.io/deeplearning-platform-release/base-cpu"  # the image the SDK's test names
SDK_SCRIPT = 'print("Test CustomJob script.")\n'  # its test_resources/custom_job_script.py

needs_docker = pytest.mark.skipif(
    not docker_daemon_answers(),
    reason="no Docker daemon answers here (make test starts a private one as root: tests/docker_daemon.py)",
)


@needs_docker
def test_from_local_script_custom_container(
    aiplatform: Any, emu: Emulator, tmp_path: Path, offline_pip: Path
) -> None:
    from google.cloud.aiplatform.compat.types import job_state as gca_job_state  # type: ignore[attr-defined]

    from vertexdist.container.standin import ensure_standin

    # That image cannot be pulled here: the stand-in (made before the suite) is in the daemon under its name,
    # as `docker pull` would have left it. Its Python accepts `pip install --user`, as the real image's does.
    subprocess.run(["docker", "tag", ensure_standin(), SDK_IMAGE], check=True, capture_output=True)
    script = tmp_path / "custom_job_script.py"
    script.write_text(SDK_SCRIPT)

    custom_job = aiplatform.CustomJob.from_local_script(
        display_name="temp-vertex-sdk-custom-job-custom-container",
        script_path=str(script),
        container_uri=SDK_IMAGE,
    )
    custom_job.run()

    assert custom_job.state == gca_job_state.JobState.JOB_STATE_SUCCEEDED
    job_id = custom_job.resource_name.rsplit("/", 1)[1]
    assert emu.data_dir is not None
    job_dir = emu.data_dir / "jobs" / job_id
    logs = "".join(path.read_text() for path in emu.service.log_files(custom_job.resource_name).values())
    assert "Test CustomJob script." in logs
    # In a container of that image, not on this host (no sandbox in the job's folder): the image's own pip
    # answered, from the emulator's settings (no index), without waiting on an index it cannot reach.
    assert "Requirement already satisfied: pip in /opt/venv/" in logs, logs
    assert not (job_dir / "containers").exists()
