"""How a managed job ends when its controller cannot go on: a job that could not be created ends FAILED
saying why (never a RUNNING ghost), a controller that is gone never reads RUNNING, `--detach` reports a
first attempt that could not start, and `managed cancel` that races the job's end keeps its real end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vertexdist.backends.base import JobStatus
from vertexdist.backends.errors import ApiCallError
from vertexdist.cli import main
from vertexdist.managed import store as st
from vertexdist.managed.attempts import CreatedJob
from vertexdist.managed.controller import cancel
from vertexdist.managed.service import _lock, open_store, shown_state
from vertexdist.spec import load_template
from vertexdist.spec.models import JobTemplate

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = """\
display_name: demo
project: my-project
location: us-central1
staging_bucket: gs://my-bucket/stage
machine_type: n1-standard-4
recovery:
  max_preemptions: 2
"""


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with a template, and an environment with no Google Cloud credentials anywhere."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("NO_GCE_CHECK", "true")
    for name in ("GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_CONFIG", "VERTEX_API_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "job.yaml").write_text(TEMPLATE)
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        main.run(list(args))
    out = capsys.readouterr()
    code = info.value.code
    return (code if isinstance(code, int) else (0 if code is None else 1)), out.out, out.err


def test_no_credentials_ends_the_managed_job_failed_with_the_reason(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "submit", "job.yaml", "--managed")
    assert code == 1 and "no Google Cloud credentials" in err
    managed_id = out.splitlines()[0].removeprefix("managed: ")
    code, out, _ = run(capsys, "managed", "list")
    assert code == 0 and f"{managed_id}  FAILED" in out, out
    code, out, _ = run(capsys, "managed", "status", managed_id)
    assert "FAILED" in out and "no Google Cloud credentials" in out and "RUNNING" not in out, out


def test_detach_exits_non_zero_when_the_first_attempt_cannot_start(here: Path) -> None:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    result = subprocess.run(
        [sys.executable, "-m", "vertexdist", "submit", "job.yaml", "--managed", "--detach"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert "no Google Cloud credentials" in result.stderr
    assert "controller running in the background" not in result.stderr
    managed_id = result.stdout.splitlines()[0].removeprefix("managed: ")
    store = open_store()
    assert store.get(managed_id).state == st.FAILED
    assert [a.state for a in store.attempts(managed_id)] == ["NOT_CREATED"]


def test_a_managed_job_reads_running_only_while_a_controller_drives_it(here: Path) -> None:
    store = open_store()
    managed = store.create(str(here / "job.yaml"), "vertex", {})
    assert shown_state(store, managed) == "STOPPED"
    with _lock(store, managed.id):
        assert shown_state(store, managed) == st.RUNNING
    assert shown_state(store, managed) == "STOPPED"


class Attempts:
    """An attempt backend whose one job reads `state`; `cancel` refuses as Vertex does once it has ended."""

    def __init__(self, state: str, *, ends_before_cancel: bool = False) -> None:
        self.state = state
        self.ends_before_cancel = ends_before_cancel
        self.cancelled = 0

    def create(self, template: JobTemplate, label: str, resume_from: str | None) -> CreatedJob:
        raise AssertionError("no create here")

    def find(self, template: JobTemplate, label: str) -> CreatedJob | None:
        return None

    def describe(self, template: JobTemplate, name: str) -> JobStatus:
        return JobStatus(name, "demo", self.state)

    def cancel(self, template: JobTemplate, name: str) -> None:
        if self.ends_before_cancel:
            self.state = "SUCCEEDED"
        if self.state in ("SUCCEEDED", "FAILED", "CANCELLED"):
            raise ApiCallError(f"job {name} is already in state PIPELINE_STATE_{self.state}", None, 400)
        self.cancelled += 1
        self.state = "CANCELLING"


def _with_attempt(here: Path, *, created: bool) -> tuple[st.Store, str, JobTemplate]:
    store = open_store()
    managed = store.create(str(here / "job.yaml"), "vertex", {})
    attempt = store.plan_attempt(managed.id, 0, "us-central1", "n1-standard-4", None)
    if created:
        store.created(attempt, "projects/p/locations/l/trainingPipelines/1", "gs://b/out")
        store.job_state(attempt, "RUNNING")
    return store, managed.id, load_template(here / "job.yaml")


@pytest.mark.parametrize("ends_before_cancel", [False, True], ids=["ended-before", "ended-meanwhile"])
def test_a_cancel_that_finds_the_job_ended_records_its_real_end(here: Path, ends_before_cancel: bool) -> None:
    store, managed_id, template = _with_attempt(here, created=True)
    backend = Attempts(
        "RUNNING" if ends_before_cancel else "SUCCEEDED", ends_before_cancel=ends_before_cancel
    )
    done = cancel(store, managed_id, backend, template)
    assert done.managed.state == st.SUCCEEDED
    assert "already ended SUCCEEDED" in done.line and "\n" not in done.line
    [attempt] = store.attempts(managed_id)
    assert (attempt.state, attempt.reason, attempt.phase) == ("SUCCEEDED", "SUCCEEDED", st.ENDED)


def test_a_cancel_of_a_running_job_cancels_it(here: Path) -> None:
    store, managed_id, template = _with_attempt(here, created=True)
    backend = Attempts("RUNNING")
    done = cancel(store, managed_id, backend, template)
    assert backend.cancelled == 1 and done.managed.state == st.CANCELLED
    assert [(a.state, a.reason) for a in store.attempts(managed_id)] == [("CANCELLED", "CANCELLED")]


def test_a_cancel_of_an_attempt_without_a_job_leaves_nothing_pending(here: Path) -> None:
    store, managed_id, template = _with_attempt(here, created=False)
    done = cancel(store, managed_id, Attempts("RUNNING"), template)
    assert done.managed.state == st.CANCELLED
    assert [(a.state, a.reason) for a in store.attempts(managed_id)] == [("CANCELLED", "CANCELLED")]


def test_a_cancel_after_the_managed_job_ended_says_so_and_exits_0(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, managed_id, _ = _with_attempt(here, created=True)
    store.finish(managed_id, st.SUCCEEDED, "an attempt succeeded")
    code, out, err = run(capsys, "managed", "cancel", managed_id)
    assert code == 0, err
    assert out.strip() == f"managed {managed_id} had already ended SUCCEEDED; nothing to cancel"
