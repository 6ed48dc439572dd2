"""`vertexdist managed logs ID`: a managed job's logs across its attempts, over real local runs (a small
stand-in script preempted once by a fault plan), and its clear errors."""

from __future__ import annotations

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

from tests.interrupts import default_sigint
from vertexdist.cli import main
from vertexdist.errors import UsageError
from vertexdist.managed import service
from vertexdist.managed import store as st
from vertexdist.managed.logs import AttemptHeader, managed_logs

REPO = Path(__file__).resolve().parents[2]

# Numbers its runs by the files it leaves in RUNS, prints a line, sleeps, prints another, exits CODE; its
# first run sleeps FIRST seconds instead, where given (the run a preemption ends, long after its first line).
STANDIN = """\
import sys, time
from pathlib import Path
runs = Path(sys.argv[1])
runs.mkdir(exist_ok=True)
n = len(list(runs.iterdir())) + 1
(runs / str(n)).touch()
print(f"run {n} started", flush=True)
time.sleep(float(sys.argv[4] if n == 1 and len(sys.argv) > 4 else sys.argv[2]))
print(f"run {n} finished", flush=True)
raise SystemExit(int(sys.argv[3]))
"""
# 8 s after the first run started, which then sleeps 120 s: under `make stress` (a CPU hog, load average 17) a
# preemption 1 s after the start landed before the run had printed its first line.
PREEMPT_ONCE = "- kind: preempt\n  replica: workerpool0-0\n  after: 8s\n  grace: 1s\n  times: 1\n"
FIRST_RUN_S = 120.0


def _template(tmp: Path, *, sleep: float = 2.0, code: int = 0, first: float | None = None) -> Path:
    script = tmp / "standin.py"
    script.write_text(STANDIN)
    extra = [] if first is None else [str(first)]
    body = {
        "display_name": "managed-logs",
        "project": "my-project",
        "location": "us-central1",
        "staging_bucket": "gs://my-bucket/staging",
        "machine_type": "n1-standard-4",
        "scheduling_strategy": "SPOT",
        "replica_count": 1,
        "trainer": {"script": str(script), "args": [str(tmp / "runs"), str(sleep), str(code), *extra]},
        "recovery": {"max_preemptions": 2},
    }
    path = tmp / "job.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "NO_GCE_CHECK": "true"}


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "vertexdist", *args]


def _start(cwd: Path, *args: str, stderr: int = subprocess.PIPE) -> subprocess.Popen[str]:
    return subprocess.Popen(
        _command(*args),
        cwd=cwd,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        preexec_fn=default_sigint,
    )


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_command(*args), cwd=cwd, env=_env(), capture_output=True, text=True, timeout=120)


def _preempted_once(tmp: Path) -> str:
    plan = tmp / "plan.yaml"
    plan.write_text(PREEMPT_ONCE)
    done = _cli(tmp, "local-run", str(_template(tmp, first=FIRST_RUN_S)), "--fault-plan", str(plan))
    assert done.returncode == 0, done.stderr[-3000:]
    # Each attempt's replicas are shown live, as a plain local-run shows them (here prefixed lines).
    started = re.findall(r"^vertexdist +\| workerpool0-0 started, pid \d+$", done.stdout, re.M)
    assert len(started) == 2, done.stdout[-3000:]
    assert re.search(r"^workerpool0-0 +\| ", done.stdout, re.M), done.stdout[-3000:]
    return done.stdout.split()[1]


def _jobs(cwd: Path, managed_id: str) -> list[str]:
    shown = json.loads(_cli(cwd, "managed", "status", managed_id, "--json").stdout)
    return [a["job"] for a in shown["attempts"]]


