"""A local job's secret env values are masked wherever its logs are read later, as local-run masks them live:
`vertexdist logs` and the console's logs API, from the run folder alone (another process than the one that
ran the job), while `job.json` keeps them masked and only a 0600 `secrets.json` holds them."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from vertexdist.backends.base import LogQuery
from vertexdist.render import MASK

SECRET = "hunter2-s3cr3t-value"


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A finished one-replica local job whose replica prints its API_TOKEN (and fails, saying it again)."""
    from vertexdist.backends.local import LocalBackend
    from vertexdist.backends.local.prepare import LocalOptions, new_job_id
    from vertexdist.local.environment import JobContext
    from vertexdist.local.request import build_request
    from vertexdist.wire.job_spec import parse_job_spec

    root = tmp_path_factory.mktemp("secrets")
    runs = root / ".vertexdist" / "runs"
    job_id = new_job_id()
    code = "import os, sys; t = os.environ['API_TOKEN']; print('token is', t); sys.exit('bad ' + t)"
    env = [{"name": "API_TOKEN", "value": SECRET}, {"name": "PLAIN", "value": "x"}]
    pool = {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": 1,
        "containerSpec": {
            "imageUri": "example.com/standin:latest",
            "command": [sys.executable, "-c", code],
            "env": env,
        },
    }
    spec = {"workerPoolSpecs": [pool], "baseOutputDirectory": {"outputUriPrefix": f"gs://b/out/{job_id}"}}
    run_dir = runs / job_id
    ctx = JobContext(job_id=job_id, project="p", region="us-central1", gcs_root=str(run_dir / "gcs"))
    request = build_request(
        parse_job_spec(spec), ctx, run_dir=run_dir, sdists={}, cache_dir=root / "cache", display_name="secret"
    )
    backend = LocalBackend(LocalOptions(runs_dir=runs))
    backend.schedule(request)
    assert backend.job(job_id).wait(120) is not None
    return root, job_id


def test_the_run_folder_keeps_the_values_only_in_a_private_file(job: tuple[Path, str]) -> None:
    root, job_id = job
    run_dir = root / ".vertexdist" / "runs" / job_id
    assert SECRET not in (run_dir / "job.json").read_text()
    kept = run_dir / "secrets.json"
    assert json.loads(kept.read_text()) == {"values": [SECRET]}
    assert stat.S_IMODE(os.stat(kept).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(run_dir).st_mode) == 0o700
    # The replica's own log holds it in clear: the folder, not the file, is what keeps it the user's.
    assert any(SECRET in p.read_text() for p in (run_dir / "logs").glob("*.log"))


def test_a_new_reader_of_the_run_folder_masks_logs_and_the_error(job: tuple[Path, str]) -> None:
    from vertexdist.backends.local import LocalBackend
    from vertexdist.backends.local.prepare import LocalOptions

    root, job_id = job
    backend = LocalBackend(LocalOptions(runs_dir=root / ".vertexdist" / "runs"))  # not the one that ran it
    text = "".join(c.text for c in backend.logs(job_id, None, LogQuery()).chunks)
    assert f"token is {MASK}" in text and SECRET not in text
    status = backend.describe(job_id)
    assert status.state == "FAILED" and SECRET not in (status.error or "")


def test_the_console_logs_api_masks_them(job: tuple[Path, str]) -> None:
    from vertexdist.console.jobs import Console
    from vertexdist.console.refs import JobRef

    root, job_id = job
    console = Console(root / ".vertexdist" / "runs", cache_dir=root / "console-cache")
    page = console.logs(JobRef("local", job_id), None, LogQuery())
    text = "".join(c.text for c in page.chunks)
    assert MASK in text and SECRET not in text


def test_vertexdist_logs_masks_them(
    job: tuple[Path, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from vertexdist.cli import main

    root, job_id = job
    monkeypatch.chdir(root)
    with pytest.raises(SystemExit):
        main.run(["logs", job_id])
    out, err = capsys.readouterr()
    assert "token is" in out and SECRET not in out + err


def test_a_tuning_trials_logs_are_masked_from_its_own_folder(tmp_path: Path) -> None:
    from vertexdist.backends.local import LocalBackend
    from vertexdist.backends.local.prepare import LocalOptions
    from vertexdist.backends.local.trials import LocalTrialLauncher
    from vertexdist.local.environment import JobContext
    from vertexdist.tuning.study import TrialRecord

    code = "import os; print('token is', os.environ['API_TOKEN'])"
    pool = {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": 1,
        "containerSpec": {
            "imageUri": "example.com/standin:latest",
            "command": [sys.executable, "-c", code],
            "env": [{"name": "API_TOKEN", "value": SECRET}],
        },
    }
    run_dir = tmp_path / "tune"
    ctx = JobContext(job_id="tune", project="p", region="us-central1", gcs_root=str(run_dir / "gcs"))
    spec = {"workerPoolSpecs": [pool], "baseOutputDirectory": {"outputUriPrefix": "gs://b/out"}}
    launcher = LocalTrialLauncher(
        spec, ctx, run_dir=run_dir, sdists={}, cache_dir=tmp_path / "cache", parallel=1
    )
    trial = launcher.start(TrialRecord(id="1", parameters={}, args=()))
    assert trial.wait(60)
    trials = LocalBackend(LocalOptions(runs_dir=run_dir / "trials"))  # how the console reads a trial's page
    text = "".join(c.text for c in trials.logs("1", None, LogQuery()).chunks)
    assert f"token is {MASK}" in text and SECRET not in text
