"""The store behind Vertex AI Experiments: the ML Metadata store's and TensorBoard's resources.

Their names nest (`.../metadataStores/default/contexts/ID`, `.../tensorboards/T/experiments/E/runs/R/
timeSeries/ID`), so two runs of one name under two experiments are two resources: each is a JSON file named
by the SHA-256 of its full name, under `<data_dir>/resources/experiments/`, written as the job store writes
its files (atomically, 0600). `Collection` is the create/get/list/patch/delete every collection shares;
fields starting with `_` (a context's members, an execution's events, a time series' points) stay private.
"""

from __future__ import annotations

import copy
import hashlib
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vertexdist.emulator.filters import Function, parse_expression
from vertexdist.emulator.store import JobStore, Resource, new_id
from vertexdist.emulator.vertex.jobs import ApiError
from vertexdist.emulator.vertex.operations import finished_operation
from vertexdist.emulator.vertex.series_points import SeriesPoints
from vertexdist.spec.names import MAX_DISPLAY_NAME_CHARS
from vertexdist.wire.proto_json import camel, now_rfc3339

_FOLDER = "experiments"
_NAME_FIELDS = {"name", "createTime", "updateTime"}


class ExperimentStore(JobStore):
    """A `JobStore` whose files are named by a hash of the whole name (names nest) and never go stale
    (none of these resources is a job that a restart interrupts). A time series' points are kept apart, in
    `points` (`series_points`): a write appends them, and no Get or list of resources copies them; an
    execution's events likewise, in `events`."""

    def __init__(self, data_dir: Path | None = None) -> None:
        folder = Path(data_dir) / "resources" / _FOLDER / "points" if data_dir else None
        self.points = SeriesPoints(folder)
        # An execution's metadata events, by its name: appended as they come, never in its resource.
        self.events = SeriesPoints(Path(data_dir) / "resources" / _FOLDER / "events" if data_dir else None)
        super().__init__(data_dir)

    def _path(self, name: str) -> Path:
        assert self._data_dir is not None
        digest = hashlib.sha256(name.encode()).hexdigest()
        return self._data_dir / "resources" / _FOLDER / f"{digest}.json"

    def _load(self) -> None:
        assert self._data_dir is not None
        folder = self._data_dir / "resources" / _FOLDER
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                resource = json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # a torn file from a crash mid-write is skipped, not fatal
            if "_points" in resource:  # a store written before the points were kept apart
                points = resource.pop("_points")
                if isinstance(points, list) and not self.points.count(resource["name"]):
                    self.points.replace(resource["name"], [p for p in points if isinstance(p, dict)])
                self._persist(resource)
            if "_events" in resource:  # a store written before an execution's events were kept apart
                events = resource.pop("_events")
                if isinstance(events, list) and not self.events.count(resource["name"]):
                    self.events.replace(resource["name"], [e for e in events if isinstance(e, dict)])
                self._persist(resource)
            self._resources[resource["name"]] = resource

    def children(self, parent: str, collection: str) -> list[Resource]:
        """The resources directly in `parent/collection/`, oldest first."""
        prefix = f"{parent}/{collection}/"
        with self._changed:  # only the direct children are copied, never what nests under them
            found = [
                copy.deepcopy(r)
                for n, r in self._resources.items()
                if n.startswith(prefix) and "/" not in n[len(prefix) :]
            ]
        return sorted(found, key=lambda r: (r.get("createTime", ""), r["name"]))

    def subtree(self, name: str) -> list[str]:
        return [n for n in self.names() if n.startswith(name + "/")]


def visible(resource: Resource) -> Resource:
    return {k: v for k, v in resource.items() if not k.startswith("_")}


def _field(resource: Resource, name: str) -> Any:
    """A field as list filters name it: snake_case (`schema_title`), `labels.KEY` or `metadata.KEY`."""
    head, _, rest = name.partition(".")
    if head in ("labels", "metadata") and rest:
        value = resource.get(head) or {}
        for part in rest.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return value
    if head == "parent_contexts" or head == "parentContexts":
        return resource.get("parentContexts", [])
    key = camel(name)
    if key not in _FILTER_FIELDS:
        raise ValueError(f"filter field {name!r} is not supported (use {', '.join(sorted(_FILTER_NAMES))})")
    return resource.get(key)


_FILTER_NAMES = (
    "display_name",
    "schema_title",
    "schema_version",
    "uri",
    "state",
    "is_default",
    "create_time",
    "update_time",
    "labels.KEY",
    "metadata.KEY",
    "parent_contexts",
)
_FILTER_FIELDS = {camel(n) for n in _FILTER_NAMES}


