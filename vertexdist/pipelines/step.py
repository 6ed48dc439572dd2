"""`training_step(TEMPLATE, **overrides)`: the job `submit` would make, as google-cloud-pipeline-components'
CustomJob step, so that on Vertex it runs with no vertexdist there.

That step is data in the PipelineSpec: a container (GCPC's image) running
`google_cloud_pipeline_components.container.v1.custom_job.launcher --type CustomJob --payload JSON
--project P --location L --gcp_resources PATH`, the payload a CustomJob (display name, job spec, labels).
GCPC 2.22 declares google-cloud-aiplatform<2, which this project cannot take, so the step is emitted here
without importing it. The job spec is exactly what `vertexdist render --request TEMPLATE` shows (the same
worker pools, reduction servers, scheduling, timeout, package or image), its job folder one per pipeline
task (`{{$.pipeline_task_uuid}}`, which Vertex fills in).

Trainer arguments may come from earlier steps: an item of `args` that is a task's output
(`prep.output`) becomes a placeholder in the payload, filled in when the step runs.

The step's outputs are `gcp_resources` (the CustomJob's resource name, as GCPC's launcher writes it) and
`model`: the job's output folder as an artifact. The job's `baseOutputDirectory` is that artifact's URI
(`{{$.outputs.artifacts['model'].uri}}`, which Vertex fills in under the pipeline root), so its model is in
the artifact's `model/` folder (`AIP_MODEL_DIR`), its checkpoints in `checkpoints/`, its TensorBoard logs in
`logs/`. `model_upload_step` registers that `model/` folder.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GCPC_IMAGE = "gcr.io/ml-pipeline/google-cloud-pipeline-components:2.22.0"
LAUNCHER = ["python3", "-u", "-m", "google_cloud_pipeline_components.container.v1.custom_job.launcher"]
TASK_FOLDER = "{{$.pipeline_task_uuid}}"
MODEL_OUTPUT = "{{$.outputs.artifacts['model'].uri}}"
UPLOAD_LAUNCHER = [
    "python3",
    "-u",
    "-m",
    "google_cloud_pipeline_components.container.v1.model.upload_model.launcher",
]
MODEL_INPUT = "{{$.inputs.artifacts['model'].uri}}"
_SENTINEL = "@@vertexdist-input-{}@@"
# The templates training_step was called with while a `recording()` is open (`pipeline run` stages their
# packages, as `submit` uploads its own).
_RECORDING: list[set[Path]] = []


@contextlib.contextmanager
def recording() -> Iterator[set[Path]]:
    """The templates every `training_step` call names while the `with` is open (resolved paths)."""
    used: set[Path] = set()
    _RECORDING.append(used)
    try:
        yield used
    finally:
        _RECORDING.remove(used)


@dataclass(frozen=True)
class StepCall:
    """One `training_step` call: its template and where in the pipeline's file it was made."""

    template: Path
    file: str
    line: int


_STEPS: list[list[StepCall]] = []


@contextlib.contextmanager
def recording_steps() -> Iterator[list[StepCall]]:
    """Every `training_step` call made while the `with` is open, in order (`validate` checks their
    templates and names the call's line)."""
    calls: list[StepCall] = []
    _STEPS.append(calls)
    try:
        yield calls
    finally:
        _STEPS.remove(calls)


def _template(template: str | Path, overrides: dict[str, Any]) -> Any:
    from vertexdist.spec.loader import load_template

    loaded = load_template(template)
    if not overrides:
        return loaded
    fields = loaded.model_dump(exclude_unset=True)
    return type(loaded).model_validate({**fields, **overrides})


def custom_job_payload(
    template: str | Path, job_folder: str = TASK_FOLDER, **overrides: Any
) -> dict[str, Any]:
    """The CustomJob the step creates: `render --request`'s job spec, display name and labels (pure but
    for reading the template and its trainer's files, for the package digest)."""
    from vertexdist.packaging import planned_package_uri
    from vertexdist.render import render_request
    from vertexdist.render.custom_job import with_job_folder

    loaded = _template(template, overrides)
    if loaded.tuning is not None:
        raise ValueError(f"{template}: a template with `tuning:` is a tuning job, not one pipeline step")
    package_uri = None
    if loaded.build is None and loaded.staging_bucket:
        package_uri = planned_package_uri(loaded.trainer, loaded.staging_bucket)
    request = with_job_folder(render_request(loaded, package_uri=package_uri), job_folder)
    pipeline = request["trainingPipeline"]
    return {
        "display_name": pipeline["displayName"],
        "job_spec": pipeline["trainingTaskInputs"],
        "labels": pipeline.get("labels", {}),
    }


def step_payload(template: str | Path, **overrides: Any) -> dict[str, Any]:
    """The payload `training_step` emits: `custom_job_payload`, its output folder the `model` artifact."""
    payload = custom_job_payload(template, **overrides)
    payload["job_spec"]["baseOutputDirectory"] = {"outputUriPrefix": MODEL_OUTPUT}
    return payload


