"""Day two of a local tuning run (issue 27, item 5): `logs`, `logs --trial`, `outputs`, `status` and `trials`
take its job id or its run folder, as a user types them after `local-run` ended; every hint local-run
prints is a command that works."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import PREBUILT_CPU_IMAGE, TRIAL_SCRIPT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

_TUNING = {
    "parameter_spec": {
        "x": {"type": "double", "min": 0.0, "max": 1.0},
        "units": {"type": "integer", "min": 1, "max": 6},
    },
    "max_trial_count": 3,
    "parallel_trial_count": 3,
}


def vertexdist(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_GCE_CHECK": "true"}
    env.pop("VERTEX_API_ENDPOINT", None)
    return subprocess.run(
        [sys.executable, "-m", "vertexdist", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def failed_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, str, subprocess.CompletedProcess[str]]:
    """One tuning run, seed 1, one trial at a time (units 5, then 2): trial 1 succeeds, trial 2 fails
    (--fail-even), and the job with it."""
    folder = tmp_path_factory.mktemp("day-two")
    (folder / "trial.py").write_text(TRIAL_SCRIPT.read_text())
    data = {
        "display_name": "day-two",
        "project": "my-project",
        "staging_bucket": "gs://my-bucket/staging",
        "container_uri": PREBUILT_CPU_IMAGE,
        "trainer": {"script": "trial.py", "args": ["--fail-even"]},
        "tuning": {
            "metric_spec": {"score": "maximize"},
            **_TUNING,
            "parallel_trial_count": 1,
            "max_failed_trial_count": 1,
        },
    }
    (folder / "job.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    result = vertexdist(folder, "local-run", "job.yaml", "--seed", "1")
    assert result.returncode == 1, result.stderr
    [job] = [p.name for p in (folder / ".vertexdist" / "runs").iterdir()]
    return folder, job, result


Run = tuple[Path, str, subprocess.CompletedProcess[str]]


def test_logs_of_a_failed_run_show_every_trial(failed_run: Run) -> None:
    folder, job, _ = failed_run
    result = vertexdist(folder, "logs", job)
    assert result.returncode == 0, result.stderr
    prefixes = {line.split("]")[0] + "]" for line in result.stdout.splitlines()}
    assert prefixes == {"[1/workerpool0-0]", "[2/workerpool0-0]"}
    assert "[2/workerpool0-0] failing on purpose for units=2" in result.stdout


def test_the_run_folder_is_the_job_too(failed_run: Run) -> None:
    folder, job, _ = failed_run
    by_id = vertexdist(folder, "logs", job)
    by_folder = vertexdist(folder, "logs", f".vertexdist/runs/{job}")
    assert by_folder.returncode == 0, by_folder.stderr
    assert by_folder.stdout == by_id.stdout
    outputs = vertexdist(folder, "outputs", str(folder / ".vertexdist" / "runs" / job))
    assert outputs.returncode == 0, outputs.stderr
    assert "1/model/" in outputs.stdout


def test_logs_of_one_trial_and_of_a_trial_it_has_not(failed_run: Run) -> None:
    folder, job, _ = failed_run
    result = vertexdist(folder, "logs", job, "--trial", "2")
    assert result.returncode == 0, result.stderr
    assert result.stdout and all(line.startswith("[2/") for line in result.stdout.splitlines())
    result = vertexdist(folder, "logs", job, "--trial", "5")
    assert result.returncode == 2
    assert f"{job} has no trial 5; its trials: 1, 2" in result.stderr


def test_status_and_trials_of_a_local_tuning_run(failed_run: Run) -> None:
    folder, job, _ = failed_run
    status = vertexdist(folder, "status", job)
    assert status.returncode == 1, status.stderr  # the job failed, as status says of any job
    assert "state:        FAILED" in status.stdout
    assert status.stdout.count("outputs:") == 1
    trials = vertexdist(folder, "trials", job)
    assert trials.returncode == 1, trials.stderr
    lines = trials.stdout.splitlines()
    assert lines[0] == f"{job}  FAILED  2 trials"
    assert re.match(r"trial\s+state\s+x\s+units\s+score\s+step$", lines[1])
    assert [line.split()[:2] for line in lines[2:4]] == [["1", "*"], ["2", "INFEASIBLE"]]
    assert lines[4].startswith("best: trial 1 (score ")
    as_json = json.loads(vertexdist(folder, "trials", job, "--json").stdout)
    assert [t["id"] for t in as_json] == ["1", "2"] and as_json[0]["best"] is True


def test_every_command_local_run_printed_works(failed_run: Run) -> None:
    folder, job, result = failed_run
    hints = [line.removeprefix("hint: ") for line in result.stderr.splitlines() if line.startswith("hint: ")]
    commands = [c for hint in hints for c in re.findall(r"vertexdist [^;,()]+?(?=$|[;,)]| or )", hint)]
    assert f"vertexdist logs {job} --trial 2" in commands
    for command in commands:
        ran = vertexdist(folder, *command.split()[1:])
        assert ran.returncode in (0, 1) and ran.stdout, (command, ran.stderr)


@pytest.fixture(scope="module")
def succeeded_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    folder = tmp_path_factory.mktemp("day-two-ok")
    (folder / "trial.py").write_text(TRIAL_SCRIPT.read_text())
    tuning = {**_TUNING, "max_trial_count": 2, "parallel_trial_count": 2}
    data = {
        "display_name": "day-two-ok",
        "project": "my-project",
        "staging_bucket": "gs://my-bucket/staging",
        "container_uri": PREBUILT_CPU_IMAGE,
        "trainer": {"script": "trial.py"},
        "tuning": {"metric_spec": {"score": "maximize"}, **tuning},
    }
    (folder / "job.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    result = vertexdist(folder, "local-run", "job.yaml", "--seed", "1")
    assert result.returncode == 0, result.stderr
    [job] = [p.name for p in (folder / ".vertexdist" / "runs").iterdir()]
    return folder, job


def test_logs_and_outputs_of_a_succeeded_run(succeeded_run: tuple[Path, str]) -> None:
    folder, job = succeeded_run
    logs = vertexdist(folder, "logs", job)
    assert logs.returncode == 0 and "[1/workerpool0-0] trial 1 args" in logs.stdout
    outputs = vertexdist(folder, "outputs", job)
    assert outputs.returncode == 0, outputs.stderr
    assert "1/model/score.txt" in outputs.stdout and "names no output folder" not in outputs.stderr
