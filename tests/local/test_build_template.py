"""local-run of a `build` template: replicas run the image's command on the host, from the context."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

TASK = """\
import json, os, sys
spec = json.loads(os.environ["CLUSTER_SPEC"])
print("replica", spec["task"]["type"], spec["task"]["index"], "greeting", os.environ.get("GREETING"),
      "from", os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "args", sys.argv[1:])
"""


def _context(root: Path) -> Path:
    context = root / "ctx"
    (context / "mytrainer").mkdir(parents=True)
    (context / "mytrainer" / "__init__.py").write_text("")
    (context / "mytrainer" / "task.py").write_text(TASK)
    (context / "Dockerfile").write_text(
        'FROM python:3.11-slim\nENV GREETING="hello from the image"\nCOPY . /app\nWORKDIR /app\n'
        'ENTRYPOINT ["python", "-m", "mytrainer.task"]\n'
    )
    template = root / "job.yaml"
    template.write_text(
        "display_name: build-job\nproject: my-project\nlocation: us-central1\n"
        "staging_bucket: gs://my-bucket/staging\nmachine_type: n1-standard-4\nreplica_count: 2\n"
        "trainer:\n  args: ['--epochs=1']\n"
        "build:\n  context: ctx\n  dockerfile: ctx/Dockerfile\n"
        "  repository: us-central1-docker.pkg.dev/my-project/trainers\n"
    )
    return template


def test_replicas_run_the_dockerfile_entrypoint_from_the_build_context(tmp_path: Path) -> None:
    template = _context(tmp_path)
    out = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, "-m", "vertexdist", "local-run", str(template), "--json", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["state"] == "JOB_STATE_SUCCEEDED"
    for name in ("workerpool0-0", "workerpool1-0"):
        log = (out / "logs" / f"{name}.log").read_text()
        pool, index = name.split("-")
        assert f"replica {pool} {index} greeting hello from the image" in log
        assert f"from {(tmp_path / 'ctx').resolve()}" in log
        assert "args ['--epochs=1']" in log
    assert not (out / "package").exists()
