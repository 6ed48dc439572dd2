"""What the Model Registry takes, checked before any name or file is formed from it: the same shape rules
as jobs (`spec.names`), and Vertex's own for models. Pure: a request's JSON in, `(field, what is wrong)`
out, so the emulator answers 400 naming the field.

- `modelId` (UploadModelRequest.model_id): "up to 63 characters, and valid characters are `[a-z0-9_-]`. The
  first character cannot be a number or hyphen" (https://cloud.google.com/vertex-ai/docs/reference/rest/v1/
  projects.locations.models/upload). A model's id in a path is the same, or the numeric id Vertex makes.
- `parentModel`: `projects/P/locations/L/models/ID` of the same location, nothing else.
- `displayName`: a string of 1-128 characters; `labels`: GCP's label rules; `versionAliases`: strings of
  Vertex's alias pattern (at most 128 characters, never a number), at most `MAX_ALIASES`;
  `description` and `versionDescription`: strings of at most `MAX_DESCRIPTION_CHARS`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from vertexdist.spec.names import (
    display_name_problem,
    label_key_problem,
    label_value_problem,
    labels_count_problem,
)

MODEL_ID = re.compile(r"^(?:[a-z_][a-z0-9_-]{0,62}|[1-9][0-9]{0,18})$")
ALIAS = re.compile(r"^[a-z][a-zA-Z0-9-]{0,126}[a-z0-9-]$")
LOCATION = re.compile(r"^projects/[^/@]+/locations/[^/@]+$")
MAX_ALIASES = 64
MAX_DESCRIPTION_CHARS = 16 * 1024
Problem = tuple[str, str]


def model_id_problem(ident: object) -> str | None:
    """Why `ident` cannot be a model's id (None when it can)."""
    if not isinstance(ident, str):
        return f"expected a string, got {type(ident).__name__}"
    if not MODEL_ID.match(ident):
        return f"{ident[:80]!r} is not a model id: at most 63 of a-z 0-9 _ -, not starting with a digit or -"
    return None


def parent_model_problem(parent_model: object, location: str) -> str | None:
    """Why `parent_model` cannot name a model of `location` (None when it can)."""
    if not isinstance(parent_model, str):
        return f"expected a string, got {type(parent_model).__name__}"
    head, sep, ident = parent_model.rpartition("/models/")
    if not sep or head != location or model_id_problem(ident) is not None:
        return f"{parent_model[:200]!r} is not a model of {location} (projects/P/locations/L/models/ID)"
    return None


def aliases_problem(aliases: object, *, signed: bool = False) -> str | None:
    """Why `aliases` cannot be a model's `versionAliases` (a `-` before one allowed when `signed`)."""
    if not isinstance(aliases, list):
        return f"expected a list of aliases, got {type(aliases).__name__}"
    if len(aliases) > MAX_ALIASES:
        return f"{len(aliases)} aliases; at most {MAX_ALIASES}"
    for alias in aliases:
        if not isinstance(alias, str):
            return f"expected a list of aliases (strings), got a {type(alias).__name__}"
        bare = alias[1:] if signed and alias.startswith("-") else alias
        if not ALIAS.match(bare):
            return (
                f"{alias[:140]!r} must match [a-z][a-zA-Z0-9-]{{0,126}}[a-z0-9-] (at most 128 characters, "
                "starting with a lowercase letter)"
            )
    return None


def labels_problem(labels: object) -> str | None:
    if not isinstance(labels, Mapping):
        return f"expected a map of strings, got {type(labels).__name__}"
    count = labels_count_problem(len(labels))
    if count:
        return count
    for key, value in labels.items():
        if not isinstance(key, str) or not isinstance(value, str):
            return "expected a map of strings to strings"
        problem = label_key_problem(key) or label_value_problem(value)
        if problem:
            return problem
    return None


def _text_problem(value: object, limit: int) -> str | None:
    if not isinstance(value, str):
        return f"expected a string, got {type(value).__name__}"
    if len(value) > limit:
        return f"{len(value)} characters; at most {limit}"
    return None


def model_problems(
    model: object, where: str = "model", *, fields: tuple[str, ...] | None = None
) -> list[Problem]:
    """The problems of a Model's own fields (`fields`: only those, as a patch's mask names them)."""
    if not isinstance(model, Mapping):
        return [(where, f"expected an object, got {type(model).__name__}")]
    found: list[Problem] = []

    def wanted(key: str) -> bool:
        return key in model and (fields is None or key in fields)

    if wanted("displayName"):
        name = model["displayName"]
        problem = (
            display_name_problem(name)
            if isinstance(name, str)
            else f"expected a string, got {type(name).__name__}"
        )
        if problem:
            found.append((f"{where}.displayName", problem))
    if wanted("labels"):
        problem = labels_problem(model["labels"])
        if problem:
            found.append((f"{where}.labels", problem))
    if wanted("versionAliases"):
        problem = aliases_problem(model["versionAliases"])
        if problem:
            found.append((f"{where}.versionAliases", problem))
    for key in ("description", "versionDescription", "artifactUri"):
        if wanted(key):
            problem = _text_problem(model[key], MAX_DESCRIPTION_CHARS)
            if problem:
                found.append((f"{where}.{key}", problem))
    if wanted("containerSpec") and not isinstance(model["containerSpec"], Mapping):
        found.append((f"{where}.containerSpec", "expected an object"))
    return found


def upload_problems(body: object, location: str) -> list[Problem]:
    """The problems of an UploadModelRequest (or a pipeline's `modelToUpload` with its `modelId` and
    `parentModel`): a display name is required."""
    if not isinstance(body, Mapping):
        return [("", "expected an object")]
    model = body.get("model")
    found = model_problems(model)
    if isinstance(model, Mapping) and "displayName" not in model:
        found.append(("model.displayName", "is required"))
    if body.get("modelId") not in (None, ""):
        problem = model_id_problem(body["modelId"])
        if problem:
            found.append(("modelId", problem))
    if body.get("parentModel") not in (None, ""):
        problem = parent_model_problem(body["parentModel"], location)
        if problem:
            found.append(("parentModel", problem))
    return found


def location_problem(location: str) -> str | None:
    return None if LOCATION.match(location) else f"{location[:200]!r} is not projects/P/locations/L"


def one_message(problems: list[Problem]) -> str:
    """`field: what is wrong; ...` for a 400's message."""
    return "; ".join(f"{field}: {what}" if field else what for field, what in problems)


__all__ = [
    "ALIAS",
    "aliases_problem",
    "labels_problem",
    "model_id_problem",
    "model_problems",
    "one_message",
    "parent_model_problem",
    "upload_problems",
]
