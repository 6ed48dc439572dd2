"""`vertexdist logs` and `vertexdist outputs` of a local-run job, by its id or its run folder, as a user
runs them after `local-run`: real CLI processes, a real 2-replica job."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.integration

TRAINER = """\
import os, pathlib, sys
rank = os.environ["RANK"]
print(f"training on {rank}", flush=True)
print(f"a warning from {rank}", file=sys.stderr, flush=True)
if rank == "0":
    model = pathlib.Path(os.environ["VERTEXDIST_GCS_ROOT"], os.environ["AIP_MODEL_DIR"][len("gs://"):])
    model.mkdir(parents=True, exist_ok=True)
    (model / "model.bin").write_bytes(b"weights" * 1000)
"""


def vertexdist(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vertexdist", *args], cwd=cwd, capture_output=True, text=True, timeout=180
    )


def test_logs_and_outputs_of_a_local_run(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAINER)
    template = tmp_path / "job.yaml"
    template.write_text(
        yaml.safe_dump(
            {
                "display_name": "ops-local",
                "project": "my-project",
                "staging_bucket": "gs://my-bucket/staging",
                "trainer": {"script": "train.py"},
                "replica_count": 2,
            }
        )
    )
    run = vertexdist("local-run", str(template), cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    (run_dir,) = (tmp_path / ".vertexdist" / "runs").iterdir()

    logs = vertexdist("logs", run_dir.name, "--json", cwd=tmp_path)  # by id, from where local-run ran
    assert logs.returncode == 0, logs.stderr
    lines = {(r["replica"], r["line"], r["severity"]) for r in map(json.loads, logs.stdout.splitlines())}
    assert {
        ("workerpool0-0", "training on 0", "INFO"),
        ("workerpool0-0", "a warning from 0", "ERROR"),
        ("workerpool1-0", "training on 1", "INFO"),
        ("workerpool1-0", "a warning from 1", "ERROR"),
    } <= lines
    errors = vertexdist(
        "logs", str(run_dir), "--severity", "ERROR", "--replica", "workerpool1-0", cwd=tmp_path
    )
    assert errors.stdout.splitlines() == ["[workerpool1-0] a warning from 1"]

    listed = vertexdist("outputs", str(run_dir), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "model/model.bin" in listed.stdout and "6.8 KiB" in listed.stdout
    dest = tmp_path / "fetched"
    fetched = vertexdist("outputs", str(run_dir), "--download", str(dest), cwd=tmp_path)
    assert fetched.returncode == 0, fetched.stderr
    assert (dest / "model" / "model.bin").read_bytes() == b"weights" * 1000

    missing = vertexdist("logs", "local-20000101-000000-abcd", cwd=tmp_path)
    assert missing.returncode == 1 and "no run folder" in missing.stderr
