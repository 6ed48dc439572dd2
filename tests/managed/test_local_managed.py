"""`local-run` of a template with `recovery:`: the managed controller over local runs (real processes, the
bundled trainer on CPU)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from vertexdist.jobs.local_attempts import MARKER, WARM_NOTE, LocalAttempts, LocalPlace
from vertexdist.managed import store as st
from vertexdist.managed.controller import Controller
from vertexdist.managed.reasons import Reason, reason_of
from vertexdist.spec import load_template

pytestmark = [pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]


def _template(tmp: Path, *, samples: int, timeout: str = "240s") -> Path:
    body = {
        "display_name": "lm-test",
        "project": "my-project",
        "location": "us-central1",
        "staging_bucket": "gs://my-bucket/staging",
        "machine_type": "n1-standard-4",
        "scheduling_strategy": "SPOT",
        "replica_count": 1,
        "trainer": {
            "args": [
                "--epochs=2",
                "--batch-size=16",
                f"--samples={samples}",
                "--data=synthetic",
                "--seed=3",
                "--checkpoint-every=200",
                "--keep-checkpoints=1000",
            ],
            "env": {"OMP_NUM_THREADS": "1"},
        },
        "timeout": timeout,
        "recovery": {"max_preemptions": 3},
    }
    path = tmp / "job.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "NO_GCE_CHECK": "true"}


def _cli(cwd: Path, *args: str, timeout: float = 450) -> subprocess.CompletedProcess[str]:
    """A bound, not an aim: `make stress` (a CPU hog, load average 17) saw an undisturbed run take 251 s."""
    return subprocess.run(
        [sys.executable, "-m", "vertexdist", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_create_the_controller_did_not_record_is_found_by_its_label_not_made_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = _template(tmp_path, samples=200000)
    template = load_template(path)
    store = st.Store(tmp_path / "managed.sqlite")
    managed = store.create(str(path), "local", {})
    attempt = store.plan_attempt(managed.id, 0, "us-central1", "n1-standard-4", "SPOT")
    place = LocalPlace(runs_dir=str(tmp_path / "runs"), grace_s=1.0)
    # The first controller created the job, then died before writing `created`.
    first = LocalAttempts(place)
    created = first.create(template, attempt.label, None)
    try:
        again = LocalAttempts(place)  # the resumed controller's, in a "new process"
        controller = Controller(store, managed.id, template, again, poll_s=0.05, sleep=lambda _s: None)
        assert controller.step()
        (recorded,) = store.attempts(managed.id)
        assert recorded.phase == st.CREATED and recorded.job == created.name
        assert len(list((tmp_path / "runs").glob(f"*/{MARKER}"))) == 1  # no second job
        # A job this process did not start, and that has not ended, was lost with its supervisor.
        status = again.describe(template, created.name)
        assert status.state == "FAILED" and reason_of(status) is Reason.TRANSIENT
        assert again.find(template, f"{managed.id}-a2") is None
    finally:
        first.interrupt()
        first.wait()
    assert first.describe(template, created.name).state == "CANCELLED"


def test_ctrl_c_cancels_the_running_attempt_and_exits_130(tmp_path: Path) -> None:
    path = _template(tmp_path, samples=2000000)
    proc = subprocess.Popen(
        [sys.executable, "-m", "vertexdist", "local-run", str(path), "--grace", "2"],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    assert first.startswith("managed: m-"), first
    managed_id = first.split()[1]
    line = proc.stderr.readline()
    assert "attempt 1: local-" in line, line
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    shown = json.loads(_cli(tmp_path, "managed", "status", managed_id, "--json").stdout)
    assert shown["state"] == "CANCELLED"
    assert [a["reason"] for a in shown["attempts"]] == ["CANCELLED"]
    listed = _cli(tmp_path, "managed", "list").stdout
    assert managed_id in listed and "CANCELLED" in listed


def _outputs(err: str) -> Path:
    (outputs,) = re.findall(r"^outputs: (.+)$", err, re.M)
    return Path(outputs)


# One template serves the preempted and the hung run, and one undisturbed run of it their model bytes: 500
# steps (4,000 samples, 16 a step, 2 epochs), a checkpoint every 50.
EVERY = 50


def _recovered_template(tmp: Path) -> Path:
    path = _template(tmp, samples=4000)
    body = yaml.safe_load(path.read_text())
    body["trainer"]["args"] = [a for a in body["trainer"]["args"] if not a.startswith("--checkpoint-every")]
    body["trainer"]["args"].append(f"--checkpoint-every={EVERY}")
    body["health"] = {"hang_timeout": "4s"}
    body["recovery"] = {"max_preemptions": 3, "max_hangs": 1}
    path.write_text(yaml.safe_dump(body))
    return path


@pytest.fixture(scope="module")
def undisturbed_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The SHA-256 of the model an undisturbed run of `_recovered_template` writes."""
    tmp = tmp_path_factory.mktemp("undisturbed")
    undisturbed = _cli(tmp, "local-run", str(_recovered_template(tmp)))
    assert undisturbed.returncode == 0, undisturbed.stderr[-3000:]
    return hashlib.sha256((_outputs(undisturbed.stderr) / "model" / "model.pt").read_bytes()).hexdigest()


