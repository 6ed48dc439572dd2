"""The template's `model:` section: the Model a job's TrainingPipeline uploads to the Model Registry once
its job succeeds, as `CustomTrainingJob(model_serving_container_*=...).run(model_display_name=...,
parent_model=..., model_version_aliases=..., is_default_version=..., model_version_description=...)` asks
for it (https://cloud.google.com/vertex-ai/docs/model-registry/versioning). Its rules (`RULES`) are what
`validate` checks: the serving image (in Artifact Registry or Container Registry, never Docker Hub:
https://cloud.google.com/vertex-ai/docs/predictions/use-custom-container), aliases, a parent model's name,
and a trainer that writes nothing to AIP_MODEL_DIR (a warning: the model would be an empty folder).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from vertexdist.spec.findings import Finding

if TYPE_CHECKING:
    from vertexdist.spec.models import JobTemplate

# A Vertex prebuilt prediction image (https://cloud.google.com/vertex-ai/docs/predictions/pre-built-containers).
PREBUILT_PREDICTION = re.compile(
    r"^(us|europe|asia)-docker\.pkg\.dev/vertex-ai/prediction/[a-z0-9][a-z0-9._-]*(:[\w.-]+)?$"
)
# Any registry image reference: [HOST[:PORT]/]PATH[:TAG][@sha256:DIGEST], lowercase path components.
_IMAGE = re.compile(
    r"^(?:[a-zA-Z0-9.-]+(?::\d+)?/)?[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*"
    r"(?::[\w][\w.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$"
)
# Docker Hub's own names for itself; a reference with no registry host is Docker Hub's too.
_DOCKER_HUB = ("docker.io", "index.docker.io", "registry-1.docker.io")
_TRAINING_IMAGE = ("docker.pkg.dev/vertex-ai/training/", "gcr.io/cloud-aiplatform/training/")
_ALIAS = re.compile(r"^[a-z][a-zA-Z0-9-]{0,126}[a-z0-9-]$")
_MODEL_NAME = re.compile(r"^(projects/[^/]+/locations/[^/]+/models/)?[a-zA-Z0-9][\w-]{0,127}$")
_MODEL_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
MODEL_DIR_VARIABLE = "AIP_MODEL_DIR"
_MAX_FILES_READ = 200


def _id_text(value: Any) -> Any:
    """A numeric model id written without quotes (YAML reads it as a number) is still the id."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


IdText = Annotated[
    str,
    BeforeValidator(_id_text),
    WithJsonSchema({"type": ["string", "integer"], "description": "A name or numeric id."}),
]


class ModelUploadSpec(BaseModel):
    """The Model the job uploads once it succeeds (TrainingPipeline `modelToUpload`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)

    serving_container_image_uri: str = Field(
        description=(
            "Image that serves predictions from the model: a Vertex prebuilt prediction image"
            " (us-docker.pkg.dev/vertex-ai/prediction/...) or any registry image."
        )
    )
    display_name: str | None = Field(
        default=None, description="The model's name in the Model Registry. Default: <display_name>-model."
    )
    description: str | None = Field(default=None, description="The model's description.")
    labels: dict[str, str] | None = Field(
        default=None, description="The model's labels. Default: the template's labels (as the SDK does)."
    )
    parent_model: IdText | None = Field(
        default=None,
        description=(
            "Make the model a new version of this one: projects/P/locations/L/models/ID or just ID."
        ),
    )
    model_id: str | None = Field(
        default=None,
        description="The id of a new model (lowercase letters, digits, -); Vertex picks one if unset.",
    )
    version_aliases: list[str] = Field(
        default_factory=list, description="Aliases of the new version, e.g. [candidate]."
    )
    is_default_version: bool = Field(
        default=True, description="Whether the new version becomes the model's default (the `default` alias)."
    )
    version_description: str | None = Field(default=None, description="The new version's description.")
    serving_container_predict_route: str | None = Field(
        default=None, description="HTTP path the serving container takes predictions on, e.g. /predict."
    )
    serving_container_health_route: str | None = Field(
        default=None, description="HTTP path the serving container answers health checks on, e.g. /health."
    )
    serving_container_ports: list[int] = Field(
        default_factory=list,
        description="Ports the serving container listens on (the first one gets requests).",
    )
    serving_container_command: list[str] = Field(
        default_factory=list, description="Entrypoint of the serving container, if not the image's."
    )
    serving_container_args: list[str] = Field(
        default_factory=list, description="Arguments of that entrypoint."
    )
    serving_container_environment_variables: dict[str, str] = Field(
        default_factory=dict, description="Environment variables of the serving container."
    )


def serving_image_problem(uri: str) -> tuple[str, str] | None:
    """(what is wrong, what would be right) with a serving image reference, or None (pure)."""
    hint = "use e.g. us-docker.pkg.dev/vertex-ai/prediction/pytorch-cpu.2-4:latest, or your own image"
    if any(marker in uri for marker in _TRAINING_IMAGE):
        return f"{uri!r} is a Vertex training image; a model is served by a prediction image", hint
    if "docker.pkg.dev/vertex-ai/prediction/" in uri and not PREBUILT_PREDICTION.match(uri):
        return f"{uri!r} is not a Vertex prebuilt prediction image reference", hint
    if not _IMAGE.match(uri):
        return f"{uri!r} is not an image reference (HOST/PATH[:TAG][@sha256:DIGEST])", hint
    if _on_docker_hub(uri):
        return (
            f"{uri!r} is a Docker Hub image; Vertex serves models only from images in Artifact Registry"
            " (or Container Registry)",
            "push it to Artifact Registry (docker tag, docker push REGION-docker.pkg.dev/PROJECT/REPO/IMAGE)"
            " and name that, or use a Vertex prebuilt prediction image"
            " (us-docker.pkg.dev/vertex-ai/prediction/...)",
        )
    return None


def _on_docker_hub(uri: str) -> bool:
    """A reference with no registry host (`nginx`, `pytorch/torchserve:tag`) or Docker Hub's own."""
    first, _, rest = uri.partition("/")
    if not rest:
        return True
    host = first.lower()
    return host in _DOCKER_HUB or not ("." in host or ":" in host or host == "localhost")


