"""Every job its own output folder (issue 12): the rules of `render` for the job folder, resuming and the
request hash, on the pure functions."""

from __future__ import annotations

from typing import Any

from vertexdist.backends.vertex.request import Submission, new_job_folder
from vertexdist.render import (
    JOB_FOLDER,
    REQUEST_HASH_LABEL,
    output_dir_of,
    render_job_spec,
    render_request,
    with_job_folder,
)
from vertexdist.render.health_mark import has_mark, without_mark
from vertexdist.spec import JobTemplate

from .conftest import BASE

BASE_DIR = "gs://vertexdist-demo/staging/vertexdist/output/test-job"


def template(**changes: Any) -> JobTemplate:
    return JobTemplate.model_validate({**BASE, **changes})


def _submission(request: dict[str, Any]) -> Submission:
    return Submission(request=request, request_hash=request["trainingPipeline"]["labels"][REQUEST_HASH_LABEL])


def test_a_render_names_the_job_folder_by_a_placeholder_and_is_deterministic() -> None:
    first, second = render_request(template()), render_request(template())
    assert first == second
    assert output_dir_of(first) == f"{BASE_DIR}/{JOB_FOLDER}"


def test_two_jobs_of_one_template_get_two_folders_and_one_request_hash() -> None:
    rendered = _submission(render_request(template()))
    a, b = rendered.for_new_job(), rendered.for_new_job()
    assert a.output_dir != b.output_dir
    for job in (a, b):
        assert job.output_dir is not None and job.output_dir.startswith(f"{BASE_DIR}/")
        assert JOB_FOLDER not in job.output_dir
        # The hash label is the rendered request's: a second submit of the template is still a duplicate.
        assert job.request["trainingPipeline"]["labels"] == rendered.request["trainingPipeline"]["labels"]
        assert job.request_hash == rendered.request_hash
    # Nothing but the folder, and the job's health mark in every pool's env (issue 41), differs from the dry
    # run.
    assert has_mark(a.request) and not has_mark(rendered.request)
    assert with_job_folder(rendered.request, a.output_dir.rsplit("/", 1)[1]) == without_mark(a.request)


def test_filling_the_folder_changes_nothing_else_and_leaves_the_rendered_request_alone() -> None:
    rendered = render_request(template())
    filled = with_job_folder(rendered, "job-1")
    assert output_dir_of(rendered) == f"{BASE_DIR}/{JOB_FOLDER}"
    assert output_dir_of(filled) == f"{BASE_DIR}/job-1"
    filled["trainingPipeline"]["trainingTaskInputs"]["baseOutputDirectory"] = {
        "outputUriPrefix": f"{BASE_DIR}/{JOB_FOLDER}"
    }
    assert filled == rendered


def test_new_job_folders_sort_by_time_and_do_not_repeat() -> None:
    folders = [new_job_folder() for _ in range(200)]
    assert len(set(folders)) == len(folders)
    assert all(len(f) == len("20250101-120000-abcdef") and f[8] == "-" for f in folders)


def test_an_explicit_base_output_dir_is_a_base_too() -> None:
    spec = render_job_spec(template(base_output_dir="gs://vertexdist-demo/models"))
    assert spec["baseOutputDirectory"]["outputUriPrefix"] == f"gs://vertexdist-demo/models/{JOB_FOLDER}"


def test_resuming_names_the_earlier_folder_and_is_its_own_request() -> None:
    earlier = f"{BASE_DIR}/20250101-000000-abcdef"
    resumed = render_request(template(), resume_from=earlier)
    assert output_dir_of(resumed) == earlier
    submission = _submission(resumed)
    again = submission.for_new_job()  # the same folder, and only a health mark added
    assert not submission.needs_job_folder and again.output_dir == submission.output_dir
    assert without_mark(again.request) == submission.request and again.request_hash == submission.request_hash
    fresh = render_request(template())
    # Resuming is a different request (two resumes of one job are duplicates of each other, not of a new job).
    assert (
        resumed["trainingPipeline"]["labels"][REQUEST_HASH_LABEL]
        != fresh["trainingPipeline"]["labels"][REQUEST_HASH_LABEL]
    )
    assert render_request(template(), resume_from=earlier) == resumed
    # The template's own base does not matter when resuming.
    assert (
        output_dir_of(
            render_request(template(base_output_dir="gs://vertexdist-demo/other"), resume_from=earlier)
        )
        == earlier
    )


def test_a_tuning_job_gets_its_own_folder_for_its_trials_too() -> None:
    from pathlib import Path

    from vertexdist.spec import load_template

    shipped = Path(__file__).resolve().parents[2] / "job_templates" / "cpu-tune.yaml"
    t = load_template(shipped)
    request = render_request(t)
    spec = request["hyperparameterTuningJob"]["trialJobSpec"]
    assert spec["baseOutputDirectory"]["outputUriPrefix"].endswith(f"/{JOB_FOLDER}")
    labels = request["hyperparameterTuningJob"]["labels"]
    job = Submission(request=request, request_hash=labels[REQUEST_HASH_LABEL]).for_new_job("job-7")
    assert job.output_dir is not None and job.output_dir.endswith("/cpu-tune/job-7")
    assert job.request["hyperparameterTuningJob"]["labels"] == labels
    earlier = "gs://vertexdist-demo/staging/vertexdist/output/cpu-tune/job-1"
    assert output_dir_of(render_request(t, resume_from=earlier)) == earlier