@pytest.mark.slow
@pytest.mark.timeout(900)  # 2 runs on a loaded machine (each up to 450 s)
def test_a_spot_run_preempted_twice_ends_with_the_same_model_bytes_as_an_undisturbed_run(
    tmp_path: Path, undisturbed_model: str
) -> None:
    path = _recovered_template(tmp_path)
    plan = tmp_path / "plan.yaml"
    # Aimed at a step, not a time, however fast or loaded the machine is: each attempt is held at its 100th
    # step until the platform's SIGTERM, which the trainer answers as on Vertex: it saves at its next stop
    # check and exits (the grace is only a bound). So attempt 2 resumes where attempt 1 stopped, and attempt
    # 3 where attempt 2 stopped. An exact resume still gives the undisturbed run's bytes.
    plan.write_text(
        "- kind: preempt\n  replica: workerpool0-0\n  after_step: 100\n  grace: 60s\n  times: 2\n"
    )
    preempted = _cli(tmp_path, "local-run", str(path), "--fault-plan", str(plan))
    assert preempted.returncode == 0, preempted.stderr[-3000:]
    managed_id = preempted.stdout.split()[1]
    shown = json.loads(_cli(tmp_path, "managed", "status", managed_id, "--json").stdout)
    reasons = [a["reason"] for a in shown["attempts"]]
    assert reasons == ["PREEMPTED", "PREEMPTED", "SUCCEEDED"], reasons
    runs = [tmp_path / ".vertexdist" / "runs" / a["job"] for a in shown["attempts"]]
    logs = [next((run / "logs").glob("workerpool0-*.log")).read_text() for run in runs]
    resumed = [re.findall(r"^resumed from .*/checkpoints/step-0*(\d+)/state.pt", log, re.M) for log in logs]
    stopped = [
        re.findall(r"^stopping on request after step (\d+); checkpoint saved", log, re.M) for log in logs
    ]
    assert stopped[2] == [] and resumed == [[], stopped[0], stopped[1]], (resumed, stopped)
    first, second = int(stopped[0][0]), int(stopped[1][0])
    assert first >= 100 and second >= first + 100, stopped  # each held at its 100th step, then saved
    # A recovery starts warm: the 2nd and 3rd attempts' replicas were forked from the controller's own pool.
    for run, warm, log in zip(runs, [False, True, True], logs, strict=True):
        assert (WARM_NOTE in (run / "events.jsonl").read_text()) is warm, run
        assert not warm or "starting this replica cold" not in log, log[-2000:]  # not fallen back
    actual = hashlib.sha256((_outputs(preempted.stderr) / "model" / "model.pt").read_bytes())
    assert actual.hexdigest() == undisturbed_model


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_hung_attempt_is_retried_from_its_checkpoints_and_ends_with_the_same_model_bytes(
    tmp_path: Path, undisturbed_model: str
) -> None:
    path = _recovered_template(tmp_path)
    plan = tmp_path / "plan.yaml"
    plan.write_text("- kind: hang\n  replica: workerpool0-0\n  after_step: 120\n  times: 1\n")
    hung = _cli(tmp_path, "local-run", str(path), "--fault-plan", str(plan))
    assert hung.returncode == 0, hung.stderr[-3000:]
    managed_id = hung.stdout.split()[1]
    shown = json.loads(_cli(tmp_path, "managed", "status", managed_id, "--json").stdout)
    assert [a["reason"] for a in shown["attempts"]] == ["HUNG", "SUCCEEDED"], shown["attempts"]
    assert "attempt 1 HUNG" in hung.stderr
    second = tmp_path / ".vertexdist" / "runs" / shown["attempts"][1]["job"] / "logs" / "workerpool0-0.log"
    assert re.search(r"^resumed from .*/checkpoints/step-0+100/state.pt", second.read_text(), re.M)
    actual = hashlib.sha256((_outputs(hung.stderr) / "model" / "model.pt").read_bytes())
    assert actual.hexdigest() == undisturbed_model
