"""`/gcs/BUCKET/...` on every local replica, as Vertex's Cloud Storage FUSE gives it: the job's own gs://
folder, for root and for an ordinary user, never the host's own /gcs; and where it cannot be mapped, a
job that still runs and says why (real namespaces, real local-run processes).

Through local-run, root's run and the unmappable one run cold and with `--warm` (`replica_start`,
tests/conftest.py): a replica forked from the warm pool maps /gcs in the child; where /gcs cannot be mapped
it starts cold, for the guard's reason. The ordinary user's run is cold only: that user cannot reach the
session's pool (root's), and a pool of its own would outlive the test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from vertexdist.local import gcs_mount
from vertexdist.local.gcs_namespace import UNMAPPED_VARIABLE

pytestmark = pytest.mark.integration

# A user's script with the Vertex idiom and no vertexdist in it: both replicas write their report into
# the model folder, the chief reads the worker's (reads find what exists), and a checkpoint counts runs.
IDIOM_SCRIPT = """\
import os, pathlib, subprocess, sys, time
model = pathlib.Path(os.environ["AIP_MODEL_DIR"].replace("gs://", "/gcs/"))
checkpoints = pathlib.Path(os.environ["AIP_CHECKPOINT_DIR"].replace("gs://", "/gcs/"))
rank = os.environ.get("RANK", "0")
print("AIP_MODEL_DIR", os.environ["AIP_MODEL_DIR"], flush=True)
model.mkdir(parents=True, exist_ok=True)
(model / f"rank-{rank}.txt").write_text(f"rank {rank} uid {os.getuid()}\\n")
# A child process of the replica (torchrun's workers, say) sees the same /gcs.
subprocess.run([sys.executable, "-c", f"open({str(model / f'child-{rank}.txt')!r}, 'w').write('child')"],
               check=True)
if rank == "0":
    other = model / "rank-1.txt"
    deadline = time.monotonic() + 60
    while not other.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    print("chief read:", other.read_text().strip(), flush=True)
    step = checkpoints / "step.txt"
    previous = int(step.read_text()) if step.exists() else 0
    checkpoints.mkdir(parents=True, exist_ok=True)
    step.write_text(str(previous + 1))
    print("resumed from step", previous, flush=True)
"""


def _template(folder: Path, script: str = IDIOM_SCRIPT) -> Path:
    (folder / "train.py").write_text(script)
    doc = {
        "display_name": "gcs-idiom",
        "project": "my-project",
        "staging_bucket": "gs://my-bucket/staging",
        "trainer": {"script": str(folder / "train.py")},
        "replica_count": 2,
    }
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _local_run(
    argv: list[str], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=240)


def _cli(python: str, *args: str) -> list[str]:
    return [python, "-m", "vertexdist", *args]


def _output_folder(run: Path) -> Path:
    [job] = (run / "gcs" / "my-bucket" / "staging" / "vertexdist" / "output" / "gcs-idiom").iterdir()
    return job


def _needs_mapping() -> None:
    problem = gcs_mount.problem()
    if problem is not None:
        pytest.skip(f"this machine cannot map /gcs: {problem}")


# --- pure parts -----------------------------------------------------------------------------------------


def test_a_replica_starts_behind_the_namespace_script_and_its_guard(tmp_path: Path) -> None:
    argv = gcs_mount.launch_argv(("python", "-m", "task"), tmp_path / "gcs", tmp_path, python="/py")
    assert argv[:4] == ("/py", "-I", "-S", str(gcs_mount.SCRIPT))
    assert argv[4:8] == (
        str(tmp_path / "gcs"),
        str(tmp_path / gcs_mount.STAGE_DIR),
        str(gcs_mount.GUARD_DIR),
        "--",
    )
    assert argv[8:] == ("python", "-m", "task")
    env = gcs_mount.guard_env({"PYTHONPATH": "/pkg", "A": "1"}, "why")
    assert env == {"A": "1", UNMAPPED_VARIABLE: "why", "PYTHONPATH": f"{gcs_mount.GUARD_DIR}:/pkg"}


GUARDED = """\
import os, pathlib, shutil
for what, call in [
    ("open", lambda: open("/gcs/b/x", "w")),
    ("makedirs", lambda: os.makedirs("/gcs/b/d", exist_ok=True)),
    ("listdir", lambda: os.listdir("/gcs")),
    ("write_text", lambda: pathlib.Path("/gcs/b/y").write_text("z")),
    ("rename", lambda: os.rename("/tmp/nothing-here", "/gcs/b/z")),
    ("rmtree", lambda: shutil.rmtree("/gcs/b")),
]:
    try:
        call()
    except PermissionError as exc:
        print(what, exc.errno, exc.filename, exc.strerror)
    else:
        print(what, "allowed")
