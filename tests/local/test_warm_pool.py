"""`local-run --warm`: replicas forked from a warm pool keep a cold start's job semantics, and a pool that is
killed leaves nothing behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vertexdist.local import JobState, ReplicaState
from vertexdist.local.plan import LaunchPlan, ReplicaLaunch
from vertexdist.local.runner import CODE_CANCELLED, LocalJob
from vertexdist.local.warm_pool import WarmSpawner, ping, read_target, start_pool

pytestmark = pytest.mark.integration
COLD = "starting this replica cold"


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One pool for the module (it imports torch once); stopped at the end."""
    path = tmp_path_factory.mktemp("pool") / "pool.sock"
    pid = start_pool(path, idle_s=300)
    yield path
    os.kill(pid, signal.SIGTERM)


STANDIN = Path(__file__).with_name("standin_replica.py")


def _start(spec: dict[str, Any], run_dir: Path, pool: Path, **kwargs: Any) -> Any:
    """The stand-in replicas of `spec`'s pools as host processes (`python standin_replica.py`), warm."""
    args = [str(a) for a in spec["workerPoolSpecs"][0]["containerSpec"]["args"]]
    replicas = []
    for pool_index, kind in ((0, "workerpool0"), (1, "workerpool1")):
        count = 1 if pool_index == 0 else int(spec["workerPoolSpecs"][1].get("replicaCount", 0))
        for index in range(count):
            name = f"{kind}-{index}"
            cluster = {"cluster": {}, "task": {"type": kind, "index": index}}
            replicas.append(
                ReplicaLaunch(
                    name=name,
                    pool=pool_index,
                    index=index,
                    kind="standin",
                    argv=(sys.executable, str(STANDIN), *args),
                    env={"CLUSTER_SPEC": json.dumps(cluster)},
                    cwd=run_dir / "replicas" / name,
                    log_path=run_dir / "logs" / f"{name}.log",
                    address="127.0.0.1:0",
                )
            )
    plan = LaunchPlan(
        job_id="t",
        run_dir=run_dir,
        replicas=tuple(replicas),
        timeout_s=None,
        max_restarts=0,
        gcs_root=run_dir / "gcs",
    )
    return LocalJob(plan, grace_s=2.0, spawner=WarmSpawner(pool, idle_s=300), **kwargs).start()


def _forked(job: Any, pool: Path) -> None:
    """Every replica was forked by the pool, none started cold."""
    answer = ping(pool)
    assert answer is not None and answer["cuda_initialized"] is False
    for name, log in job.log_paths().items():
        assert COLD not in log.read_text(), (name, log.read_text()[-500:])


def test_a_warm_job_succeeds_with_its_replicas_forked_by_the_pool(
    tmp_path: Path, record_dir: Path, kit: Any, pool: Path
) -> None:
    job = _start(kit.standin_spec(record_dir, workers=1, extra=["--spawn", "1"]), tmp_path / "run", pool)
    result = job.wait(60)
    assert result is not None and result.state is JobState.SUCCEEDED, result
    _forked(job, pool)
    recorded = kit.records(record_dir)
    assert recorded["workerpool1-0"]["cwd"] == str(tmp_path / "run" / "replicas" / "workerpool1-0")
    kit.assert_no_orphans(recorded, [r.pid for r in result.replicas])


def test_a_warm_replica_failing_names_it_with_its_exit_code(
    tmp_path: Path, record_dir: Path, kit: Any, pool: Path
) -> None:
    spec = kit.standin_spec(record_dir, workers=2, extra=["--sleep", "60", "--fail", "workerpool1-1:7"])
    job = _start(spec, tmp_path / "run", pool)
    result = job.wait(30)
    assert result.state is JobState.FAILED
    assert result.error.replica == "workerpool1-1" and result.error.exit_code == 7
    states = {r.name: r.state for r in result.replicas}
    assert states["workerpool1-1"] is ReplicaState.FAILED
    assert states["workerpool0-0"] is ReplicaState.STOPPED
    _forked(job, pool)
    kit.assert_no_orphans(kit.records(record_dir), [r.pid for r in result.replicas])


def test_a_warm_job_cancelled_stops_every_replica(
    tmp_path: Path, record_dir: Path, kit: Any, pool: Path
) -> None:
    job = _start(kit.standin_spec(record_dir, workers=1, extra=["--sleep", "60"]), tmp_path / "run", pool)
    assert kit.wait_for(lambda: len(kit.records(record_dir)) == 2)
    job.cancel()
    result = job.wait(30)
    assert result.state is JobState.CANCELLED and result.error.code == CODE_CANCELLED
    kit.assert_no_orphans(kit.records(record_dir), [r.pid for r in result.replicas])