@dataclass(frozen=True)
class Collection:
    """One collection's shared methods: `noun` as it appears in names, `id_param` the create's id query
    parameter, `listed` the list answer's field, `operation` the message a long-running create answers."""

    noun: str
    id_param: str
    listed: str
    operation: str = ""
    type_name: str = ""
    on_create: Callable[[Resource], None] | None = None


MAX_PAGE_SIZE = 1000  # as Vertex's list calls: a larger pageSize is taken as this


def page(items: list[Resource], query: dict[str, str], listed: str) -> dict[str, Any]:
    try:
        size = int(query.get("pageSize") or 0) or 100
        start = int(query.get("pageToken") or 0)
    except ValueError:
        raise ApiError.invalid("pageSize and pageToken: expected numbers") from None
    if size < 0 or start < 0:
        raise ApiError.invalid("pageSize and pageToken: expected numbers of at least 0")
    size = min(size, MAX_PAGE_SIZE)
    out: dict[str, Any] = {listed: [visible(r) for r in items[start : start + size]]}
    if start + size < len(items):
        out["nextPageToken"] = str(start + size)
    return out


class Resources:
    """Create/get/list/patch/delete of nested resources in one `ExperimentStore`."""

    def __init__(self, store: ExperimentStore, functions: dict[str, Function] | None = None) -> None:
        self.store = store
        self.functions = functions or {}

    def need(self, name: str) -> Resource:
        found = self.store.get(name)
        if found is None:
            raise ApiError.not_found(name)
        return found

    def create(
        self, parent: str, kind: Collection, body: dict[str, Any], query: dict[str, str], version: str
    ) -> Resource:
        shown = body.get("displayName")
        if shown is not None and (not isinstance(shown, str) or len(shown) > MAX_DISPLAY_NAME_CHARS):
            what = f"{len(shown)} characters" if isinstance(shown, str) else f"a {type(shown).__name__}"
            limit = MAX_DISPLAY_NAME_CHARS
            raise ApiError.invalid(f"displayName: {what}; expected a string of at most {limit}")
        ident = query.get(kind.id_param) or body.get(kind.id_param) or new_id()
        if not isinstance(ident, str) or not ident or "/" in ident or len(ident) > 128:
            raise ApiError.invalid(f"{kind.id_param}: {ident!r} is not a valid id")
        name = f"{parent}/{kind.noun}/{ident}"
        if self.store.get(name) is not None:
            raise ApiError(409, "ALREADY_EXISTS", f'The resource "{name}" already exists.')
        stamp = now_rfc3339()
        resource = {k: v for k, v in body.items() if k not in _NAME_FIELDS}
        resource.update(name=name, createTime=stamp, updateTime=stamp, etag=secrets.token_hex(8))
        if kind.on_create is not None:
            kind.on_create(resource)
        created = self.store.insert(resource)
        if not kind.operation:
            return visible(created)
        operation = finished_operation(name, version, kind.operation)
        operation["response"] = {"@type": kind.type_name, **visible(created)}
        return operation

    def list(self, parent: str, noun: str, query: dict[str, str], listed: str) -> dict[str, Any]:
        try:
            keep = parse_expression(query.get("filter", ""), _field, self.functions)
        except ValueError as exc:
            raise ApiError.invalid(str(exc)) from None
        items = [r for r in self.store.children(parent, noun) if keep(r)]
        if query.get("orderBy", "").strip().lower().endswith("desc"):
            items.reverse()
        return page(items, query, listed)

    def patch(self, name: str, body: dict[str, Any], query: dict[str, str], create: Callable[[], Any]) -> Any:
        if self.store.get(name) is None:
            if query.get("allowMissing", "").lower() == "true":
                return create()
            raise ApiError.not_found(name)
        mask = [camel(p.strip()) for p in query.get("updateMask", "").split(",") if p.strip()]
        fields = mask or [k for k in body if k not in _NAME_FIELDS | {"etag"}]

        def change(resource: Resource) -> None:
            for key in fields:
                if key in _NAME_FIELDS:
                    raise ApiError.invalid(f"updateMask: {key} cannot be updated")
                if key in body:
                    resource[key] = body[key]
                else:
                    resource.pop(key, None)
            resource["etag"] = secrets.token_hex(8)

        return visible(self.store.update(name, change))

    def delete(self, name: str, version: str) -> Resource:
        """Delete a resource and everything under it: a long-running operation, finished now."""
        self.need(name)
        for child in [*self.store.subtree(name), name]:
            self.store.delete(child)
            if "/timeSeries/" in child:
                self.store.points.drop(child)
            if "/executions/" in child:
                self.store.events.drop(child)
        parent = "/".join(name.split("/")[:4])
        return finished_operation(parent, version)