open(os.environ["OTHER"], "w").write("fine")  # paths that merely start with /gcs... are not the mount
"""


def test_the_guard_turns_every_python_touch_of_gcs_into_the_reason(tmp_path: Path) -> None:
    chained = tmp_path / "site"
    chained.mkdir()
    (chained / "sitecustomize.py").write_text("print('the hidden sitecustomize ran')\n")
    env = {
        **os.environ,
        "PYTHONPATH": f"{gcs_mount.GUARD_DIR}:{chained}",
        UNMAPPED_VARIABLE: "user namespaces are off; run with --docker",
        "OTHER": str(tmp_path / "gcsfile"),
    }
    result = subprocess.run(
        [sys.executable, "-c", GUARDED], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "the hidden sitecustomize ran"
    reason = "vertexdist: user namespaces are off; run with --docker"
    assert lines[1:] == [
        f"open 13 /gcs/b/x {reason}",
        f"makedirs 13 /gcs {reason}",  # its first mkdir: the parents first
        f"listdir 13 /gcs {reason}",
        f"write_text 13 /gcs/b/y {reason}",
        f"rename 13 /gcs/b/z {reason}",
        f"rmtree 13 /gcs/b {reason}",
    ]
    assert (tmp_path / "gcsfile").read_text() == "fine"


def test_without_a_reason_the_guard_does_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(gcs_mount.GUARD_DIR)}
    env.pop(UNMAPPED_VARIABLE, None)
    code = "import sys; print(len(sys.modules['sitecustomize'].__dict__.get('_REASON')))"
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "0", result.stderr


# --- the namespace itself -------------------------------------------------------------------------------

NAMESPACED = """\
import json, os, subprocess, sys
before = open("/gcs/bucket/in.txt").read()
os.makedirs("/gcs/bucket/out", exist_ok=True)
open("/gcs/bucket/out/replica.txt", "w").write("from the replica")
child = "open('/gcs/bucket/out/child.txt', 'w').write('from its child')"
subprocess.run([sys.executable, "-c", child], check=True)
listing = sorted(os.listdir("/gcs"))
print(json.dumps({"read": before, "uid": os.getuid(), "cwd": os.getcwd(), "listing": listing}))
"""


def test_the_command_and_its_children_see_the_folder_at_gcs(tmp_path: Path, host_gcs: Any) -> None:
    _needs_mapping()
    folder, stage, cwd = tmp_path / "gcs", tmp_path / "stage", tmp_path / "work"
    for path in (folder / "bucket", stage, cwd):
        path.mkdir(parents=True)
    (folder / "bucket" / "in.txt").write_text("an object that was there before")
    argv = gcs_mount.launch_argv((sys.executable, "-c", NAMESPACED), folder, tmp_path)
    argv = (*argv[:5], str(stage), *argv[6:])
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen == {
        "read": "an object that was there before",
        "uid": os.getuid(),
        "cwd": str(cwd),
        "listing": ["bucket"],
    }
    assert (folder / "bucket" / "out" / "replica.txt").read_text() == "from the replica"
    assert (folder / "bucket" / "out" / "child.txt").read_text() == "from its child"
    assert list(stage.iterdir()) == []  # the new root was only ever mounted there, inside the namespace


def test_a_job_inside_a_replica_gets_its_own_gcs_over_the_one_it_sees(tmp_path: Path, host_gcs: Any) -> None:
    """Where /gcs exists (here: the outer replica's), the inner job's folder is bound over it, for the inner
    job only."""
    _needs_mapping()
    outer, inner = tmp_path / "outer", tmp_path / "inner"
    for folder in (outer, inner):
        (folder / "gcs").mkdir(parents=True)
        (folder / "gcs" / "who").write_text(folder.name)
    inner_argv = gcs_mount.launch_argv(
        (sys.executable, "-c", "print(open('/gcs/who').read())"), inner / "gcs", inner
    )
    show = (
        f"import subprocess; subprocess.run({list(inner_argv)!r}, check=True); print(open('/gcs/who').read())"
    )
    argv = gcs_mount.launch_argv((sys.executable, "-c", show), outer / "gcs", outer)
    result = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["inner", "outer"]


# --- through local-run ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_idiom_through_local_run_as_root_lands_in_the_run_folder_and_resumes(
    tmp_path: Path, host_gcs: Any, replica_start: Any
) -> None:
    _needs_mapping()
    template = _template(tmp_path)
    first, second = tmp_path / "first", tmp_path / "second"
    result = _local_run([*replica_start.local_run(), str(template), "--out", str(first)], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "warning: /gcs" not in result.stdout + result.stderr
    job = _output_folder(first)
    assert (
        f"AIP_MODEL_DIR gs://my-bucket/staging/vertexdist/output/gcs-idiom/{job.name}/model/" in result.stdout
    )
    assert "chief read: rank 1 uid 0" in result.stdout
    assert "resumed from step 0" in result.stdout
    assert sorted(p.name for p in (job / "model").iterdir()) == [
        "child-0.txt",
        "child-1.txt",
        "rank-0.txt",
        "rank-1.txt",
    ]
    listed = _local_run(_cli(sys.executable, "outputs", str(first), "--json"), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    paths = sorted(f["path"] for f in json.loads(listed.stdout)["files"])
    assert paths == [
        "checkpoints/step.txt",
        "model/child-0.txt",
        "model/child-1.txt",
        "model/rank-0.txt",
        "model/rank-1.txt",
    ]
    downloaded = tmp_path / "downloaded"
    argv = _cli(sys.executable, "outputs", str(first), "--download", str(downloaded))
    fetched = _local_run(argv, cwd=tmp_path)
    assert fetched.returncode == 0, fetched.stdout + fetched.stderr
    got = {p.relative_to(downloaded).as_posix(): p.read_text() for p in downloaded.rglob("*") if p.is_file()}
    assert got == {
        "checkpoints/step.txt": "1",
        "model/child-0.txt": "child",
        "model/child-1.txt": "child",
        "model/rank-0.txt": "rank 0 uid 0\n",
        "model/rank-1.txt": "rank 1 uid 0\n",
    }

    # The next run of the template resumes through /gcs from what the first wrote there.
    argv = [*replica_start.local_run(), str(template), "--out", str(second), "--resume-from", str(first)]
    result = _local_run(argv, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "resumed from step 1" in result.stdout
    assert (job / "checkpoints" / "step.txt").read_text() == "2"


@pytest.mark.slow
def test_the_idiom_through_local_run_as_an_ordinary_user(nobody: Any, host_gcs: Any) -> None:
    """The issue's machine: root ran vertexdist first, so the shared temp folder holds root's folders (under
    the old shared name and under this user's own names); this run neither fails on them nor uses them."""
    _needs_mapping()
    work = nobody.folder("idiom")
    shared = work / "tmp"
    shared.mkdir(mode=0o1777)
    shared.chmod(0o1777)
    roots = ["vertexdist-ports", f"vertexdist-{nobody.uid}", f"vxray-{nobody.uid}"]
    for name in roots:
        (shared / name).mkdir(mode=0o755)  # root's, as its first run left them
        (shared / name / "42819").write_text("1\n")
    template = _template(work)
    out = work / "run"
    result = _local_run(
        nobody.argv(*_cli(nobody.python, "local-run", str(template), "--out", str(out))),
        cwd=work,
        env=nobody.env(TMPDIR=str(shared)),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"chief read: rank 1 uid {nobody.uid}" in result.stdout  # its own uid in there, not root's
    job = _output_folder(out)
    files = sorted((job / "model").iterdir())
    assert [p.name for p in files] == ["child-0.txt", "child-1.txt", "rank-0.txt", "rank-1.txt"]
    assert {p.stat().st_uid for p in files} == {nobody.uid}
    for name in roots:
        assert [p.name for p in (shared / name).iterdir()] == ["42819"]  # root's, untouched
    assert (shared / f"vertexdist-{nobody.uid}-1").stat().st_uid == nobody.uid  # the user's own, beside it


@pytest.mark.slow
def test_where_gcs_cannot_be_mapped_the_job_says_why_once_and_a_touch_fails_with_it(
    tmp_path: Path, host_gcs: Any, no_user_namespaces: Any, replica_start: Any
) -> None:
    template = _template(tmp_path)
    out = tmp_path / "run"
    replica_start.expect_cold("/gcs's guard runs only as Python starts", forks=False)
    argv = no_user_namespaces([*replica_start.local_run(), str(template), "--out", str(out)])
    result = _local_run(argv, cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    warnings = [line for line in result.stdout.splitlines() if "warning: /gcs is not this job's" in line]
    assert len(warnings) == 1, result.stdout
    assert "may make no more user namespaces" in warnings[0] and "--docker" in warnings[0]
    log = (out / "logs" / "workerpool0-0.log").read_text()
    assert "PermissionError: [Errno 13] vertexdist: /gcs is not this job's Cloud Storage here" in log
    assert "AIP_MODEL_DIR gs://" in log  # the job ran; only its touch of /gcs failed
