"""`vertexdist local-run` on a tuning template, as a user runs it (a real subprocess), with the Vertex-style
trial script: every trial runs as a local job with its `--name=value` args, CLOUD_ML_TRIAL_ID and a metric
file the study reads; the run ends with the best trial, its model folder and summary.json."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from vertexdist.backends import create_backend
from vertexdist.backends.base import LogQuery
from vertexdist.backends.local.prepare import LocalOptions

from .conftest import pid_alive

pytestmark = [pytest.mark.integration, pytest.mark.slow]
Template = Callable[..., Path]
GRID = {
    "parameter_spec": {
        "units": {"type": "integer", "min": 1, "max": 3},
        "opt": {"type": "categorical", "values": ["adam", "sgd"]},
    },
    "max_trial_count": 6,
    "parallel_trial_count": 2,
    "search_algorithm": "grid",
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One working folder for the module, so the installed-package cache is shared between runs."""
    return tmp_path_factory.mktemp("local-tune")


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "vertexdist", "local-run", *args]


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_GCE_CHECK": "true"}
    return subprocess.run(_cli(*args), cwd=cwd, capture_output=True, text=True, timeout=150, env=env)


def _summary(out: Path) -> dict[str, Any]:
    return dict(json.loads((out / "summary.json").read_text()))


def test_grid_covers_the_grid_once_and_ends_with_the_best_trial(
    workdir: Path, tmp_path: Path, tuning_template: Template, host_gcs: Any
) -> None:
    out = tmp_path / "run"
    result = _run(str(tuning_template(GRID, args=["--x=0.3"])), "--out", str(out), cwd=workdir)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = _summary(out)
    points = [
        tuple(sorted((p["parameterId"], p["value"]) for p in t["parameters"])) for t in summary["trials"]
    ]
    expected = {(("opt", o), ("units", u)) for u in (1, 2, 3) for o in ("adam", "sgd")}
    assert len(points) == len(set(points)) == 6 and set(points) == expected
    assert {t["state"] for t in summary["trials"]} == {"SUCCEEDED"}
    best = summary["best"]
    assert best["parameters"] == {"units": 3, "opt": "adam"}
    assert best["score"] == pytest.approx(1 - 1 / 100 + 0.05 - 0.1 / 3)  # its last of 3 steps
    assert Path(best["modelDir"], "score.txt").is_file()
    # The job's own folder (its job id), then the trial's, as Vertex lays trials out under a job's folder.
    assert best["modelDir"].endswith(f"tune-test/{summary['job_id']}/{best['trial']}/model")
    assert f"best trial {best['trial']}: score" in result.stdout and "model folder:" in result.stdout
    trial_log = (out / "trials" / best["trial"] / "logs" / "workerpool0-0.log").read_text()
    assert f"trial {best['trial']} args ['--x=0.3', '--units=3', '--opt=adam']" in trial_log
    # The local backend reads the finished run back as it reads a job: its state, one trial's logs.
    backend = create_backend("local", LocalOptions(runs_dir=out.parent))
    found = backend.describe(out.name)
    assert (found.state, found.display_name) == ("SUCCEEDED", summary["display_name"])
    page = backend.logs(out.name, query=LogQuery(trial=best["trial"]))
    assert {c.replica for c in page.chunks} == {f"{best['trial']}/workerpool0-0"}
    assert any("args ['--x=0.3', '--units=3', '--opt=adam']" in c.text for c in page.chunks)
    assert out.name in [s.name for s in backend.list()]
    # Continuing this tuning run is explicit: --resume-from names its folder as the trials' base.
    template = str(tuning_template(GRID, args=["--x=0.3"]))
    plan = _run(template, "--plan", "--resume-from", str(out), cwd=workdir)
    assert plan.returncode == 0, plan.stderr
    base = json.loads(plan.stdout)["hyperparameterTuningJob"]["trialJobSpec"]["baseOutputDirectory"]
    assert base["outputUriPrefix"].endswith(f"/tune-test/{summary['job_id']}")


