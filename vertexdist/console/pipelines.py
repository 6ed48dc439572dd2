"""The console's pipeline page: a PipelineJob (Vertex AI Pipelines) read through PipelineService
(`get_pipeline_job`, `list_pipeline_jobs`), so it shows the same on Vertex and on the emulator.

The shaping is pure (`pipeline_view`, `dependency_levels`, `task_rows`): the DAG of the pipeline's root tasks
laid out by dependency level (a task's level is one past its deepest upstream task's), each task with its
state, times, input and output parameters (its execution's `input:`/`output:` metadata, as Vertex writes
them) and artifacts (their URIs), and for a CustomJob step (google-cloud-pipeline-components' launcher, its
`gcp_resources` output) the console path of that CustomJob's page. Tasks inside a loop or condition list
under the task that holds them.

A pipeline's id is what `pipelineJobId` may be (`PIPELINE_ID`); anything else is no pipeline (404) before
any call is made.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from vertexdist.console.errors import NotFound, Unavailable
from vertexdist.console.refs import JobRef, vertex_ref

if TYPE_CHECKING:
    from vertexdist.backends.vertex import VertexBackend

PIPELINE_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,127}")
COLLECTION = "pipelineJobs"
CALL_TIMEOUT_S = 30.0
LISTED_FIELDS = ["name", "display_name", "state", "create_time", "start_time", "end_time"]
GCP = "gcp_resources"  # a google-cloud-pipeline-components step's output: what it made, shown as a link


def short_state(state: object) -> str:
    return str(state or "STATE_UNSPECIFIED").removeprefix("PIPELINE_STATE_")


def pipeline_ref(name: str) -> JobRef | None:
    """The console ref of a PipelineJob's full name (projects/P/locations/L/pipelineJobs/ID)."""
    parts = name.split("/")
    if len(parts) < 2 or parts[-2] != COLLECTION or not PIPELINE_ID.fullmatch(parts[-1]):
        return None
    return JobRef("vertex", f"{COLLECTION}/{parts[-1]}")


