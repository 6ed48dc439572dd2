"""Every local run its own output folder (issue 12): a rerun of a template trains from step 0, two runs at
once both succeed, and continuing an earlier run is explicit (`--resume-from`). Real runs of the bundled
trainer, which records where it started in its model folder's metrics.jsonl. The rerun and the two runs at
once run cold and with `--warm` (`replica_start`, tests/conftest.py; the first run they rerun is cold)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TEMPLATE = {
    "display_name": "output-folders",
    "project": "my-project",
    "staging_bucket": "gs://my-bucket/staging",
    "trainer": {
        "args": [
            "--epochs=1",
            "--batch-size=16",
            "--samples=256",
            "--data=synthetic",
            "--checkpoint-every=4",
        ],
        "env": {"OMP_NUM_THREADS": "1"},
    },
    "replica_count": 1,
    "timeout": "120s",
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One working folder (and so one runs folder and package cache) for the module's runs."""
    return tmp_path_factory.mktemp("output-folders")


def _local_run(workdir: Path, *args: str, start: Any = None) -> subprocess.Popen[str]:
    template = workdir / "job.yaml"
    template.write_text(yaml.safe_dump(TEMPLATE))
    cli = start.local_run() if start else [sys.executable, "-m", "vertexdist", "local-run"]
    return subprocess.Popen(
        [*cli, str(template), "--json", *args],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=150)
    assert proc.returncode == 0, (out[-4000:], err[-2000:])
    summary = json.loads(out.splitlines()[-1])
    assert summary["event"] == "summary" and summary["state"] == "JOB_STATE_SUCCEEDED"
    return dict(summary)


def _metrics(summary: dict[str, Any]) -> list[dict[str, Any]]:
    path = Path(summary["output_path"]) / "model" / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _started_fresh(summary: dict[str, Any]) -> bool:
    events = _metrics(summary)
    first = [e for e in events if e["event"] == "first_step"]
    return not any(e["event"] == "resumed" for e in events) and [e["global_step"] for e in first] == [1]


@pytest.fixture(scope="module")
def first(workdir: Path) -> dict[str, Any]:
    """The summary of a first run of the template, for the tests that rerun or resume it."""
    return _finish(_local_run(workdir))


def test_a_rerun_trains_from_step_0_and_resuming_is_explicit(
    workdir: Path, first: dict[str, Any], replica_start: Any
) -> None:
    replica_start.watch(workdir)
    second = _finish(_local_run(workdir, start=replica_start))
    assert first["output_dir"].endswith(f"/output-folders/{first['job_id']}")
    assert second["output_dir"].endswith(f"/output-folders/{second['job_id']}")
    assert _started_fresh(first) and _started_fresh(second), (_metrics(first), _metrics(second))

    # The rerun is resumed (not `first`: each variant resumes a run of its own, so `first` stays fresh).
    resumed_proc = _local_run(workdir, "--resume-from", second["job_id"], start=replica_start)
    resumed = _finish(resumed_proc)
    assert resumed["output_dir"] == second["output_dir"]
    assert Path(resumed["output_path"]).resolve() == Path(second["output_path"]).resolve()
    events = _metrics(resumed)  # the second run's file, continued
    last_step = max(e["global_step"] for e in events if e["event"] == "done")
    assert [e["global_step"] for e in events if e["event"] == "resumed"] == [last_step]
    # The resumed run's spec names the folder it continued, as the request to Vertex would.
    spec = json.loads((Path(resumed["run_dir"]) / "job.json").read_text())
    assert spec["baseOutputDirectory"]["outputUriPrefix"] == second["output_dir"]


def test_two_runs_at_once_both_succeed_in_their_own_folders(workdir: Path, replica_start: Any) -> None:
    replica_start.watch(workdir)
    runs = [_local_run(workdir, start=replica_start), _local_run(workdir, start=replica_start)]
    summaries = [_finish(run) for run in runs]
    assert summaries[0]["output_dir"] != summaries[1]["output_dir"]
    assert all(_started_fresh(s) for s in summaries)


def test_plan_shows_the_folder_a_resumed_run_writes_to(workdir: Path, first: dict[str, Any]) -> None:
    plan = _local_run(workdir, "--plan", "--resume-from", str(Path(first["run_dir"])))
    out, err = plan.communicate(timeout=60)
    assert plan.returncode == 0, err
    env = json.loads(out)["replicas"][0]["env"]
    assert env["AIP_CHECKPOINT_DIR"] == f"{first['output_dir']}/checkpoints/"
    assert Path(env["VERTEXDIST_GCS_ROOT"]) == (Path(first["run_dir"]) / "gcs").resolve()
    missing = _local_run(workdir, "--resume-from", "local-19700101-000000-0000")
    _, err = missing.communicate(timeout=60)
    assert missing.returncode == 2 and "no earlier local run" in err and "Traceback" not in err
