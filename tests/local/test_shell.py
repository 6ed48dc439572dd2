"""`vertexdist shell`: the replica's variables and argv (pure), and a command run in a live local replica."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vertexdist.jobs import shell

SPEC = json.dumps({"cluster": {}, "task": {"type": "workerpool1", "index": 0}})


def _replica(own_mounts: bool, own_users: bool, **env: str) -> shell.Replica:
    return shell.Replica(42, {"CLUSTER_SPEC": SPEC, **env}, "/work/r", own_mounts, own_users)


def test_environ_and_task() -> None:
    env = shell.parse_environ(b"A=1\0CLUSTER_SPEC=" + SPEC.encode() + b"\0EMPTY=\0junk\0B=x=y\0")
    assert env == {"A": "1", "CLUSTER_SPEC": SPEC, "EMPTY": "", "B": "x=y"}
    assert shell.task_of(env) == "workerpool1-0"
    assert shell.task_of({"CLUSTER_SPEC": "not json"}) is None and shell.task_of({}) is None


def test_shell_env_drops_vertexdist_own_and_keeps_the_terminal() -> None:
    replica = {
        "CLUSTER_SPEC": SPEC,
        "VERTEXDIST_HEALTH_DIR": "/r/health",
        "VERTEXDIST_JOB_TOKEN": "t",
        "LANG": "C",
    }
    env = shell.shell_env(replica, {"TERM": "xterm", "LANG": "fr_FR", "HOME": "/me"}, "workerpool1-0")
    assert env == {
        "CLUSTER_SPEC": SPEC,
        "LANG": "C",
        "TERM": "xterm",
        "HOME": "/me",
        "VERTEXDIST_SHELL": "workerpool1-0",
    }


def test_shell_env_never_takes_loader_or_shell_start_up_variables_from_the_replica() -> None:
    """Issue 41: a process with BASH_ENV, ENV, HOME, LD_PRELOAD (or an exported function) made the caller's
    shell run its script; those come from the caller, or not at all."""
    planted = {
        "BASH_ENV": "/tmp/x.sh",
        "ENV": "/tmp/x.sh",
        "HOME": "/tmp/evil",
        "LD_PRELOAD": "/tmp/x.so",
        "LD_LIBRARY_PATH": "/tmp",
        "BASH_FUNC_ls%%": "() { id; }",
        "PROMPT_COMMAND": "id",
        "ZDOTDIR": "/tmp",
        "CLUSTER_SPEC": SPEC,
    }
    env = shell.shell_env(planted, {"HOME": "/root", "PATH": "/usr/bin"}, "workerpool1-0")
    assert env == {"CLUSTER_SPEC": SPEC, "HOME": "/root", "VERTEXDIST_SHELL": "workerpool1-0"}


def test_argv_enters_the_namespace_only_when_the_replica_has_its_own() -> None:
    plain = _replica(own_mounts=False, own_users=False)
    assert shell.shell_argv("/bin/bash", None, plain, "/usr/bin/nsenter") == (["/bin/bash"], "/work/r")
    mapped = _replica(own_mounts=True, own_users=True)
    argv, cwd = shell.shell_argv("/bin/sh", "pwd", mapped, "/usr/bin/nsenter")
    assert cwd is None
    assert argv == [
        "/usr/bin/nsenter", "--target", "42", "--user", "--preserve-credentials",
        "--mount", "--root", "--wd", "--", "/bin/sh", "-c", "pwd",
    ]  # fmt: skip
    as_root = shell.shell_argv("/bin/sh", None, _replica(own_mounts=True, own_users=False), "nsenter")[0]
    assert "--user" not in as_root and "--mount" in as_root
    # No nsenter: the shell runs in the replica's folder, told where gs:// is.
    no_ns = _replica(own_mounts=True, own_users=True, VERTEXDIST_GCS_ROOT="/r/gcs")
    assert shell.shell_argv("/bin/sh", None, no_ns, None) == (["/bin/sh"], "/work/r")
    assert "/r/gcs/B/PATH" in (shell.gcs_note(no_ns, None) or "")
    assert shell.gcs_note(mapped, "/usr/bin/nsenter") is None


def test_vertex_message() -> None:
    uris = {"workerpool0-0": "https://abc-dot-us-central1.aiplatform-training.googleusercontent.com"}
    assert uris["workerpool0-0"] in shell.vertex_message("workerpool0-0", uris, True)
    assert "enable_web_access: true" in shell.vertex_message("workerpool0-0", {}, False)
    assert "workerpool0-0" in shell.vertex_message("workerpool1-0", uris, True)
    assert "try again" in shell.vertex_message("workerpool0-0", {}, True)


SLEEPER = "import os, pathlib, time; pathlib.Path('here.txt').write_text(os.getcwd()); time.sleep(60)"


def test_shell_command_runs_in_a_live_local_replica(tmp_path: Path) -> None:
    from vertexdist.backends.local import LocalBackend
    from vertexdist.backends.local.prepare import LocalOptions, new_job_id
    from vertexdist.local.environment import JobContext
    from vertexdist.local.request import build_request
    from vertexdist.wire.job_spec import parse_job_spec

    runs = tmp_path / "runs"
    job_id = new_job_id()
    run_dir = runs / job_id
    pool = {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": 1,
        "containerSpec": {
            "imageUri": "example.com/standin:latest",
            "command": [sys.executable, "-c", SLEEPER],
        },
    }
    spec = {
        "workerPoolSpecs": [pool, pool],
        "baseOutputDirectory": {"outputUriPrefix": f"gs://b/out/{job_id}"},
    }
    ctx = JobContext(job_id=job_id, project="p", region="us-central1", gcs_root=str(run_dir / "gcs"))
    request = build_request(parse_job_spec(spec), ctx, run_dir=run_dir, sdists={}, cache_dir=tmp_path / "c")
    backend = LocalBackend(LocalOptions(runs_dir=runs))
    backend.schedule(request)
    try:
        deadline = time.monotonic() + 20
        found = None
        while time.monotonic() < deadline and found is None:
            found = shell.find_replica(run_dir / "health", "workerpool1-0")
            assert shell.find_replica(run_dir / "health", "workerpool7-0") is None
            time.sleep(0.1)
        assert found is not None
        here = Path(found.cwd) / "here.txt"
        while time.monotonic() < deadline and not here.exists():
            time.sleep(0.1)
        (run_dir / "gcs" / "b").mkdir(parents=True, exist_ok=True)
        (run_dir / "gcs" / "b" / "seen.txt").write_text("from gcs")
        script = 'cat here.txt; echo; pwd; printf "%s\\n" "$CLUSTER_SPEC"; cat /gcs/b/seen.txt || echo none'
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "vertexdist",
                "shell",
                f"runs/{job_id}",  # relative to the folder it runs in, as a user types it
                "--replica",
                "workerpool1-0",
                "-c",
                script,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": os.getcwd()},
        )
        assert done.returncode == 0, done.stderr
        written, pwd, cluster, gcs = done.stdout.splitlines()[:4]
        assert pwd == written == found.cwd
        task = json.loads(cluster)["task"]
        assert (task["type"], task["index"]) == ("workerpool1", 0)
        if found.own_mounts:  # the replica sees the run folder's gcs/ at /gcs: so does the shell
            assert gcs == "from gcs"
    finally:
        backend.cancel(job_id)
        backend.job(job_id).wait(30)


def _fake_proc(tmp_path: Path, health: Path, token: str | None) -> Path:
    """A fake /proc: the replica's leader (pid 100) and its worker (101), and another pool's (102)."""
    proc = tmp_path / "proc"
    (proc / "self" / "ns").mkdir(parents=True)
    (proc / "self" / "ns" / "mnt").symlink_to("mnt:[1]")
    (proc / "self" / "ns" / "user").symlink_to("user:[1]")
    for pid, parent, task in ((100, 1, "workerpool1"), (101, 100, "workerpool1"), (102, 1, "workerpool0")):
        entry = proc / str(pid)
        (entry / "ns").mkdir(parents=True)
        spec = json.dumps({"task": {"type": task, "index": 0}})
        marked = f"VERTEXDIST_JOB_TOKEN={token}\0" if token else ""
        (entry / "environ").write_bytes(
            f"VERTEXDIST_HEALTH_DIR={health}\0{marked}CLUSTER_SPEC={spec}\0".encode()
        )
        (entry / "stat").write_text(f"{pid} (py thon) S {parent} {pid} {pid} 0")
        (entry / "cwd").symlink_to(f"/stage/work/{pid}")
        (entry / "root").symlink_to("/stage")
        (entry / "ns" / "mnt").symlink_to("mnt:[2]")
        (entry / "ns" / "user").symlink_to("user:[2]")
    return proc


def _token(health: Path, token: str = "t0k3n") -> str:
    from vertexdist.private_files import write_private_text

    write_private_text(health.parent / "job-token", token)
    return token


def test_find_replica_takes_the_outermost_process_of_the_replica(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replica's leader and its worker carry the job's health folder as an absolute path and the job's
    token; the emulator's folder is named relative (`.vertexdist/emulator/...`): still found."""
    health = tmp_path / "emu" / "jobs" / "7" / "health"
    health.mkdir(parents=True)
    proc = _fake_proc(tmp_path, health, _token(health))
    monkeypatch.chdir(tmp_path)
    found = shell.find_replica(Path("emu/jobs/7/health"), "workerpool1-0", proc=proc)
    assert found is not None
    assert (found.pid, found.cwd, found.own_mounts, found.own_users) == (100, "/work/100", True, True)
    assert found.env["CLUSTER_SPEC"].startswith('{"task"')
    assert shell.find_replica(Path("emu/jobs/8/health"), "workerpool1-0", proc=proc) is None