def _model_rules(t: JobTemplate) -> Iterator[Finding]:
    m = t.model
    if m is None:
        return
    problem = serving_image_problem(m.serving_container_image_uri)
    if problem is not None:
        yield Finding("model.serving_container_image_uri", *problem)
    for alias in m.version_aliases:
        if alias == "default":
            yield Finding(
                "model.version_aliases",
                "`default` is set by is_default_version",
                "remove it from version_aliases",
            )
        elif not _ALIAS.match(alias):
            yield Finding(
                "model.version_aliases",
                f"version alias {alias!r} is invalid",
                "aliases are 2-128 letters, digits or -, starting with a lowercase letter (never a number)",
            )
    if m.parent_model is not None and not _MODEL_NAME.match(m.parent_model):
        yield Finding(
            "model.parent_model",
            f"{m.parent_model!r} is not a model name",
            "write projects/PROJECT/locations/LOCATION/models/ID, or just the model's ID",
        )
    if m.parent_model is not None and m.model_id is not None:
        yield Finding(
            "model.model_id",
            "model_id names a new model; parent_model adds a version to one",
            "set one of them",
        )
    if m.model_id is not None and not _MODEL_ID.match(m.model_id):
        yield Finding(
            "model.model_id", f"model_id {m.model_id!r} is invalid", "1-63 lowercase letters, digits or -"
        )
    if not m.is_default_version and m.parent_model is None:
        yield Finding(
            "model.is_default_version",
            "a new model's first version is always its default",
            "set parent_model to add a version that is not the default",
            "warning",
        )
    for port in m.serving_container_ports:
        if not 1 <= port <= 65535:
            yield Finding("model.serving_container_ports", f"port {port} is not 1..65535", None)
    if t.tuning is not None:
        yield Finding("model", "a hyperparameter tuning job uploads no model", "remove `model:` or `tuning:`")
    yield from _writes_model_dir(t)


def _code_files(t: JobTemplate) -> list[Path]:
    if t.trainer.script is not None:
        return [t.trainer.script]
    if t.trainer.package is None:
        return []
    return sorted(t.trainer.package.rglob("*.py"))[:_MAX_FILES_READ]


def _writes_model_dir(t: JobTemplate) -> Iterator[Finding]:
    """A warning when no readable file of the trainer mentions AIP_MODEL_DIR (the bundled trainer does)."""
    if t.trainer.is_bundled:
        return
    texts = []
    for path in _code_files(t):
        try:
            texts.append(path.read_text(errors="replace"))
        except OSError:
            return  # unreadable: nothing to say
    if texts and not any(MODEL_DIR_VARIABLE in text for text in texts):
        yield Finding(
            "model",
            f"the trainer never mentions {MODEL_DIR_VARIABLE}: the model it uploads may be an empty folder",
            f"save the model under os.environ['{MODEL_DIR_VARIABLE}'] (gs://; /gcs/... through FUSE)",
            "warning",
        )


RULES = (_model_rules,)
