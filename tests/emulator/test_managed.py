"""The managed-job controller against the emulator, through the real Vertex backend and SDK clients: every
attempt a real TrainingPipeline, each refusal and lost answer the emulator's own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vertexdist.emulator import Emulator
from vertexdist.emulator.faults import Fault
from vertexdist.jobs.submit import Where
from vertexdist.managed import store as st
from vertexdist.managed.attempts import MANAGED_LABEL, VertexAttempts
from vertexdist.managed.controller import Backoff, Controller
from vertexdist.spec.loader import load_template

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FAIL_ONCE = """\
import os
print("checkpoint dir", os.environ["AIP_CHECKPOINT_DIR"])
raise SystemExit(1)
"""


def controller(tmp_path: Path, path: Path) -> tuple[Controller, st.Store]:
    store = st.Store(tmp_path / "managed.sqlite")
    template = load_template(path)
    managed = store.create(str(path), "vertex", {})
    backend = VertexAttempts(Where())
    ctl = Controller(
        store, managed.id, template, backend, poll_s=0.2, backoff=Backoff(first_s=0.05, max_s=0.2)
    )
    return ctl, store


ONE_FALLBACK = "recovery:\n  max_preemptions: 2\n  fallback:\n    - machine_type: n1-standard-8\n"


def refuse_the_next_create_for_quota(emu: Emulator) -> None:
    """The emulator answers the next TrainingPipeline create with Vertex's 429 quota refusal."""
    emu.faults.add(
        Fault(
            "create",
            429,
            "The following quota metrics exceed quota limits: aiplatform.googleapis.com/"
            "custom_model_training_cpus",
            collection="trainingPipelines",
        )
    )


def jobs_labelled(emu: Emulator, label: str) -> list[dict[str, Any]]:
    return [
        p
        for p in emu.store.list("projects/test-proj/locations/us-central1", "trainingPipelines")
        if p.get("labels", {}).get(MANAGED_LABEL) == label
    ]


def test_a_job_that_succeeds_is_one_attempt(emu: Emulator, write_template: Any, tmp_path: Path) -> None:
    ctl, store = controller(tmp_path, write_template(name="managed-ok"))
    final = ctl.run()
    assert final.state == st.SUCCEEDED
    status = store.status(ctl.id)
    assert [a["reason"] for a in status["attempts"]] == ["SUCCEEDED"]
    attempt = status["attempts"][0]
    assert attempt["location"] == "us-central1" and attempt["machine_type"] == "n1-standard-4"
    assert attempt["started"] and attempt["ended"] and attempt["job"].startswith("projects/test-proj/")
    assert len(jobs_labelled(emu, f"{ctl.id}-a1")) == 1


def test_the_users_error_is_retried_only_within_max_restarts_on_errors(
    emu: Emulator, write_template: Any, tmp_path: Path
) -> None:
    path = write_template(FAIL_ONCE, name="managed-bug", extra="recovery:\n  max_restarts_on_errors: 1\n")
    ctl, store = controller(tmp_path, path)
    final = ctl.run()
    assert final.state == st.FAILED and "max_restarts_on_errors is 1" in final.why
    attempts = store.attempts(ctl.id)
    assert [a.reason for a in attempts] == ["USER_ERROR", "USER_ERROR"]
    # The second attempt continues the first one's output folder (the --resume-from machinery).
    assert attempts[0].output_dir and attempts[1].output_dir == attempts[0].output_dir


def test_a_quota_refusal_moves_to_the_next_place(emu: Emulator, write_template: Any, tmp_path: Path) -> None:
    ctl, store = controller(tmp_path, write_template(name="managed-quota", extra=ONE_FALLBACK))
    refuse_the_next_create_for_quota(emu)
    final = ctl.run()
    assert final.state == st.SUCCEEDED
    attempts = store.attempts(ctl.id)
    assert [(a.reason, a.machine_type) for a in attempts] == [
        ("QUOTA", "n1-standard-4"),
        ("SUCCEEDED", "n1-standard-8"),
    ]
    assert attempts[0].job is None and "quota" in (attempts[0].error or "")


def test_a_create_whose_answer_was_lost_is_found_by_its_label(
    emu: Emulator, write_template: Any, tmp_path: Path
) -> None:
    ctl, store = controller(tmp_path, write_template(name="managed-lost"))
    # The create is carried out, then every answer to it fails: the SDK's own retries and ours.
    emu.faults.add(Fault("create", 503, collection="trainingPipelines", times=10, after=True))
    assert ctl.run().state == st.SUCCEEDED
    assert len(jobs_labelled(emu, f"{ctl.id}-a1")) == 1
    assert [a.reason for a in store.attempts(ctl.id)] == ["SUCCEEDED"]