def test_a_process_without_the_jobs_token_or_of_another_user_is_never_entered(tmp_path: Path) -> None:
    """Issue 41: the lowest-pid process anywhere that named the job's health folder was entered, whoever
    owned it (job ids show in `ps`). Now: the caller's own processes carrying the job's private token."""
    health = tmp_path / "jobs" / "7" / "health"
    health.mkdir(parents=True)
    look_alike = _fake_proc(tmp_path, health, token="guessed")
    _token(health)
    assert shell.find_replica(health, "workerpool1-0", proc=look_alike) is None
    (health.parent / "job-token").unlink()  # no token kept: no replica, whatever the processes say
    assert shell.find_replica(health, "workerpool1-0", proc=look_alike) is None
    (health.parent / "job-token").write_text("guessed")
    (health.parent / "job-token").chmod(0o644)  # readable (so writable before) by others: not trusted
    assert shell.find_replica(health, "workerpool1-0", proc=look_alike) is None
    (health.parent / "job-token").chmod(0o600)
    assert shell.find_replica(health, "workerpool1-0", proc=look_alike) is not None
    if os.getuid() == 0:  # another user's process with the very token: still not entered
        for entry in ("100", "101", "102"):
            os.chown(look_alike / entry, 65534, 65534)
        assert shell.find_replica(health, "workerpool1-0", proc=look_alike) is None


