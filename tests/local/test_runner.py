"""The runner with real processes: Vertex's job semantics, stopping whole process groups, no orphans.

These are the runner's contract tests, and each runs twice (`replica_start`, tests/conftest.py): cold, as the
emulator starts a job (`start_job`), and warm, as `local-run --warm` does (its request's replicas on this
host, forked from the session's warm pool), which checks that the pool forked them. Cold only: a spec that
never starts a replica (local-run refuses it before any job exists). The killed-worker test runs five times
cold (it was a race) and once warm (docs/speed.md: the contract tests' time, cold and warm).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from vertexdist.local import JobContext, JobState, ReplicaState
from vertexdist.local.runner import CODE_CANCELLED, CODE_DEADLINE_EXCEEDED

pytestmark = pytest.mark.integration
CTX = JobContext(job_id="t", project="my-project", region="us-central1", gcs_root="/unused")


def _no_packages(uri: str) -> Path:
    raise AssertionError(f"no package expected, asked for {uri}")


def _start(
    replica_start: Any,
    spec: dict[str, Any],
    run_dir: Path,
    *,
    ctx: JobContext | None = None,
    fetch_package: Any = _no_packages,
    grace_s: float = 2.0,
    **kwargs: Any,
) -> Any:
    ctx = ctx or JobContext(**{**CTX.__dict__, "gcs_root": str(run_dir / "gcs")})
    return replica_start.start_job(
        spec, ctx, run_dir=run_dir, fetch_package=fetch_package, grace_s=grace_s, **kwargs
    )


def test_job_succeeds_when_every_training_replica_does_and_stand_ins_end_with_it(
    replica_start: Any, tmp_path: Path, record_dir: Path, kit: Any
) -> None:
    job = _start(
        replica_start,
        kit.standin_spec(record_dir, workers=2, reducers=1, extra=["--spawn", "1"]),
        tmp_path / "run",
    )
    result = job.wait(60)
    assert result is not None and result.state is JobState.SUCCEEDED, result
    states = {r.name: r.state for r in result.replicas}
    assert states == {
        "workerpool0-0": ReplicaState.SUCCEEDED,
        "workerpool1-0": ReplicaState.SUCCEEDED,
        "workerpool1-1": ReplicaState.SUCCEEDED,
        "workerpool2-0": ReplicaState.STOPPED,
    }
    logs = job.log_paths()
    assert "workerpool1-1 done" in logs["workerpool1-1"].read_text()
    assert "stand-in holding 127.0.0.1:" in logs["workerpool2-0"].read_text()
    recorded = kit.records(record_dir)
    assert recorded["workerpool1-0"]["cwd"] == str(tmp_path / "run" / "replicas" / "workerpool1-0")
    kit.assert_no_orphans(recorded, [r.pid for r in result.replicas])


def test_first_failing_replica_fails_the_job_and_the_rest_are_stopped_with_their_workers(
    replica_start: Any, tmp_path: Path, record_dir: Path, kit: Any
) -> None:
    spec = kit.standin_spec(
        record_dir,
        workers=2,
        reducers=1,
        extra=["--sleep", "60", "--spawn", "2", "--fail", "workerpool1-1:7"],
    )
    result = _start(replica_start, spec, tmp_path / "run").wait(30)
    assert result.state is JobState.FAILED
    assert result.error.replica == "workerpool1-1" and result.error.exit_code == 7
    assert result.error.message == "The replica workerpool1-1 exited with a non-zero status of 7."
    states = {r.name: r.state for r in result.replicas}
    assert states["workerpool1-1"] is ReplicaState.FAILED
    assert {states[n] for n in ("workerpool0-0", "workerpool1-0", "workerpool2-0")} == {ReplicaState.STOPPED}
    assert result.elapsed_s < 15
    kit.assert_no_orphans(kit.records(record_dir), [r.pid for r in result.replicas])


def test_a_worker_still_running_after_the_chief_succeeded_is_stopped_and_the_job_succeeds(
    replica_start: Any, tmp_path: Path, record_dir: Path, kit: Any
) -> None:
    spec = kit.standin_spec(
        record_dir, workers=2, extra=["--sleep", "0.2", "--spawn", "1", "--hang", "workerpool1-1"]
    )
    events: list[Any] = []
    result = _start(replica_start, spec, tmp_path / "run", settle_s=1.0, on_event=events.append).wait(30)
    assert result.state is JobState.SUCCEEDED and result.error is None
    states = {r.name: r.state for r in result.replicas}
    assert states["workerpool0-0"] is ReplicaState.SUCCEEDED
    assert states["workerpool1-0"] is ReplicaState.SUCCEEDED
    assert states["workerpool1-1"] is ReplicaState.STOPPED
    assert any("stopping workerpool1-1" in e.message for e in events)
    kit.assert_no_orphans(kit.records(record_dir))


def test_cancel_stops_everything_and_ends_cancelled(
    replica_start: Any, tmp_path: Path, record_dir: Path, kit: Any
) -> None:
    events: list[Any] = []
    job = _start(
        replica_start,
        kit.standin_spec(record_dir, workers=1, extra=["--sleep", "60", "--spawn", "1"]),
        tmp_path / "run",
        on_event=events.append,
    )
    assert kit.wait_for(lambda: len(kit.records(record_dir)) == 2)
    job.cancel()
    result = job.wait(15)
    assert result.state is JobState.CANCELLED and result.error.code == CODE_CANCELLED
    job_states = [e.job_state for e in events if e.replica is None]
    assert job_states[-3:] == [JobState.RUNNING, JobState.CANCELLING, JobState.CANCELLED]
    kit.assert_no_orphans(kit.records(record_dir))


def test_timeout_fails_the_job_and_sigkills_what_ignores_sigterm(
    replica_start: Any, tmp_path: Path, record_dir: Path, kit: Any
) -> None:
    spec = kit.standin_spec(
        record_dir, workers=1, extra=["--sleep", "60", "--spawn", "1", "--ignore-sigterm"], timeout="4s"
    )
    result = _start(replica_start, spec, tmp_path / "run").wait(30)
    assert result.state is JobState.FAILED and result.error.code == CODE_DEADLINE_EXCEEDED
    assert "timeout of 4s" in result.error.message
    # A stand-in records itself once it ignores SIGTERM; on a loaded machine one may not have got that far
    # before the timeout, and then SIGTERM rightly ends it.
    ignoring = set(kit.records(record_dir))
    assert ignoring, "no replica got to ignoring SIGTERM; the test proves nothing"
    assert {r.exit_code for r in result.replicas if r.name in ignoring} == {-9}
    kit.assert_no_orphans(kit.records(record_dir))


def test_restart_job_on_worker_restart_reruns_the_whole_job(
    replica_start: Any, tmp_path: Path, record_dir: Path, kit: Any
) -> None:
    marker = tmp_path / "failed-once"
    spec = kit.standin_spec(
        record_dir,
        workers=1,
        extra=["--sleep", "0.5", "--fail", "workerpool1-0", "--once", str(marker)],
        restartJobOnWorkerRestart=True,
    )
    job = _start(replica_start, spec, tmp_path / "run")
    result = job.wait(60)
    assert result.state is JobState.SUCCEEDED and result.restarts == 1
    assert all(r.attempt == 1 for r in result.replicas)
    log = job.log_paths()["workerpool1-0"].read_text()
    assert log.count("workerpool1-0 started") == 2 and "job restart 1" in log


def test_restarts_stop_at_the_limit(replica_start: Any, tmp_path: Path, record_dir: Path, kit: Any) -> None:
    spec = kit.standin_spec(
        record_dir, workers=1, extra=["--fail", "workerpool0-0"], restartJobOnWorkerRestart=True
    )
    result = _start(replica_start, spec, tmp_path / "run", max_restarts=2).wait(60)
    assert result.state is JobState.FAILED and result.restarts == 2
    assert result.error.replica == "workerpool0-0"


def test_a_command_that_does_not_exist_fails_the_job(replica_start: Any, tmp_path: Path, kit: Any) -> None:
    pool = kit.container_pool(1, [])
    pool["containerSpec"]["command"] = [str(tmp_path / "no-such-program")]
    replica_start.expect_cold("is not the pool's interpreter", forks=False)
    job = _start(replica_start, {"workerPoolSpecs": [pool]}, tmp_path / "run")
    result = job.wait(30)
    assert result.state is JobState.FAILED and result.error.exit_code == 127
    assert "cannot start" in job.log_paths()["workerpool0-0"].read_text()


# Cold only: it never starts a replica, and local-run's path refuses such a spec before any job exists.
@pytest.mark.parametrize("replica_start", ["cold"], indirect=True)
def test_a_spec_that_cannot_run_fails_the_job_with_the_reason(replica_start: Any, tmp_path: Path) -> None:
    bad = {"workerPoolSpecs": [{"replicaCount": 1, "containerSpec": {"imageUri": "gcr.io/x/y"}}]}
    result = _start(replica_start, bad, tmp_path / "run").wait(10)
    assert result.state is JobState.FAILED and "has no command" in result.error.message
    assert result.replicas == ()


def test_python_package_replicas_run_the_installed_copy(
    replica_start: Any, tmp_path: Path, record_dir: Path
) -> None:
    """pythonPackageSpec: the package is fetched, installed, and imported from the install, not the source."""
    from vertexdist.packaging import build_sdist
    from vertexdist.spec import TrainerSpec

    source = tmp_path / "src" / "mytrainer"
    source.mkdir(parents=True)
    (source / "__init__.py").write_text("")
    (source / "task.py").write_text(
        "import json, os, sys, mytrainer\n"
        "spec = json.loads(os.environ['CLUSTER_SPEC'])\n"
        "print('module at', mytrainer.__file__, 'args', sys.argv[1:])\n"
    )

    sdist = build_sdist(TrainerSpec(package=source), tmp_path / "dist")
    uri = "gs://bkt/pkg/mytrainer-0.1.tar.gz"
    spec = {
        "workerPoolSpecs": [
            {
                "replicaCount": 1,
                "pythonPackageSpec": {
                    "pythonModule": "mytrainer.task",
                    "packageUris": [uri],
                    "args": ["--x=1"],
                },
            },
            {
                "replicaCount": 1,
                "pythonPackageSpec": {"pythonModule": "mytrainer.task", "packageUris": [uri]},
            },
        ]
    }
    fetched: list[str] = []

    def fetch(wanted: str) -> Path:
        fetched.append(wanted)
        return sdist.path

    ctx = JobContext(**{**CTX.__dict__, "gcs_root": str(tmp_path / "gcs")})
    job = _start(
        replica_start,
        spec,
        tmp_path / "run",
        ctx=ctx,
        fetch_package=fetch,
        cache_dir=tmp_path / "cache",
        grace_s=5.0,
    )
    result = job.wait(90)
    assert result.state is JobState.SUCCEEDED, job.log_paths()["workerpool0-0"].read_text()
    assert fetched == [uri]
    line = job.log_paths()["workerpool0-0"].read_text()
    assert f"module at {tmp_path / 'cache'}" in line and "args ['--x=1']" in line
    assert str(source) not in line


def test_a_backend_error_mid_start_stops_and_records_the_replicas_already_started(
    replica_start: Any, tmp_path: Path, record_dir: Path, kit: Any
) -> None:
    run_dir = tmp_path / "run"
    (run_dir / "logs" / "workerpool1-0.log").mkdir(parents=True)  # its log cannot be opened
    job = _start(
        replica_start,
        kit.standin_spec(record_dir, workers=1, extra=["--sleep", "60", "--spawn", "1"]),
        run_dir,
    )
    result = job.wait(60)
    assert result is not None and result.state is JobState.FAILED
    assert result.error is not None and "local backend error" in result.error.message
    chief = next(r for r in result.replicas if r.name == "workerpool0-0")
    assert chief.state is ReplicaState.STOPPED and chief.exit_code is not None
    assert chief.pid is not None and not kit.process_alive(chief.pid)
    assert not kit.group_members(chief.pid)  # the replica ran as its own process group


# Five cold runs (the order the chief and the killed worker's replica end in was a race) and one warm: a
# warm replica's worker dies and its peer loses the connection just as a cold one's, so one run shows it.
@pytest.mark.parametrize(
    ("replica_start", "run"), [*(("cold", run) for run in range(5)), ("warm", 0)], indirect=["replica_start"]
)
def test_a_killed_worker_is_blamed_not_the_chief_that_lost_its_connection(
    replica_start: Any, tmp_path: Path, record_dir: Path, kit: Any, run: int
) -> None:
    """Issue 12: the chief fails first (its peer's socket closed) and its replica exits before the one
    whose worker was killed; the killed worker's replica is named, with its own last lines, and the chief
    that failed on its own is FAILED, not STOPPED."""
    from vertexdist.cli.local_report import summary_lines

    job = _start(
        replica_start, kit.standin_spec(record_dir, extra=["--link", "--teardown", "0.3"]), tmp_path / "run"
    )
    assert kit.wait_for(lambda: len(kit.records(record_dir)) == 2, timeout=30)
    chief_log = job.log_paths()["workerpool0-0"]
    assert kit.wait_for(lambda: "worker connected" in chief_log.read_text(), timeout=30)
    (victim,) = kit.records(record_dir)["workerpool1-0"]["worker_pids"]
    os.kill(victim, signal.SIGKILL)
    result = job.wait(30)
    assert result is not None and result.state is JobState.FAILED
    assert result.error.replica == "workerpool1-0", result.error
    assert result.error.message == "The replica workerpool1-0 exited with a non-zero status of 1."
    states = {r.name: (r.state, r.exit_code) for r in result.replicas}
    assert states == {"workerpool0-0": (ReplicaState.FAILED, 1), "workerpool1-0": (ReplicaState.FAILED, 1)}
    lines = summary_lines(result, tmp_path / "run")
    assert any("workerpool1-0: error: its worker was killed" in line for line in lines), lines
    assert not any("Connection closed by peer" in line for line in lines), lines
    assert lines[-1] == "failed after it: workerpool0-0"
    kit.assert_no_orphans(kit.records(record_dir), [r.pid for r in result.replicas])


def test_a_script_that_fails_at_import_is_not_restarted_and_its_error_says_why(
    replica_start: Any, tmp_path: Path, kit: Any
) -> None:
    # Issue 42: a missing module burned every job restart, and the error hid the ModuleNotFoundError.
    import sys

    script = tmp_path / "bad_import.py"
    script.write_text("import os\nimport nosuchmod_vertexdist\n")
    pool = kit.container_pool(1, [])
    pool["containerSpec"]["command"] = [sys.executable, str(script)]
    spec = {"workerPoolSpecs": [pool], "scheduling": {"restartJobOnWorkerRestart": True}}
    result = _start(replica_start, spec, tmp_path / "run", max_restarts=3).wait(60)
    assert result.state is JobState.FAILED and result.restarts == 0
    assert "ModuleNotFoundError: No module named 'nosuchmod_vertexdist' (bad_import.py, line 2)" in (
        result.error.message
    ), result.error.message
