"""`validate`, `render --request` and `--help` stay light with a tuning template (no optuna, torch or SDK),
and `render --request` prints the CreateHyperparameterTuningJob body."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from .conftest import REPO_ROOT

_RUN_AND_REPORT = (
    "import sys, atexit\n"
    "atexit.register(lambda: print('HEAVY=' + ','.join(sorted(m for m in sys.modules if m.split('.')[0] in"
    " ('torch', 'optuna', 'ray') or m.startswith('google.cloud.aiplatform'))), file=sys.stderr))\n"
    "from vertexdist.cli.main import run\n"
    "run(sys.argv[1:])\n"
)


def vertexdist(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _RUN_AND_REPORT, *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
        env={**os.environ, "NO_GCE_CHECK": "true"},
    )


def heavy(result: subprocess.CompletedProcess[str]) -> str:
    [line] = [line for line in result.stderr.splitlines() if line.startswith("HEAVY=")]
    return line.removeprefix("HEAVY=")


def test_light_commands_on_a_tuning_template_import_nothing_heavy() -> None:
    for args in (("validate", "job_templates/cpu-tune.yaml"), ("trials", "--help"), ("local-run", "--help")):
        result = vertexdist(*args)
        assert result.returncode == 0, result.stderr
        assert heavy(result) == ""
    result = vertexdist("render", "job_templates/cpu-tune.yaml", "--request", "--format", "json")
    assert result.returncode == 0, result.stderr
    assert heavy(result) == ""
    body = json.loads(result.stdout)
    assert set(body) == {"parent", "hyperparameterTuningJob"}
    job = body["hyperparameterTuningJob"]
    assert job["studySpec"]["metrics"] == [{"metricId": "val_accuracy", "goal": "MAXIMIZE"}]
    assert (
        job["trialJobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["pythonModule"] == "trainer_pkg.task"
    )