def test_web_access_reads_the_custom_job_and_a_pipelines_backing_job() -> None:
    from types import SimpleNamespace

    from google.cloud.aiplatform_v1 import types

    uri = "https://abc-dot-us-central1.aiplatform-training.googleusercontent.com"
    custom = "projects/p/locations/l/customJobs/9"
    job = types.CustomJob(
        name=custom,
        job_spec=types.CustomJobSpec(enable_web_access=True),
        web_access_uris={"workerpool0-0": uri},
    )
    asked: list[str] = []

    def get_custom_job(name: str) -> types.CustomJob:
        asked.append(name)
        return job

    pipeline = SimpleNamespace(backing_job=custom, spec={"enableWebAccess": True})
    backend = SimpleNamespace(
        clients=SimpleNamespace(jobs=SimpleNamespace(get_custom_job=get_custom_job)),
        describe=lambda name: pipeline,
    )
    assert shell.web_access(backend, custom) == ({"workerpool0-0": uri}, True)
    assert shell.web_access(backend, "projects/p/locations/l/trainingPipelines/3") == (
        {"workerpool0-0": uri},
        True,
    )
    assert asked == [custom, custom]
    pipeline.backing_job = None  # not started yet: no custom job to read
    assert shell.web_access(backend, "projects/p/locations/l/trainingPipelines/3") == ({}, True)


def test_the_hint_for_an_ended_emulator_job_keeps_emulator(tmp_path: Path) -> None:
    from vertexdist.cli.shell import _local_shell
    from vertexdist.errors import UsageError

    (tmp_path / "ranks").mkdir()  # the job's health folder, no live replica in it: the job has ended
    with pytest.raises(UsageError) as raised:
        _local_shell(tmp_path, "1234", "workerpool0-0", None, " --emulator")
    assert raised.value.hint == "see its replicas: vertexdist status 1234 --emulator"
