"""Template -> the CreateTrainingPipeline body around the CustomJobSpec, as `CustomTrainingJob.run()` sends
it, with the template's `model:` as its `modelToUpload`, `parentModel` and `modelId`. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vertexdist.render.custom_job import render_job_spec
from vertexdist.render.request_hash import REQUEST_HASH_LABEL, request_hash

if TYPE_CHECKING:
    from vertexdist.spec.model_upload import ModelUploadSpec
    from vertexdist.spec.models import JobTemplate

TRAINING_TASK_DEFINITION = "gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml"
DEFAULT_ALIAS = "default"


def parent_model_name(parent_model: str, project: str | None, location: str) -> str:
    """A model's full resource name from its full name or its id (`_get_true_version_parent`)."""
    if parent_model.startswith("projects/"):
        return parent_model
    return f"projects/{project}/locations/{location}/models/{parent_model}"


def render_container_spec(m: ModelUploadSpec) -> dict[str, Any]:
    """The serving ModelContainerSpec, the fields the SDK sets from `model_serving_container_*` only."""
    spec: dict[str, Any] = {"imageUri": m.serving_container_image_uri}
    if m.serving_container_command:
        spec["command"] = list(m.serving_container_command)
    if m.serving_container_args:
        spec["args"] = list(m.serving_container_args)
    if m.serving_container_environment_variables:
        spec["env"] = [{"name": k, "value": v} for k, v in m.serving_container_environment_variables.items()]
    if m.serving_container_ports:
        spec["ports"] = [{"containerPort": port} for port in m.serving_container_ports]
    if m.serving_container_predict_route:
        spec["predictRoute"] = m.serving_container_predict_route
    if m.serving_container_health_route:
        spec["healthRoute"] = m.serving_container_health_route
    return spec


def render_model_upload(t: JobTemplate) -> dict[str, Any]:
    """The TrainingPipeline fields of `model:` (empty without one): `modelToUpload` as
    `CustomTrainingJob.run()` fills it (display name `<display_name>-model` by default, the job's labels
    unless the model has its own, `default` among the aliases when it is the default version), `parentModel`
    as a full name, `modelId`."""
    m = t.model
    if m is None:
        return {}
    aliases = list(m.version_aliases)
    if m.is_default_version and DEFAULT_ALIAS not in aliases:
        aliases.insert(0, DEFAULT_ALIAS)
    model: dict[str, Any] = {
        "displayName": m.display_name or f"{t.display_name}-model",
        "containerSpec": render_container_spec(m),
        "labels": dict(m.labels if m.labels is not None else t.labels),
        "versionAliases": aliases,
    }
    if m.description:
        model["description"] = m.description
    if m.version_description:
        model["versionDescription"] = m.version_description
    fields: dict[str, Any] = {"modelToUpload": model}
    if m.parent_model:
        fields["parentModel"] = parent_model_name(m.parent_model, t.project, t.location)
    if m.model_id:
        fields["modelId"] = m.model_id
    return fields


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
            **render_model_upload(t),
        },
    }
    labels[REQUEST_HASH_LABEL] = request_hash(request)
    return request