def training_step(template: str | Path, *, args: list[Any] | None = None, **overrides: Any) -> Any:
    """A kfp task (call it inside a `@dsl.pipeline` function) running TEMPLATE's job as a CustomJob step.

    `args` replaces the trainer's arguments; its items may be earlier tasks' outputs. Other keywords
    override the template's own fields (`replica_count=4`, `display_name=...`). The task's output
    `gcp_resources` names the CustomJob, as google-cloud-pipeline-components' step writes it; its output
    `model` is the job's output folder (the model in its `model/`).
    """
    from kfp import components

    for used in _RECORDING:
        used.add(Path(template).resolve())
    if _STEPS:
        caller = sys._getframe(1)  # the @dsl.pipeline function's body, in the pipeline's file
        for calls in _STEPS:
            calls.append(StepCall(Path(template), caller.f_code.co_filename, caller.f_lineno))
    inputs: dict[str, Any] = {}
    literal_args: list[str] | None = None
    if args is not None:
        literal_args = []
        for item in args:
            if isinstance(item, (str, int, float)):
                literal_args.append(str(item))
            else:  # a PipelineChannel: an earlier task's output
                name = f"arg{len(inputs)}"
                inputs[name] = item
                literal_args.append(_SENTINEL.format(name))
    if literal_args is not None:
        loaded = _template(template, {})
        overrides["trainer"] = {**loaded.trainer.model_dump(exclude_unset=True), "args": literal_args}
    payload = step_payload(template, **overrides)
    loaded = _template(template, {k: v for k, v in overrides.items() if k != "trainer"})
    spec = {
        "name": payload["display_name"],
        "inputs": [{"name": name, "type": "String"} for name in inputs],
        "outputs": [{"name": "gcp_resources", "type": "String"}, {"name": "model", "type": "Model"}],
        "implementation": {
            "container": {
                "image": GCPC_IMAGE,
                "command": LAUNCHER,
                "args": [
                    "--type",
                    "CustomJob",
                    "--payload",
                    _payload_arg(json.dumps(payload, sort_keys=True), list(inputs)),
                    "--project",
                    loaded.project or "",
                    "--location",
                    loaded.location,
                    "--gcp_resources",
                    {"outputPath": "gcp_resources"},
                ],
            }
        },
    }
    import yaml

    op = components.load_component_from_text(yaml.safe_dump(spec, sort_keys=False))
    return op(**inputs)


def _payload_arg(text: str, names: list[str]) -> Any:
    """The payload as one string, or a concat of its pieces and the inputs' values (pure)."""
    return {"concat": _payload_parts(text, names)} if names else text


def _payload_parts(text: str, names: list[str]) -> list[Any]:
    """The payload's JSON split around each input's sentinel, the input's value in its place (pure)."""
    parts: list[Any] = [text]
    for name in names:
        sentinel = _SENTINEL.format(name)
        split: list[Any] = []
        for part in parts:
            if isinstance(part, str) and sentinel in part:
                pieces = part.split(sentinel)  # every worker pool has the arguments
                for index, piece in enumerate(pieces):
                    split.extend([piece] if index == 0 else [{"inputValue": name}, piece])
            else:
                split.append(part)
        parts = split
    return [p for p in parts if p != ""]


def model_upload_step(trained: Any, template: str | Path, /, **overrides: Any) -> Any:
    """A kfp task registering a `training_step`'s model (`trained`: its `model` output) in the Model
    Registry, as TEMPLATE's `model:` says (display name, serving container, labels, aliases, parent model).

    On Vertex it is google-cloud-pipeline-components' ModelUploadOp: its image running
    `...container.v1.model.upload_model.launcher --type UploadModel --payload MODEL --project P
    --location L --gcp_resources PATH --executor_input {{$}}`, the payload a Model whose `artifact_uri` is
    the model folder (`<the model artifact>/model`). Its output `gcp_resources` names the new model version.
    """
    from kfp import components

    from vertexdist.render.pipeline import render_model_upload

    loaded = _template(template, overrides)
    fields = render_model_upload(loaded)
    if not fields:
        raise ValueError(f"{template}: has no `model:` section, so there is no model to upload")
    wanted = {**fields["modelToUpload"], "artifactUri": MODEL_INPUT + "/model"}
    text = json.dumps(wanted, sort_keys=True)
    before, _, after = text.partition(MODEL_INPUT)
    args: list[Any] = [
        "--type",
        "UploadModel",
        "--payload",
        {"concat": [before, {"inputUri": "model"}, after]},
        "--project",
        loaded.project or "",
        "--location",
        loaded.location,
        "--gcp_resources",
        {"outputPath": "gcp_resources"},
        "--executor_input",
        "{{$}}",
    ]
    if fields.get("parentModel"):
        args.extend(["--parent_model_name", fields["parentModel"]])
    spec = {
        "name": f"{wanted['displayName']}-upload",
        "inputs": [{"name": "model", "type": "Model"}],
        "outputs": [{"name": "gcp_resources", "type": "String"}],
        "implementation": {"container": {"image": GCPC_IMAGE, "command": UPLOAD_LAUNCHER, "args": args}},
    }
    import yaml

    op = components.load_component_from_text(yaml.safe_dump(spec, sort_keys=False))
    return op(model=trained)