def dependency_levels(upstream: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """The tasks by level: level 0 has no upstream task among `upstream`'s keys, level n+1 those whose
    deepest upstream task is at level n. Names in each level sorted; a cycle (no valid spec has one) or an
    unknown upstream name is ignored rather than looped on."""
    level: dict[str, int] = {}

    def depth(name: str, seen: frozenset[str]) -> int:
        if name in level:
            return level[name]
        ups = [u for u in upstream.get(name, ()) if u in upstream and u not in seen]
        found = 1 + max((depth(u, seen | {name}) for u in ups), default=-1)
        level[name] = found
        return found

    for name in upstream:
        depth(name, frozenset())
    levels: list[list[str]] = [[] for _ in range(max(level.values(), default=-1) + 1)]
    for name, at in level.items():
        levels[at].append(name)
    return [sorted(names) for names in levels]


def _parameter_text(value: object) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def custom_job_path(metadata: Mapping[str, Any]) -> str | None:
    """The console path of the CustomJob a google-cloud-pipeline-components step ran: its `gcp_resources`
    output (`{"resources": [{"resourceType": "CustomJob", "resourceUri": ".../customJobs/ID"}]}`)."""
    raw = metadata.get("output:gcp_resources")
    try:
        resources = json.loads(raw).get("resources", []) if isinstance(raw, str) else []
    except (ValueError, AttributeError):
        return None
    for resource in resources if isinstance(resources, list) else []:
        if isinstance(resource, dict) and resource.get("resourceType") == "CustomJob":
            ref = vertex_ref(str(resource.get("resourceUri", "")))
            if ref is not None and ref.job.startswith("customJobs/"):
                return ref.path
    return None


def _artifacts(side: Mapping[str, Any] | None) -> list[dict[str, str]]:
    found = []
    for key, listed in sorted((side or {}).items()):
        for artifact in (listed or {}).get("artifacts") or []:
            found.append(
                {
                    "name": str(key),
                    "uri": str(artifact.get("uri", "")),
                    "type": str(artifact.get("schemaTitle", "")),
                }
            )
    return found


def task_row(detail: Mapping[str, Any]) -> dict[str, Any]:
    """One PipelineTaskDetail (its REST JSON) as the page shows it."""
    metadata = (detail.get("execution") or {}).get("metadata") or {}
    inputs = {k[len("input:") :]: v for k, v in metadata.items() if k.startswith("input:")}
    outputs = {k[len("output:") :]: v for k, v in metadata.items() if k.startswith("output:")}
    error = detail.get("error") or {}
    return {
        "id": str(detail.get("taskId", "")),
        "name": str(detail.get("taskName", "")),
        "parent": str(detail.get("parentTaskId", "")),
        "state": short_state(detail.get("state")),
        "created": str(detail.get("createTime") or ""),
        "started": str(detail.get("startTime") or ""),
        "ended": str(detail.get("endTime") or ""),
        "inputs": [{"name": k, "value": _parameter_text(v)} for k, v in sorted(inputs.items())],
        "outputs": [{"name": k, "value": _parameter_text(v)} for k, v in sorted(outputs.items()) if k != GCP],
        "inputArtifacts": _artifacts(detail.get("inputs")),
        "outputArtifacts": _artifacts(detail.get("outputs")),
        "customJob": custom_job_path(metadata),
        "error": str(error.get("message", "")) if isinstance(error, dict) else "",
        "children": [],
    }


def _root_dag_upstream(spec: Mapping[str, Any]) -> dict[str, list[str]]:
    tasks = ((spec.get("root") or {}).get("dag") or {}).get("tasks") or {}
    return {str(name): [str(u) for u in task.get("dependentTasks") or []] for name, task in tasks.items()}


def task_rows(job: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The job's top-level tasks (each with its nested ones as `children`, depth first) and its root
    task (the one named after the pipeline, with no parent), from `jobDetail.taskDetails`."""
    details = ((job.get("jobDetail") or {}).get("taskDetails")) or []
    rows = [task_row(d) for d in details]
    by_id = {row["id"]: row for row in rows}
    root = next((row for row in rows if not row["parent"] or row["parent"] not in by_id), None)
    top: list[dict[str, Any]] = []
    for row in rows:
        if row is root:
            continue
        holder = by_id.get(row["parent"])
        if holder is None or holder is root:
            top.append(row)
        else:
            holder["children"].append(row)
    return top, root


def flat(rows: Sequence[dict[str, Any]], depth: int = 0) -> list[dict[str, Any]]:
    """The task table's rows: each task, then the ones it holds, indented one step further."""
    out: list[dict[str, Any]] = []
    for row in rows:
        out.append({**row, "depth": depth})
        out += flat(row["children"], depth + 1)
    return out


def pipeline_view(job: Mapping[str, Any]) -> dict[str, Any]:
    """A PipelineJob (its REST JSON) as the pipeline page and `/api/pipelines/ID` show it."""
    spec = job.get("pipelineSpec") or {}
    upstream = _root_dag_upstream(spec)
    top, root = task_rows(job)
    seen = {row["name"]: row for row in top}
    for name in seen:  # a task the spec does not list (it should) still shows, at level 0
        upstream.setdefault(name, [])
    levels = [
        [
            {
                "name": name,
                "state": seen[name]["state"] if name in seen else "PENDING",
                "upstream": upstream.get(name, []),
                "customJob": seen[name]["customJob"] if name in seen else None,
            }
            for name in names
        ]
        for names in dependency_levels(upstream)
    ]
    name = str(job.get("name", ""))
    error = job.get("error") or {}
    return {
        "name": name,
        "id": name.rsplit("/", 1)[-1],
        "displayName": str(job.get("displayName") or name.rsplit("/", 1)[-1]),
        "pipelineName": str(spec.get("pipelineInfo", {}).get("name", "")),
        "state": short_state(job.get("state")),
        "done": short_state(job.get("state")) in ("SUCCEEDED", "FAILED", "CANCELLED", "PAUSED"),
        "created": str(job.get("createTime") or ""),
        "started": str(job.get("startTime") or ""),
        "ended": str(job.get("endTime") or ""),
        "error": str(error.get("message", "")) if isinstance(error, dict) else "",
        "parameters": [
            {"name": k, "value": _parameter_text(v)}
            for k, v in sorted(((job.get("runtimeConfig") or {}).get("parameterValues") or {}).items())
        ],
        "root": str(job.get("runtimeConfig", {}).get("gcsOutputDirectory", "")),
        "rootTask": root["id"] if root else "",
        "levels": levels,
        "tasks": flat(top),
    }


# --- reading, through PipelineService ---------------------------------------------------------------
def as_json(message: Any) -> dict[str, Any]:
    """A proto-plus message as its REST JSON (camelCase names, enum names)."""
    text = type(message).to_json(message, use_integers_for_enums=False, indent=None)
    data: dict[str, Any] = json.loads(text)
    return data


def list_pipeline_jobs(backend: VertexBackend, limit: int) -> list[dict[str, Any]]:
    """The target's PipelineJobs, newest first: only the list's fields (`read_mask`; without one Vertex sends
    each job's whole PipelineSpec and task details)."""
    request = {"parent": backend.target.parent, "page_size": limit, "read_mask": {"paths": LISTED_FIELDS}}
    pager = backend._call(
        f"listing {COLLECTION}",
        lambda: backend.clients.pipelines.list_pipeline_jobs(request=request, timeout=CALL_TIMEOUT_S),
    )
    from google.protobuf.json_format import ParseError

    found = []
    try:
        for _, job in zip(range(limit), pager, strict=False):  # later pages are read while iterating
            found.append(as_json(job))
    except ParseError as exc:  # a job outside the SDK's proto (an emulator folder older than its checks)
        raise Unavailable(f"listing {COLLECTION}: an answer could not be read: {exc}") from None
    return found


def get_pipeline_job(backends: Sequence[VertexBackend], ident: str) -> dict[str, Any]:
    """The PipelineJob `ident` of the first of `backends`' projects that has one; NotFound if none does."""
    from google.protobuf.json_format import ParseError

    from vertexdist.backends.errors import ApiCallError

    if not PIPELINE_ID.fullmatch(ident):
        raise NotFound("no such pipeline")
    for backend in backends:
        name = f"{backend.target.parent}/{COLLECTION}/{ident}"
        try:
            job = backend._call(
                f"reading {name}",
                lambda: backend.clients.pipelines.get_pipeline_job(name=name, timeout=CALL_TIMEOUT_S),  # noqa: B023
            )
        except ApiCallError as exc:
            if exc.status == 404:
                continue
            raise
        except ParseError as exc:
            raise Unavailable(f"{name} cannot be read: {exc}") from None
        return as_json(job)
    raise NotFound(f"no pipeline {ident}")
