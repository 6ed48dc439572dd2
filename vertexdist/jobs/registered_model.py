"""The Model a job registers: the one a succeeded TrainingPipeline uploaded (`modelToUpload.name` +
`versionId`), for `submit --follow` to print; the one a local run's model folder would make."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vertexdist.backends.vertex import VertexBackend
    from vertexdist.spec.models import JobTemplate

CALL_TIMEOUT_S = 60.0


def uploaded_model(backend: VertexBackend, pipeline_name: str) -> tuple[str, str] | None:
    """(the model's resource name, its version id) that `pipeline_name` uploaded, None if it uploaded none."""
    if "/trainingPipelines/" not in pipeline_name:
        return None
    pipeline = backend.clients.pipelines.get_training_pipeline(name=pipeline_name, timeout=CALL_TIMEOUT_S)
    uploaded = pipeline.model_to_upload
    if not uploaded or not uploaded.name:
        return None
    return str(uploaded.name), str(uploaded.version_id or "1")


def local_registration(
    template: JobTemplate, output_dir: str | None, output_path: str | None
) -> tuple[list[str], str | None]:
    """For a local run of a template with `model:`: the lines saying which Model Vertex would register, from
    which folder, and what is wrong (None: nothing) — its model folder missing or empty."""
    from vertexdist.render.pipeline import render_model_upload

    fields = render_model_upload(template)
    if not fields or not output_dir or not output_path:
        return [], None
    model = fields["modelToUpload"]
    folder = Path(output_path) / "model"
    files = [p for p in folder.rglob("*") if p.is_file()] if folder.is_dir() else []
    parent = fields.get("parentModel")
    what = f"a new version of {parent}" if parent else "a new model"
    aliases = ", ".join(model["versionAliases"]) or "none"
    lines = [
        f"model: on Vertex this job registers {what}, {model['displayName']!r} (aliases: {aliases}),",
        f"  from {output_dir}/model ({len(files)} file{'' if len(files) == 1 else 's'} in {folder}),",
        f"  served by {model['containerSpec']['imageUri']}",
    ]
    if files:
        return lines, None
    return lines, (
        f"the job wrote nothing to its model folder {folder} (AIP_MODEL_DIR): the registered model would be"
        " empty"
    )
