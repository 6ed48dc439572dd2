"""`vertexdist local-run --fault-plan`: the emulator's faults on a local run, with the emulator's shapes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.integration

STANDIN = str(Path(__file__).with_name("standin_replica.py"))


def _template(path: Path, record: Path, sleep: float) -> Path:
    record.mkdir()
    doc = {
        "display_name": "faults-test",
        "project": "my-project",
        "location": "us-central1",
        "staging_bucket": "gs://my-bucket/staging",
        "trainer": {"script": STANDIN, "args": ["--record", str(record), "--sleep", str(sleep)]},
        "replica_count": 1,
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def _run(workdir: Path, template: Path, plan: str) -> tuple[subprocess.CompletedProcess[str], float]:
    faults = workdir / f"faults-{time.monotonic_ns()}.yaml"
    faults.write_text(plan)
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "vertexdist", "local-run", str(template), "--fault-plan", str(faults)],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=90,
    )
    return result, time.monotonic() - started


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("local-faults")


def test_preempt_terms_the_replica_and_fails_the_job_as_vertex_does(workdir: Path, tmp_path: Path) -> None:
    record = tmp_path / "records"
    template = _template(tmp_path / "job.yaml", record, sleep=60)
    plan = "- kind: preempt\n  replica: workerpool0-0\n  after: 1s\n  grace: 2s\n"
    result, took = _run(workdir, template, plan)
    assert result.returncode != 0
    assert "The replica workerpool0-0 was preempted" in result.stderr, result.stderr
    assert (record / "workerpool0-0.json").exists()  # it did start
    assert took < 40  # not the replica's 60 s


def test_stockout_fails_before_any_replica_starts(workdir: Path, tmp_path: Path) -> None:
    record = tmp_path / "records"
    template = _template(tmp_path / "job.yaml", record, sleep=0)
    result, _ = _run(workdir, template, "- kind: stockout\n  location: us-central1\n")
    assert result.returncode != 0
    assert "Resources are insufficient in region: us-central1" in result.stderr, result.stderr
    assert not any(record.iterdir())


def test_stockout_elsewhere_leaves_the_run_alone(workdir: Path, tmp_path: Path) -> None:
    record = tmp_path / "records"
    template = _template(tmp_path / "job.yaml", record, sleep=0)
    result, _ = _run(workdir, template, "- kind: stockout\n  location: europe-west4\n")
    assert result.returncode == 0, result.stderr
    assert (record / "workerpool0-0.json").exists()


def test_quota_refuses_the_run_with_vertex_s_message(workdir: Path, tmp_path: Path) -> None:
    record = tmp_path / "records"
    template = _template(tmp_path / "job.yaml", record, sleep=0)
    result, _ = _run(workdir, template, "- kind: quota\n")
    assert result.returncode != 0
    assert "The following quota metrics exceed quota limits" in result.stderr, result.stderr
    assert "custom_model_training_cpus" in result.stderr
    assert "Traceback" not in result.stderr
    assert not any(record.iterdir())


def test_a_bad_fault_plan_names_the_file_and_entry(workdir: Path, tmp_path: Path) -> None:
    record = tmp_path / "records"
    template = _template(tmp_path / "job.yaml", record, sleep=0)
    result, _ = _run(workdir, template, "- kind: preempt\n  replica: workerpool0-0\n- kind: stokout\n")
    assert result.returncode != 0
    assert "faults-" in result.stderr and ":3:" in result.stderr, result.stderr
    assert "entry 1" in result.stderr and "stockout" in result.stderr
    assert "Traceback" not in result.stderr
    assert not any(record.iterdir())


# `after` is 3 s so that the first run has set its SIGTERM handler, even on a loaded machine, before
# the fault fires.
# The replica's first run waits to be stopped (on SIGTERM it exits 0, as one that checkpoints does); its
# next run, the restarted replica's, succeeds. The marker is in its own folder, kept across restarts.
RESTARTED = """\
import os, signal, sys, time
if not os.path.exists("ran-once"):
    open("ran-once", "w").write("x")
    signal.signal(signal.SIGTERM, lambda *_: (print("got SIGTERM", flush=True), sys.exit(0)))
    print("first run", flush=True)
    time.sleep(60)
print("second run", flush=True)
"""


@pytest.mark.parametrize(
    "plan",
    [
        "- kind: preempt\n  outcome: worker_restarts\n  after: 3s\n  grace: 5s\n",
        "- kind: maintenance\n  after: 3s\n  grace: 5s\n",
    ],
    ids=["preempt-worker-restarts", "maintenance"],
)
def test_a_restarting_fault_restarts_the_replica_and_the_run_succeeds(
    workdir: Path, tmp_path: Path, plan: str
) -> None:
    script = tmp_path / "restarted.py"
    script.write_text(RESTARTED)
    template = tmp_path / "job.yaml"
    doc = {
        "display_name": "restart-test",
        "project": "my-project",
        "location": "us-central1",
        "staging_bucket": "gs://my-bucket/staging",
        "trainer": {"script": str(script)},
        "replica_count": 1,
    }
    template.write_text(yaml.safe_dump(doc))
    faults = tmp_path / "faults.yaml"
    faults.write_text(plan)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "vertexdist",
            "local-run",
            str(template),
            "--fault-plan",
            str(faults),
            "--json",
        ],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    summary = lines[-1]
    assert summary["state"] == "JOB_STATE_SUCCEEDED" and summary["restarts"] == 0, summary
    assert {r["name"]: r["restarts"] for r in summary["replicas"]} == {"workerpool0-0": 1}
    messages = [e.get("message", "") for e in lines if e.get("event") == "job"]
    assert any(
        m.startswith("restarting workerpool0-0 (1/5): The replica workerpool0-0 was") for m in messages
    )
    log = Path(summary["replicas"][0]["log"]).read_text()
    assert (
        log.index("got SIGTERM") < log.index("replica restart workerpool0-0 (1/5)") < log.index("second run")
    )
