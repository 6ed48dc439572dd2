"""google-cloud-pipeline-components' CustomJob step, read as data: the emulator runs it as its own CustomJob.

On Vertex that step is a container running `google_cloud_pipeline_components.container.v1.custom_job.
launcher --type CustomJob --payload JSON --project P --location L --gcp_resources PATH`: the launcher creates
the CustomJob from the payload (a CustomJob in proto JSON, snake_case keys), waits for it, and writes the
job's resource name to PATH as a GcpResources message (`{"resources": [{"resourceType": "CustomJob",
"resourceUri": "https://L-aiplatform.googleapis.com/v1/NAME"}]}`; GCPC `container/v1/gcp_launcher/
job_remote_runner.py`). The emulator cannot run that container (it calls Vertex at a fixed host), so it
does the same three things itself.

GCPC's ModelUploadOp is the same kind of step: `...container.v1.model.upload_model.launcher --type
UploadModel --payload MODEL --project P --location L --gcp_resources PATH --executor_input {{$}}
[--parent_model_name NAME]` uploads the Model (its `artifact_uri` and `container_spec` in the payload) and
writes `{"resources": [{"resourceType": "Model", "resourceUri": ".../v1/MODEL@VERSION"}]}`. The emulator
registers it in its own Model Registry. All pure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

LAUNCHER_MODULE = "google_cloud_pipeline_components.container.v1.custom_job.launcher"
UPLOAD_MODULE = "google_cloud_pipeline_components.container.v1.model.upload_model.launcher"
# Map fields whose keys are the user's, not proto field names: left as they are.
_USER_KEYS = frozenset({"labels"})


@dataclass(frozen=True)
class LauncherCall:
    project: str
    location: str
    payload: dict[str, Any]
    gcp_resources: str


def is_custom_job_launcher(command: list[str]) -> bool:
    return LAUNCHER_MODULE in command


def _flags(command: list[str], module: str, required: tuple[str, ...]) -> dict[str, str]:
    flags: dict[str, str] = {}
    rest = command[command.index(module) + 1 :]
    for index, word in enumerate(rest):
        if word.startswith("--") and index + 1 < len(rest):
            flags[word[2:]] = rest[index + 1]
    missing = [f"--{k}" for k in required if k not in flags]
    if missing:
        raise ValueError(f"the {module.split('.')[-2]} launcher's command lacks {', '.join(missing)}")
    return flags


def _payload(text: str, what: str) -> dict[str, Any]:
    try:
        payload = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"the launcher's --payload is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise ValueError(f"the launcher's --payload is not a JSON object (a {what})")
    return payload


def launcher_call(command: list[str]) -> LauncherCall:
    """The launcher's flags from its resolved command; ValueError naming what is missing or wrong."""
    flags = _flags(command, LAUNCHER_MODULE, ("type", "payload", "project", "location", "gcp_resources"))
    if flags["type"] != "CustomJob":
        raise ValueError(f"the launcher's --type is {flags['type']!r}; the emulator runs CustomJob")
    payload = _payload(flags["payload"], "CustomJob")
    return LauncherCall(flags["project"], flags["location"], camel_case(payload), flags["gcp_resources"])


@dataclass(frozen=True)
class UploadCall:
    project: str
    location: str
    model: dict[str, Any]
    parent_model: str
    gcp_resources: str


def is_model_upload_launcher(command: list[str]) -> bool:
    return UPLOAD_MODULE in command


def upload_call(command: list[str]) -> UploadCall:
    """ModelUploadOp's flags from its resolved command; ValueError naming what is missing or wrong."""
    flags = _flags(command, UPLOAD_MODULE, ("type", "payload", "project", "location", "gcp_resources"))
    if flags["type"] != "UploadModel":
        raise ValueError(f"the upload launcher's --type is {flags['type']!r}, not UploadModel")
    model = camel_case(_payload(flags["payload"], "Model"))
    if not model.get("artifactUri"):
        raise ValueError("the upload launcher's payload has no artifact_uri (the model folder)")
    return UploadCall(
        flags["project"],
        flags["location"],
        model,
        flags.get("parent_model_name", ""),
        flags["gcp_resources"],
    )


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def camel_case(value: Any) -> Any:
    """Proto JSON's lowerCamelCase field names for a snake_case payload; map fields' own keys kept; empty
    strings, lists and objects dropped, as proto3 JSON leaves default values out."""
    if isinstance(value, list):
        return [camel_case(v) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key in _USER_KEYS:
            out[_camel(key)] = item
            continue
        converted = camel_case(item)
        if converted in ("", [], {}, None):
            continue
        out[_camel(key)] = converted
    return out


def gcp_resources(location: str, name: str, kind: str = "CustomJob") -> str:
    """The launcher's output: the job (or model version) as a GcpResources message, JSON."""
    uri = f"https://{location}-aiplatform.googleapis.com/v1/{name}"
    return json.dumps({"resources": [{"resourceType": kind, "resourceUri": uri}]})