@pytest.mark.integration
@pytest.mark.timeout(480)  # a run and seven commands: over 180 s beside a CPU hog at load average 17
def test_logs_show_both_attempts_lines_in_order_each_after_its_header(tmp_path: Path) -> None:
    managed_id = _preempted_once(tmp_path)
    first, second = _jobs(tmp_path, managed_id)
    shown = _cli(tmp_path, "managed", "logs", managed_id)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [
        f"== attempt 1 of {managed_id}: {first} PREEMPTED",
        "[workerpool0-0] run 1 started",
        f"== attempt 2 of {managed_id}: {second} SUCCEEDED",
        "[workerpool0-0] run 2 started",
        "[workerpool0-0] run 2 finished",
    ]
    one = _cli(tmp_path, "managed", "logs", managed_id, "--attempt", "1")
    assert one.stdout.splitlines() == [
        f"== attempt 1 of {managed_id}: {first} PREEMPTED",
        "[workerpool0-0] run 1 started",
    ]
    other = _cli(tmp_path, "managed", "logs", managed_id, "--replica", "workerpool1-0")
    assert other.stdout.splitlines() == [
        f"== attempt 1 of {managed_id}: {first} PREEMPTED",
        f"== attempt 2 of {managed_id}: {second} SUCCEEDED",
    ]
    records = [
        json.loads(line)
        for line in _cli(tmp_path, "managed", "logs", managed_id, "--json").stdout.splitlines()
    ]
    assert [r.get("attempt", r.get("line")) for r in records] == [
        1,
        "run 1 started",
        2,
        "run 2 started",
        "run 2 finished",
    ]
    out_of_range = _cli(tmp_path, "managed", "logs", managed_id, "--attempt", "3")
    assert out_of_range.returncode == 2
    assert "--attempt 3 is out of range" in out_of_range.stderr and "1 to 2" in out_of_range.stderr
    assert "Traceback" not in out_of_range.stderr


@pytest.mark.integration
def test_follow_started_while_it_runs_goes_on_to_the_next_attempt_and_ends_when_it_ends(
    tmp_path: Path,
) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(PREEMPT_ONCE)
    template = _template(tmp_path, sleep=3.0, first=FIRST_RUN_S)
    run = _start(tmp_path, "local-run", str(template), "--fault-plan", str(plan))
    assert run.stdout is not None
    managed_id = run.stdout.readline().split()[1]
    follow = _start(tmp_path, "managed", "logs", managed_id, "--follow")
    _, run_err = run.communicate(timeout=120)
    assert run.returncode == 0, run_err[-3000:]
    ended = time.monotonic()
    out, err = follow.communicate(timeout=60)
    assert follow.returncode == 0, err
    assert time.monotonic() - ended < 15  # it ended with the managed job, not on a timeout
    assert f"managed {managed_id} SUCCEEDED" in err
    lines = out.splitlines()
    headers = [line for line in lines if line.startswith("== ")]
    assert [h.split(":")[0] for h in headers] == [
        f"== attempt 1 of {managed_id}",
        f"== attempt 2 of {managed_id}",
    ]
    body = [line for line in lines if not line.startswith("== ")]
    assert body == [
        "[workerpool0-0] run 1 started",
        "[workerpool0-0] run 2 started",
        "[workerpool0-0] run 2 finished",
    ]
    assert lines.index(headers[1]) == 2  # attempt 2's header after attempt 1's line, before its own


@pytest.mark.integration
def test_follow_of_a_failed_managed_job_exits_1(tmp_path: Path) -> None:
    done = _cli(tmp_path, "local-run", str(_template(tmp_path, sleep=0.0, code=3)))
    assert done.returncode != 0
    managed_id = done.stdout.split()[1]
    (job,) = _jobs(tmp_path, managed_id)
    followed = _cli(tmp_path, "managed", "logs", managed_id, "--follow")
    assert followed.returncode == 1, followed.stderr
    assert followed.stdout.splitlines()[0] == f"== attempt 1 of {managed_id}: {job} USER_ERROR"
    assert "run 1 finished" in followed.stdout
    assert f"managed {managed_id} FAILED" in followed.stderr
    plain = _cli(tmp_path, "managed", "logs", managed_id)
    assert plain.returncode == 0, plain.stderr


