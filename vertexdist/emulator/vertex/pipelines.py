"""PipelineService's PipelineJob methods (https://cloud.google.com/vertex-ai/docs/reference/rest/v1/
projects.locations.pipelineJobs): create (with `pipelineJobId`), get, list (`filter`, `readMask`, paging),
cancel, delete and batchCancel/batchDelete (long-running operations).

A created job is PIPELINE_STATE_PENDING, then RUNNING while the runner (`emulator.pipeline_runner`) walks
its PipelineSpec in a thread of its own, then SUCCEEDED, FAILED or CANCELLED (through CANCELLING).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

from vertexdist.emulator.paging import list_page
from vertexdist.emulator.pipeline_runner.run import PipelineRun, Workspace
from vertexdist.emulator.store import JobStore, Resource, is_terminal, new_id
from vertexdist.emulator.vertex.jobs import ApiError, EmulatorService, parse_parent
from vertexdist.emulator.vertex.operations import Operations
from vertexdist.wire.proto_json import encode_enums, now_rfc3339

COLLECTION = "pipelineJobs"
_PARENT = r"(v1|v1beta1)/(projects/[^/]+/locations/[^/]+)"
_ONE = re.compile(rf"^/{_PARENT}/pipelineJobs/([^/:]+)(:cancel)?$")
_ALL = re.compile(rf"^/{_PARENT}/pipelineJobs(:batchCancel|:batchDelete)?$")
# Vertex's own rule for pipelineJobId: lower case letters, digits and hyphens, 128 at most.
_JOB_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,127}$")
ReadBody = Callable[[], dict[str, Any]]


def masked(resource: Resource, read_mask: str) -> Resource:
    """Only the fields a `readMask` names (dotted paths, comma-separated); all of them without one (pure)."""
    if not read_mask:
        return resource
    out: Resource = {}
    for path in (p.strip() for p in read_mask.split(",") if p.strip()):
        parts = [_camel(p) for p in path.split(".")]
        source: Any = resource
        for part in parts:
            source = source.get(part) if isinstance(source, dict) else None
        if source is None:
            continue
        target = out
        for part in parts[:-1]:
            target = target.setdefault(part, {})
        target[parts[-1]] = source
    return out


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def _public(resource: Resource, as_int: bool) -> Resource:
    return encode_enums({k: v for k, v in resource.items() if not k.startswith("_")}, as_int=as_int)


class PipelineJobs:
    """The routes and the runs behind them."""

    def __init__(
        self, store: JobStore, service: EmulatorService, operations: Operations, workspace: Workspace
    ) -> None:
        self.store = store
        self.service = service
        self.operations = operations
        self.workspace = workspace
        self._runs: dict[str, PipelineRun] = {}
        self._threads: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()

    def answer(self, verb: str, path: str, query: dict[str, str], read_body: ReadBody) -> Resource | None:
        as_int = "enum-encoding=int" in query.get("$alt", "")
        one = _ONE.match(path)
        if one:
            version, parent, ident, cancel = one.groups()
            name = f"{parent}/{COLLECTION}/{ident}"
            if verb == "GET" and not cancel:
                return _public(self.get(name), as_int)
            if verb == "POST" and cancel:
                read_body()
                self.cancel(name)
                return {}
            if verb == "DELETE" and not cancel:
                return self.operations.run(parent, version, lambda: self.delete(name))
            return None
        every = _ALL.match(path)
        if every:
            version, parent, batch = every.groups()
            if verb == "POST" and batch is None:
                return _public(self.create(parent, query.get("pipelineJobId", ""), read_body()), as_int)
            if verb == "GET" and batch is None:
                return list_page(
                    COLLECTION,
                    query,
                    lambda f, size, token: self.service.list(parent, COLLECTION, f, size, token),
                    lambda r: masked(_public(r, as_int), query.get("readMask", "")),
                )
            if verb == "POST" and batch:
                names = read_body().get("names") or []
                if not isinstance(names, list) or not names:
                    raise ApiError.invalid("names: give the PipelineJobs' resource names")
                work = self.cancel if batch == ":batchCancel" else self.delete
                for name in names:  # every name is checked before any is changed
                    self.get(str(name))

                def every_one() -> None:
                    for name in names:
                        work(str(name))

                return self.operations.run(parent, version, every_one)
        return None

    # --- methods ------------------------------------------------------------------------------------
    def create(self, parent: str, job_id: str, body: Resource) -> Resource:
        parse_parent(parent)
        spec = body.get("pipelineSpec")
        if not isinstance(spec, dict) or not isinstance(spec.get("root"), dict):
            raise ApiError.invalid(
                "pipelineJob.pipelineSpec is required: a compiled PipelineSpec with a root DAG"
            )
        runtime = body.get("runtimeConfig") or {}
        root = str(runtime.get("gcsOutputDirectory") or spec.get("defaultPipelineRoot") or "")
        if not root.startswith("gs://"):
            raise ApiError.invalid(
                "pipelineJob.runtimeConfig.gcsOutputDirectory must be a gs:// folder (the pipeline root);"
                f" got {root!r}"
            )
        if job_id and not _JOB_ID.match(job_id):
            raise ApiError.invalid(
                f"pipelineJobId {job_id!r} must be lower case letters, digits and hyphens (at most 128)"
            )
        ident = job_id or f"{spec.get('pipelineInfo', {}).get('name', 'pipeline')}-{new_id()[:14]}"
        name = f"{parent}/{COLLECTION}/{ident}"
        if self.store.get(name) is not None:
            raise ApiError(409, "ALREADY_EXISTS", f'The PipelineJob "{name}" already exists.')
        stamp = now_rfc3339()
        job: Resource = {
            **{k: v for k, v in body.items() if k not in ("name", "state", "jobDetail", "error")},
            "name": name,
            "displayName": body.get("displayName") or ident,
            "state": "PIPELINE_STATE_PENDING",
            "createTime": stamp,
            "updateTime": stamp,
            "runtimeConfig": {**runtime, "gcsOutputDirectory": root},
            "labels": body.get("labels") or {},
            "jobDetail": {"taskDetails": []},
        }
        created = self.store.insert(job)
        run = PipelineRun(self.store, name, self.workspace)
        run.record_start()
        created = self.store.get(name) or created
        thread = threading.Thread(target=run.run, name=f"pipeline-{ident}", daemon=True)
        with self._lock:
            self._runs[name] = run
            self._threads[name] = thread
        thread.start()
        return created

    def get(self, name: str) -> Resource:
        found = self.service.get(name)  # long-polls unfinished jobs as Gets of CustomJobs do
        return found

    def cancel(self, name: str) -> None:
        found = self.store.get(name)
        if found is None:
            raise ApiError.not_found(name)
        if is_terminal(found):
            raise ApiError(
                400, "FAILED_PRECONDITION", f"Cannot cancel {name}: it is already in state {found['state']}."
            )
        self.store.update(name, lambda j: j.update(state="PIPELINE_STATE_CANCELLING"))
        with self._lock:
            run = self._runs.get(name)
        if run is not None:
            run.cancel()

    def delete(self, name: str) -> None:
        found = self.store.get(name)
        if found is None:
            raise ApiError.not_found(name)
        if not is_terminal(found):
            state = str(found.get("state", "")).split("_STATE_")[-1]
            raise ApiError(
                400,
                "FAILED_PRECONDITION",
                f'The PipelineJob "{name}" is in state "{state}", and cannot be deleted.'
                " Please cancel it or wait for its completion before trying deleting it again.",
            )
        self.store.delete(name)

    def close(self, grace_s: float = 15.0) -> None:
        """Cancel every unfinished run and wait for its tasks to stop."""
        with self._lock:
            runs = list(self._runs.items())
            threads = dict(self._threads)
        for name, run in runs:
            found = self.store.get(name)
            if found is not None and not is_terminal(found):
                run.cancel()
        for thread in threads.values():
            thread.join(grace_s)