def test_a_killed_pool_leaves_no_replica_behind(tmp_path: Path, record_dir: Path, kit: Any) -> None:
    path = tmp_path / "own.sock"
    pid = start_pool(path, idle_s=60)
    job = _start(kit.standin_spec(record_dir, workers=1, extra=["--sleep", "60"]), tmp_path / "run", path)
    assert kit.wait_for(lambda: len(kit.records(record_dir)) == 2)
    os.kill(pid, signal.SIGKILL)
    result = job.wait(30)
    assert result is not None and result.state is JobState.FAILED
    assert result.error.exit_code == -int(signal.SIGKILL)
    kit.assert_no_orphans(kit.records(record_dir), [pid, *(r.pid for r in result.replicas)])


def test_what_cannot_be_forked_warm_is_named() -> None:
    python = sys.executable
    assert read_target([python, "-u", "-m", "pkg.task", "--x"], {}) == read_target(
        [python, "-u", "-m", "pkg.task", "--x"], {"PYTHONPATH": "/a"}
    )
    target = read_target([python, "-m", "pkg.task", "--x"], {})
    assert not isinstance(target, str) and target.module == "pkg.task" and target.args == ("--x",)
    assert "not the pool's interpreter" in str(read_target(["/other/python", "-m", "m"], {}))
    assert "PYTHONHASHSEED" in str(read_target([python, "-m", "m"], {"PYTHONHASHSEED": "0"}))
    assert "-c" in str(read_target([python, "-c", "pass"], {}))


def test_the_pool_answers_after_a_replica_is_forked_and_ends(tmp_path: Path, pool: Path) -> None:
    log = tmp_path / "log"
    with log.open("ab") as out:
        proc = WarmSpawner(pool)(
            [sys.executable, "-c", "raise SystemExit(3)"], dict(os.environ), tmp_path, out, out.fileno()
        )
        assert proc.wait(30) == 3
    assert COLD in log.read_text()  # -c is not forked warm: it started cold, and said so
    script = tmp_path / "s.py"
    script.write_text("import sys, os\nprint(sys.argv, __name__, os.getcwd())\nsys.exit(5)\n")
    with log.open("ab") as out:
        warm = WarmSpawner(pool)(
            [sys.executable, str(script), "a"], dict(os.environ), tmp_path, out, out.fileno()
        )
        assert warm.wait(30) == 5
    time.sleep(0.1)
    assert f"['{script}', 'a'] __main__ {tmp_path}" in log.read_text()
    subprocess.run(["true"], check=True)


@pytest.mark.parametrize("uncaught", ["ValueError('bad row 3')", "KeyboardInterrupt"])
def test_an_uncaught_exception_prints_and_exits_as_a_new_interpreter_would(
    tmp_path: Path, pool: Path, uncaught: str
) -> None:
    """The traceback starts at the script's own frame (not the pool's or runpy's), as `python SCRIPT`'s."""
    script = tmp_path / "fails.py"
    script.write_text(f"def load():\n    raise {uncaught}\n\n\nload()\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON") or k == "PYTHONPATH"}
    cold = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, check=False)
    log = tmp_path / "warm.log"
    with log.open("ab") as out:
        warm = WarmSpawner(pool)([sys.executable, str(script)], env, tmp_path, out, out.fileno())
        code = warm.wait(30)
    assert COLD not in log.read_text()
    assert (code, log.read_text()) == (cold.returncode, cold.stderr)


@pytest.mark.parametrize("replica_start", ["warm"], indirect=True)
def test_the_contract_tests_warm_check_fails_on_a_replica_started_cold(
    tmp_path: Path, record_dir: Path, kit: Any, replica_start: Any
) -> None:
    """The check every warm contract test ends with (tests/conftest.py) can fail: here one replica is
    forked and the other, a `python -c` command, starts cold for a reason the test did not expect."""
    from vertexdist.local import JobContext

    spec = kit.standin_spec(record_dir, workers=1)
    spec["workerPoolSpecs"][1]["containerSpec"]["command"] = [sys.executable, "-c", "print('cold')"]
    ctx = JobContext(job_id="c", project="p", region="us-central1", gcs_root=str(tmp_path / "run" / "gcs"))
    job = replica_start.start_job(spec, ctx, run_dir=tmp_path / "run", fetch_package=str, grace_s=2.0)
    result = job.wait(60)
    assert result is not None and result.state is JobState.SUCCEEDED, result
    with pytest.raises(AssertionError, match="workerpool1-0.log: vertexdist: warm pool: " + COLD):
        replica_start.check()
    replica_start.expect_cold("is not -m MODULE or a script")  # the teardown's check passes with it