def test_an_attempt_that_never_got_a_job_is_its_header_alone(tmp_path: Path) -> None:
    store = st.Store(tmp_path / "managed.sqlite")
    managed = store.create(str(tmp_path / "job.yaml"), "vertex", {})
    attempt = store.plan_attempt(managed.id, 0, "us-central1", "a2-highgpu-1g", "SPOT")
    store.ended(attempt, "FAILED", "STOCKOUT", "Resources are insufficient in region: us-central1")
    store.finish(managed.id, st.FAILED, "no capacity")
    for follow in (False, True):
        items = list(managed_logs(store, managed.id, follow=follow, sleep=lambda _s: None))
        headers = [item for item in items if isinstance(item, AttemptHeader)]
        assert [h.line for h in headers] == [
            f"== attempt 1 of {managed.id}: no job (STOCKOUT: Resources are insufficient in region:"
            " us-central1)"
        ]


def test_an_unknown_id_and_a_bad_attempt_are_clear_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> tuple[int, str]:
        capsys.readouterr()
        with pytest.raises(SystemExit) as info:
            main.run(list(args))
        code = info.value.code
        return (code if isinstance(code, int) else 1), capsys.readouterr().err

    code, err = run("managed", "logs", "m-nope")
    assert code == 2 and "no managed job 'm-nope'" in err and "vertexdist managed list" in err
    store = st.Store(tmp_path / ".vertexdist" / "managed" / "managed.sqlite")
    managed = store.create(str(tmp_path / "job.yaml"), "local", {})
    code, err = run("managed", "logs", managed.id, "--attempt", "1")
    assert code == 2 and "has no attempt yet" in err
    store.plan_attempt(managed.id, 0, None, None, None)
    code, err = run("managed", "logs", managed.id, "--attempt", "0")
    assert code == 2 and "--attempt 0 is out of range" in err and "attempts 1 to 1" in err
    assert "Traceback" not in err


@pytest.mark.integration
def test_ctrl_c_stops_following_with_130_and_leaves_the_attempt_running(tmp_path: Path) -> None:
    run = _start(
        tmp_path, "local-run", str(_template(tmp_path, sleep=60.0)), "--grace", "1", stderr=subprocess.DEVNULL
    )
    try:
        assert run.stdout is not None
        managed_id = run.stdout.readline().split()[1]
        follow = _start(tmp_path, "managed", "logs", managed_id, "--follow")
        assert follow.stdout is not None
        assert follow.stdout.readline().startswith(f"== attempt 1 of {managed_id}: local-")
        assert follow.stdout.readline() == "[workerpool0-0] run 1 started\n"
        follow.send_signal(signal.SIGINT)
        _, err = follow.communicate(timeout=30)
        assert follow.returncode == 130, err
        assert "Traceback" not in err
        assert run.poll() is None  # following stopped, not the managed job
    finally:
        run.send_signal(signal.SIGINT)
        run.communicate(timeout=60)


@pytest.mark.integration
def test_following_a_managed_job_whose_controller_was_killed_stops_saying_how_to_continue(
    tmp_path: Path,
) -> None:
    run = _start(tmp_path, "local-run", str(_template(tmp_path, sleep=60.0)), stderr=subprocess.DEVNULL)
    assert run.stdout is not None
    managed_id = run.stdout.readline().split()[1]
    follow = _start(tmp_path, "managed", "logs", managed_id, "--follow")
    assert follow.stdout is not None
    assert follow.stdout.readline().startswith(f"== attempt 1 of {managed_id}: local-")
    assert follow.stdout.readline() == "[workerpool0-0] run 1 started\n"
    run.send_signal(signal.SIGKILL)  # its attempt runs inside it, and is lost with it
    run.wait(timeout=30)
    killed = time.monotonic()
    _, err = follow.communicate(timeout=60)
    assert follow.returncode == 1, err
    assert time.monotonic() - killed < 30
    assert "no controller drives it" in err and f"vertexdist managed resume {managed_id}" in err
    assert "Traceback" not in err


def test_controller_running_reads_the_controller_s_lock(tmp_path: Path) -> None:
    store = st.Store(tmp_path / "managed.sqlite")
    managed = store.create(str(tmp_path / "job.yaml"), "local", {})
    assert not service.controller_running(store, managed.id)
    with service._lock(store, managed.id):
        assert service.controller_running(store, managed.id)
        with (
            pytest.raises(UsageError, match="being driven by another controller"),
            service._lock(store, managed.id),
        ):
            pass
    assert not service.controller_running(store, managed.id)
    with service._lock(store, managed.id):  # looking left it free
        pass
