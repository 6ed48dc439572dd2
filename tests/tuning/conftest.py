"""Fixtures for the tuning tests: a tuning template around the Vertex-style trial script."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

TRIAL_SCRIPT = Path(__file__).with_name("objective_trial.py")
PREBUILT_CPU_IMAGE = "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest"


def pid_alive(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie waiting for its parent to reap it is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


@pytest.fixture
def tuning_template(tmp_path: Path) -> Callable[..., Path]:
    """Write a template whose trainer is the trial script, with `tuning` and trainer `args`; its path."""

    def write(tuning: dict[str, Any], *, args: list[str] | None = None, name: str = "tune-test") -> Path:
        folder = tmp_path / name
        folder.mkdir(exist_ok=True)
        shutil.copy(TRIAL_SCRIPT, folder / "trial.py")
        data = {
            "display_name": name,
            "project": "my-project",
            "staging_bucket": "gs://my-bucket/staging",
            "container_uri": PREBUILT_CPU_IMAGE,
            "machine_type": "n1-standard-4",
            "trainer": {"script": "trial.py", "args": args or []},
            "tuning": {"metric_spec": {"score": "maximize"}, **tuning},
        }
        path = folder / "job.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return write
