"""A `launcher: ray` job run here without Ray in the replicas' Python: one clear error before anything
starts (local-run's, or the failed job's message in the emulator), naming the extra to install."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from vertexdist.local import JobContext, JobState, start_job
from vertexdist.local.ray_check import RayNotInstalled, has_ray, ray_pools, require_ray
from vertexdist.wire.job_spec import parse_job_spec

CTX = JobContext(job_id="t", project="my-project", region="us-central1", gcs_root="/unused")


def launcher_pool(mode: str, replicas: int = 1) -> dict[str, Any]:
    return {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": replicas,
        "containerSpec": {
            "imageUri": "example.com/trainer:latest",
            "command": ["python", "-m", "vertexdist_launcher", mode, "--", "-m", "user.task"],
        },
    }


@pytest.fixture
def python_without_ray(tmp_path: Path) -> str:
    """This interpreter without its site-packages (-S), where Ray is installed."""
    wrapper = tmp_path / "python-without-ray"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def test_the_pools_running_the_ray_mode_are_found() -> None:
    job = parse_job_spec({"workerPoolSpecs": [launcher_pool("ray"), launcher_pool("ray", 2)]})
    assert ray_pools(job) == ["workerpool0", "workerpool1"]
    assert ray_pools(parse_job_spec({"workerPoolSpecs": [launcher_pool("torchrun")]})) == []


def test_ray_is_found_where_it_is_installed_and_not_elsewhere(python_without_ray: str) -> None:
    assert has_ray(sys.executable)
    assert not has_ray(python_without_ray)
    assert not has_ray("/nonexistent/python")
    torchrun_job = parse_job_spec({"workerPoolSpecs": [launcher_pool("torchrun")]})
    require_ray(torchrun_job, python_without_ray)  # no ray mode, nothing to check


def test_a_ray_job_without_ray_is_one_error_naming_the_extra(python_without_ray: str) -> None:
    job = parse_job_spec({"workerPoolSpecs": [launcher_pool("ray"), launcher_pool("ray")]})
    with pytest.raises(RayNotInstalled) as raised:
        require_ray(job, python_without_ray)
    assert raised.value.message == (
        f"workerpool0, workerpool1 run `launcher: ray`, and Ray is not installed for {python_without_ray}"
    )
    assert "pip install 'vertexdist[ray]' (that is ray[train,tune]==2.60.0)" in (raised.value.hint or "")


@pytest.mark.integration
def test_the_emulators_job_fails_before_starting_anything(tmp_path: Path, python_without_ray: str) -> None:
    spec = {"workerPoolSpecs": [launcher_pool("ray"), launcher_pool("ray")]}
    job = start_job(spec, CTX, run_dir=tmp_path / "run", fetch_package=Path, python=python_without_ray)
    result = job.wait(60)
    assert result is not None and result.state is JobState.FAILED
    assert result.error is not None and "Ray is not installed" in result.error.message
    assert "pip install 'vertexdist[ray]'" in result.error.message
    assert all(r.pid is None for r in result.replicas)  # nothing was started
