"""Template -> the CreateTrainingPipeline body around the CustomJobSpec, as `CustomTrainingJob.run()` sends
it. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vertexdist.render.custom_job import render_job_spec
from vertexdist.render.request_hash import REQUEST_HASH_LABEL, request_hash

if TYPE_CHECKING:
    from vertexdist.spec.models import JobTemplate

TRAINING_TASK_DEFINITION = "gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml"


def render_pipeline_request(
    t: JobTemplate,
    *,
    package_uri: str | None = None,
    image_uri: str | None = None,
    resume_from: str | None = None,
) -> dict[str, Any]:
    """The exact REST body of PipelineService.CreateTrainingPipeline, as `CustomTrainingJob.run()` makes,
    with the job-folder placeholder that submit fills in (`with_job_folder`) unless it resumes a folder.

    Its `vertexdist-request` label is a hash of the rest of the body, so the server can tell a second
    submit of the very same request (a label filter) before it creates a duplicate (`request_hash`).
    """
    labels: dict[str, str] = dict(t.labels)
    request: dict[str, Any] = {
        "parent": f"projects/{t.project}/locations/{t.location}",
        "trainingPipeline": {
            "displayName": t.display_name,
            "trainingTaskDefinition": TRAINING_TASK_DEFINITION,
            "trainingTaskInputs": render_job_spec(
                t, package_uri=package_uri, image_uri=image_uri, resume_from=resume_from
            ),
            "labels": labels,
        },
    }
    labels[REQUEST_HASH_LABEL] = request_hash(request)
    return request
