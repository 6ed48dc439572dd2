"""The Cloud Build request: `cloudbuild.yaml` plus the uploaded context, substitutions and build args.

`build_request` is pure and returns the proto-JSON body of `CloudBuild.CreateBuild`
(`{"projectId": ..., "build": {...}}`); `validate_request` checks it against google-cloud-build's own
messages with unknown fields rejected. A context with its own `cloudbuild.yaml` at its root gets that
file (this repository's validates the templates and runs the tests first); any other context gets the
bundled image-only pipeline, whose steps are the same as the image steps of the repository's file.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vertexdist.errors import VertexdistError

CONFIG_NAME = "cloudbuild.yaml"
BUNDLED_CONFIG = Path(__file__).with_name("cloudbuild.image.yaml")
DOCKER_BUILD_STEP = "docker-build"
IMAGE_STEP_IDS = ("content-tag", "cache-pull", DOCKER_BUILD_STEP, "tag-push")


def load_config(path: Path) -> dict[str, Any]:
    """A `cloudbuild.yaml` as a mapping (safe YAML)."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise VertexdistError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        raise VertexdistError(f"{path}: a Cloud Build config needs a `steps` list")
    return data


def config_path_for(context_root: Path) -> Path:
    """The context's own `cloudbuild.yaml` when it has one, else the bundled image-only pipeline."""
    own = context_root / CONFIG_NAME
    return own if own.is_file() else BUNDLED_CONFIG


def _insert_build_args(steps: list[Any], build_args: Mapping[str, str]) -> None:
    for step in steps:
        if isinstance(step, dict) and step.get("id") == DOCKER_BUILD_STEP:
            args = step.get("args")
            if not isinstance(args, list) or "build" not in args:
                break
            at = args.index("build") + 1
            flags = [item for k in sorted(build_args) for item in ("--build-arg", f"{k}={build_args[k]}")]
            step["args"] = args[:at] + flags + args[at:]
            return
    raise VertexdistError(
        f"the Cloud Build config has no `{DOCKER_BUILD_STEP}` step running `docker build`"
        " to take the build args",
        hint=f"give the docker build step `id: {DOCKER_BUILD_STEP}` and `args: [build, ...]`",
    )


def build_request(
    config: Mapping[str, Any],
    *,
    project_id: str,
    source_bucket: str,
    source_object: str,
    substitutions: Mapping[str, str],
    build_args: Mapping[str, str] | None = None,
    logs_bucket: str | None = None,
    tags: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The CreateBuild body: the config with the uploaded source, its substitutions and the build args.

    Only substitutions the config declares are sent: Cloud Build rejects unknown ones unless the config
    allows loose matching, and a config that does not use one has no use for it.
    """
    build = copy.deepcopy(dict(config))
    declared = build.get("substitutions") or {}
    build["substitutions"] = {
        **{k: str(v) for k, v in declared.items()},
        **{k: v for k, v in substitutions.items() if k in declared},
    }
    build["source"] = {"storageSource": {"bucket": source_bucket, "object": source_object}}
    if logs_bucket and not (build.get("logsBucket") or build.get("logs_bucket")):
        build["logsBucket"] = logs_bucket
    if tags:
        build["tags"] = list(dict.fromkeys([*build.get("tags", []), *tags]))
    if build_args:
        _insert_build_args(build["steps"], build_args)
    return {"projectId": project_id, "build": build}


def validate_build(build: Mapping[str, Any]) -> Any:
    """Parse a build config into google-cloud-build's `Build` message, rejecting unknown fields."""
    from google.cloud.devtools import cloudbuild_v1
    from google.protobuf.json_format import ParseError

    try:
        return cloudbuild_v1.Build.from_json(json.dumps(build), ignore_unknown_fields=False)
    except ParseError as exc:
        raise VertexdistError(f"not a valid Cloud Build config: {exc}") from None


def validate_request(request: Mapping[str, Any]) -> Any:
    """Parse a CreateBuild body into `CreateBuildRequest`, rejecting unknown fields."""
    from google.cloud.devtools import cloudbuild_v1
    from google.protobuf.json_format import ParseError

    try:
        return cloudbuild_v1.CreateBuildRequest.from_json(json.dumps(request), ignore_unknown_fields=False)
    except ParseError as exc:
        raise VertexdistError(f"not a valid Cloud Build request: {exc}") from None
