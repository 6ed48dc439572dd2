"""Secrets stay out of what vertexdist writes and prints (issue 12): no secret env value anywhere in a run
folder or in local-run's output, and the run folder is the user's alone (files 0600, folders 0700)."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.integration

SECRET = "s3cr3t-value-8d1f"
SCRIPT = """\
import os, pathlib
root, uri = os.environ["VERTEXDIST_GCS_ROOT"], os.environ["AIP_MODEL_DIR"]
model = pathlib.Path(root, uri.removeprefix("gs://"), "model.txt")
model.parent.mkdir(parents=True, exist_ok=True)
model.write_text("weights")
print("plain is", os.environ["PLAIN"])
if os.environ.get("SAY_IT"):
    print("token is", os.environ["API_TOKEN"])
"""


def _local_run(
    tmp_path: Path, *flags: str, say_it: bool = False
) -> tuple[subprocess.CompletedProcess[str], Path]:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {"API_TOKEN": SECRET, "PLAIN": "visible", **({"SAY_IT": "1"} if say_it else {})}
    template = tmp_path / "job.yaml"
    template.write_text(
        yaml.safe_dump(
            {
                "display_name": "secretive",
                "project": "my-project",
                "staging_bucket": "gs://my-bucket/staging",
                "trainer": {"script": str(script), "env": env},
                "replica_count": 2,
            }
        )
    )
    out = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, "-m", "vertexdist", "local-run", str(template), "--out", str(out), *flags],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return result, out


def _files_holding(folder: Path, text: str) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


@pytest.mark.parametrize("flags", [[], ["--json"]])
def test_no_secret_in_the_run_folder_or_in_what_local_run_prints(tmp_path: Path, flags: list[str]) -> None:
    result, out = _local_run(tmp_path, *flags)
    assert result.returncode == 0, result.stderr
    assert SECRET not in result.stdout + result.stderr
    assert "visible" in result.stdout  # the replicas' output is shown, only the secret is not
    # Only secrets.json holds it (0600, for masking logs later: docs/commands/local-run.md).
    assert _files_holding(out, SECRET) == [out / "secrets.json"]
    assert (out / "secrets.json").stat().st_mode & 0o777 == 0o600
    spec = json.loads((out / "job.json").read_text())
    env = spec["workerPoolSpecs"][0]["pythonPackageSpec"]["env"]
    assert {"name": "API_TOKEN", "value": "********"} in env and {"name": "PLAIN", "value": "visible"} in env
    # Without the masks the grep above would prove nothing: the replicas did get the real value.
    assert (out / "logs" / "workerpool0-0.log").read_text().count("plain is visible") == 1


def test_a_secret_a_replica_prints_is_masked_in_local_runs_output(tmp_path: Path) -> None:
    result, out = _local_run(tmp_path, say_it=True)
    assert result.returncode == 0, result.stderr
    assert "token is ********" in result.stdout and SECRET not in result.stdout + result.stderr
    # The log file is the replica's own output, kept as it printed it, for the user only.
    assert f"token is {SECRET}" in (out / "logs" / "workerpool0-0.log").read_text()


def test_the_run_folder_is_the_users_alone(tmp_path: Path) -> None:
    result, out = _local_run(tmp_path)
    assert result.returncode == 0, result.stderr

    def mode(path: Path) -> int:
        return stat.S_IMODE(path.stat().st_mode)

    assert mode(out) == 0o700
    for name in ("job.json", "plan.json", "summary.json"):
        assert mode(out / name) == 0o600, name
    for folder in (out / "logs", out / "replicas" / "workerpool0-0", out / "replicas" / "workerpool1-0"):
        assert mode(folder) == 0o700, folder
    logs = sorted((out / "logs").glob("*.log"))
    assert [p.name for p in logs] == ["workerpool0-0.log", "workerpool1-0.log"]
    assert all(mode(p) == 0o600 for p in logs)
