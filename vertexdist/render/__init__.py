"""Template -> the exact Vertex request. Pure functions, one module per kind of body:

- `custom_job`: the CustomJobSpec (worker pools, scheduling, the job's output folder) every request carries;
- `pipeline`: the CreateTrainingPipeline body around it (`CustomTrainingJob.run()`'s);
- `tuning`: the CreateHyperparameterTuningJob body (its trials run the CustomJobSpec);
- `request_hash`: the `vertexdist-request` label both bodies carry; `secrets`: masking for printouts.

`render_request(t)` is the body `submit` sends for a template: a tuning job's if it has a `tuning:` section,
a training pipeline's otherwise. The modules import one another only downwards (custom_job and
request_hash at the bottom), never this package, so there is no import circle (tests/test_layers.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vertexdist.render.custom_job import (
    JOB_FOLDER,
    PENDING,
    REDUCTION_SERVER_DISK,
    default_base_output_dir,
    job_output_dir,
    launcher_argv,
    output_dir_of,
    placeholder_image_uri,
    placeholder_package_uri,
    render_job_spec,
    render_worker_pools,
    with_job_folder,
)
from vertexdist.render.pipeline import TRAINING_TASK_DEFINITION, render_pipeline_request
from vertexdist.render.request_hash import REQUEST_HASH_LABEL, REQUEST_RESOURCES, request_hash
from vertexdist.render.secrets import MASK, is_secret_name, mask_secrets, mask_text, secret_values
from vertexdist.render.tuning import render_tuning_request

if TYPE_CHECKING:
    from vertexdist.spec.models import JobTemplate


def render_request(
    t: JobTemplate,
    *,
    package_uri: str | None = None,
    image_uri: str | None = None,
    resume_from: str | None = None,
) -> dict[str, Any]:
    """The body submit sends for `t`: CreateHyperparameterTuningJob for a template with a `tuning:` section
    (`tuning.render_tuning_request`), CreateTrainingPipeline otherwise (`pipeline.render_pipeline_request`);
    the job-folder placeholder in place unless it resumes a folder."""
    render = render_tuning_request if t.tuning is not None else render_pipeline_request
    return render(t, package_uri=package_uri, image_uri=image_uri, resume_from=resume_from)


__all__ = [
    "JOB_FOLDER",
    "MASK",
    "PENDING",
    "REDUCTION_SERVER_DISK",
    "REQUEST_HASH_LABEL",
    "REQUEST_RESOURCES",
    "TRAINING_TASK_DEFINITION",
    "default_base_output_dir",
    "is_secret_name",
    "job_output_dir",
    "launcher_argv",
    "mask_secrets",
    "mask_text",
    "output_dir_of",
    "placeholder_image_uri",
    "placeholder_package_uri",
    "render_job_spec",
    "render_pipeline_request",
    "render_request",
    "render_tuning_request",
    "render_worker_pools",
    "request_hash",
    "secret_values",
    "with_job_folder",
]