def test_failing_trials_count_against_max_failed_trial_count(
    workdir: Path, tmp_path: Path, tuning_template: Template
) -> None:
    tuning = {
        "parameter_spec": {"units": {"type": "integer", "min": 1, "max": 6}},
        "max_trial_count": 6,
        "parallel_trial_count": 1,
        "max_failed_trial_count": 2,
        "search_algorithm": "grid",
    }
    out = tmp_path / "run"
    result = _run(str(tuning_template(tuning, args=["--fail-even"])), "--out", str(out), cwd=workdir)
    assert result.returncode == 1
    assert "error: 2 trials failed, as many as max_failed_trial_count allows (2)" in result.stderr
    summary = _summary(out)
    assert summary["state"] == "JOB_STATE_FAILED"
    assert [t["state"] for t in summary["trials"]] == ["SUCCEEDED", "INFEASIBLE", "SUCCEEDED", "INFEASIBLE"]
    assert "exited with a non-zero status of 1" in summary["trials"][1]["infeasibleReason"]
    # The cause, not only the exit status: the failed trial's last lines, in the summary and as it ran.
    assert "failing on purpose for units=2" in summary["trials"][1]["infeasibleReason"]
    shown = result.stdout.split(
        "trial 2 INFEASIBLE: The replica workerpool0-0 exited with a non-zero status of 1.\n"
    )
    assert len(shown) == 2 and "\n    failing on purpose for units=2\n" in shown[1].split("trial 3 ")[0]


def test_where_gcs_cannot_be_mapped_the_run_says_why_once_and_each_trial_fails_with_it(
    workdir: Path, tmp_path: Path, tuning_template: Template, host_gcs: Any, no_user_namespaces: Any
) -> None:
    """The trial script writes its score through /gcs; where no namespace can be made, local-run says why
    once for the whole run (not once per trial, nor never), and a trial's touch of /gcs fails with it."""
    tuning = {
        "parameter_spec": {"units": {"type": "integer", "min": 1, "max": 3}},
        "max_trial_count": 3,
        "parallel_trial_count": 3,
        "max_failed_trial_count": 3,
        "search_algorithm": "grid",
    }
    out = tmp_path / "run"
    argv = no_user_namespaces(_cli(str(tuning_template(tuning)), "--out", str(out)))
    env = {**os.environ, "NO_GCE_CHECK": "true"}
    result = subprocess.run(argv, cwd=workdir, capture_output=True, text=True, timeout=150, env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    said = [
        line
        for line in (result.stdout + result.stderr).splitlines()
        if "warning: /gcs is not this job's Cloud Storage here" in line
    ]
    assert len(said) == 1, result.stdout + result.stderr
    assert "may make no more user namespaces" in said[0] and "--docker" in said[0]
    log = (out / "trials" / "1" / "logs" / "workerpool0-0.log").read_text()
    assert "PermissionError: [Errno 13] vertexdist: /gcs is not this job's Cloud Storage here" in log


def test_median_stopping_stops_an_obvious_loser(
    workdir: Path, tmp_path: Path, tuning_template: Template
) -> None:
    tuning = {
        "parameter_spec": {"units": {"type": "categorical", "values": ["3", "5", "2", "40", "4"]}},
        "max_trial_count": 5,
        "parallel_trial_count": 1,
        "search_algorithm": "grid",
        "early_stopping": "median",
    }
    out = tmp_path / "run"
    result = _run(
        str(tuning_template(tuning, args=["--steps=6", "--sleep=0.4"])), "--out", str(out), cwd=workdir
    )
    assert result.returncode == 0, result.stdout + result.stderr
    trials = {t["parameters"][0]["value"]: t for t in _summary(out)["trials"]}
    loser = trials["40"]
    assert loser["stoppedEarly"] and loser["state"] == "SUCCEEDED"
    assert len(loser["measurements"]) < 6
    assert not trials["4"]["stoppedEarly"] and len(trials["4"]["measurements"]) == 6  # the best runs on
    assert "stopped early" in result.stdout


def test_sigint_stops_every_trial_and_leaves_no_process(
    workdir: Path, tmp_path: Path, tuning_template: Template
) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    tuning = {**GRID, "parallel_trial_count": 3}
    template = tuning_template(tuning, args=["--steps=1", "--sleep=60", f"--pid-dir={pids}"])
    out = tmp_path / "run"
    env = {**os.environ, "NO_GCE_CHECK": "true"}
    proc = subprocess.Popen(
        _cli(str(template), "--out", str(out)),
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while len(list(pids.iterdir())) < 3:
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    started = [int(p.stem) for p in pids.iterdir()]
    assert len(started) == 3 and not [pid for pid in started if pid_alive(pid)]
    summary = _summary(out)
    assert summary["state"] == "JOB_STATE_CANCELLED" and len(summary["trials"]) == 3