def test_killed_after_the_create_before_recording_it_makes_no_second_job(
    emu: Emulator, write_template: Any, tmp_path: Path
) -> None:
    ctl, store = controller(tmp_path, write_template(name="managed-unrecorded"))
    assert ctl.step()  # attempt 1 planned: phase `creating`, its label written first
    attempt = store.attempts(ctl.id)[0]
    assert attempt.phase == st.CREATING and attempt.job is None
    # What a controller killed right after its create reached Vertex leaves behind: a job, no record of it.
    made = ctl.backend.create(ctl.places[0], attempt.label, None)
    resumed = Controller(
        store, ctl.id, load_template(Path(store.get(ctl.id).template)), ctl.backend, poll_s=0.2
    )
    assert resumed.run().state == st.SUCCEEDED
    assert store.attempts(ctl.id)[0].job == made.name
    assert len(jobs_labelled(emu, attempt.label)) == 1


def test_flaky_status_reads_are_read_again_never_a_false_recovery(
    emu: Emulator, write_template: Any, tmp_path: Path
) -> None:
    ctl, store = controller(tmp_path, write_template(name="managed-flaky"))
    ctl.step()
    ctl.step()  # created
    emu.faults.add(Fault("get", 503, collection="trainingPipelines", times=8))
    assert ctl.run().state == st.SUCCEEDED
    assert [a.reason for a in store.attempts(ctl.id)] == ["SUCCEEDED"]


def test_killed_before_the_create_makes_exactly_one_job_on_resume(
    emu: Emulator, write_template: Any, tmp_path: Path
) -> None:
    ctl, store = controller(tmp_path, write_template(name="managed-before-create"))
    assert ctl.step()  # attempt 1 written (phase `creating`); the controller dies before its create
    label = store.attempts(ctl.id)[0].label
    assert len(jobs_labelled(emu, label)) == 0
    resumed = Controller(
        store, ctl.id, load_template(Path(store.get(ctl.id).template)), ctl.backend, poll_s=0.2
    )
    assert resumed.run().state == st.SUCCEEDED
    assert len(jobs_labelled(emu, label)) == 1
    assert [a.reason for a in store.attempts(ctl.id)] == ["SUCCEEDED"]


def test_the_console_shows_a_managed_jobs_attempts_with_their_reasons(
    emu: Emulator, write_template: Any, tmp_path: Path
) -> None:
    pytest.importorskip("starlette")
    from vertexdist.backends.config import Target
    from vertexdist.backends.vertex import VertexBackend
    from vertexdist.console.jobs import KIND_MANAGED, Console
    from vertexdist.console.managed import ManagedAttempts
    from vertexdist.console.refs import vertex_ref

    ctl, store = controller(tmp_path, write_template(name="managed-console", extra=ONE_FALLBACK))
    refuse_the_next_create_for_quota(emu)
    assert ctl.run().state == st.SUCCEEDED
    job = store.attempts(ctl.id)[-1].job
    assert job is not None
    ref = vertex_ref(job)
    assert ref is not None
    target = Target(
        project="test-proj",
        location="us-central1",
        api_endpoint=emu.vertex_endpoint,
        api_transport="rest",
        storage_endpoint=emu.storage_endpoint,
    )
    (tmp_path / "runs").mkdir()
    console = Console(tmp_path / "runs", VertexBackend(target), cache_dir=tmp_path / "cache")
    plain = console.page(ref)
    assert plain.attempts is None  # no source registered: no attempts shown, none invented
    console.attempt_sources.append(ManagedAttempts(tmp_path / "managed.sqlite"))
    page = console.page(ref)
    assert page.row.kind == KIND_MANAGED
    assert page.attempts is not None
    assert [(a.number, a.reason) for a in page.attempts] == [(1, "QUOTA"), (2, "SUCCEEDED")]
    assert page.attempts[0].job is None  # refused at create: no job of its own
    assert page.attempts[1].job == ref and page.attempts[1].start_time and page.attempts[1].end_time
    rows, _ = console.rows()
    assert [r.kind for r in rows if r.ref == ref] == [KIND_MANAGED]
    # A store that does not know the job's managed id shows no attempts.
    other = ManagedAttempts(tmp_path / "elsewhere.sqlite")
    assert other.attempts(ref, page.status) is None
