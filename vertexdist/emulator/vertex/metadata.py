"""Vertex ML Metadata's REST routes (https://cloud.google.com/vertex-ai/docs/reference/rest/v1/
projects.locations.metadataStores), as google-cloud-aiplatform's `MetadataServiceClient` REST transport
calls them: metadataStores (create is a long-running operation), contexts, artifacts, executions and
metadataSchemas (create, get, list with filters, patch, delete); `:addContextArtifactsAndExecutions`,
`:addContextChildren`, `:removeContextChildren`, `:addExecutionEvents`, `:queryContextLineageSubgraph`,
`:queryArtifactLineageSubgraph` and `:queryExecutionInputsAndOutputs`.

Membership is kept on the members: an artifact's or execution's contexts in its private `_contexts`, a
context's parents in its public `parentContexts`, an execution's events apart from it, appended to a file of
their own (`ExperimentStore.events`, as TensorBoard points are: an append costs what it adds). List
filters take `in_context("CONTEXT")` besides the fields `experiment_store` reads.
"""

from __future__ import annotations

from typing import Any

from vertexdist.emulator.vertex.experiment_store import (
    Collection,
    ExperimentStore,
    Resource,
    Resources,
    visible,
)
from vertexdist.emulator.vertex.jobs import ApiError
from vertexdist.wire.proto_json import now_rfc3339

_TYPE = "type.googleapis.com/google.cloud.aiplatform.v1.MetadataStore"
COLLECTIONS = {
    "metadataStores": Collection(
        "metadataStores", "metadataStoreId", "metadataStores", "CreateMetadataStoreOperationMetadata", _TYPE
    ),
    "contexts": Collection("contexts", "contextId", "contexts"),
    "artifacts": Collection("artifacts", "artifactId", "artifacts"),
    "executions": Collection("executions", "executionId", "executions"),
    "metadataSchemas": Collection("metadataSchemas", "metadataSchemaId", "metadataSchemas"),
}
_MAX_HOPS = 100


def _names(body: dict[str, Any], field: str) -> list[str]:
    value = body.get(field, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ApiError.invalid(f"{field}: expected a list of resource names")
    return list(value)


def _in_context(resource: Resource, context: str) -> bool:
    return context in resource.get("_contexts", [])


class MetadataApi:
    def __init__(self, store: ExperimentStore) -> None:
        self.store = store
        self.resources = Resources(store, {"in_context": _in_context})

    def answer(
        self, verb: str, version: str, segments: list[str], custom: str, query: dict[str, str], body: Any
    ) -> dict[str, Any] | None:
        path = "/".join(segments)
        if len(segments) % 2 == 1:  # a collection: create, list (and :purge, not served)
            kind = COLLECTIONS.get(segments[-1])
            parent = "/".join(segments[:-1])
            if kind is None or custom:
                return None
            if verb == "POST":
                self._parent_exists(parent)
                return self.resources.create(parent, kind, body(), query, version)
            if verb == "GET":
                return self.resources.list(parent, kind.noun, query, kind.listed)
            return None
        noun = segments[-2]
        if noun not in COLLECTIONS:
            return None
        if custom:
            return self._custom(verb, path, noun, custom, query, body)
        if verb == "GET":
            return visible(self.resources.need(path))
        if verb == "PATCH":
            parent, ident = path.rsplit(f"/{noun}/", 1)
            kind = COLLECTIONS[noun]
            payload = body()
            return self.resources.patch(
                path,
                payload,
                query,
                lambda: self.resources.create(parent, kind, payload, {kind.id_param: ident}, version),
            )
        if verb == "DELETE":
            operation = self.resources.delete(path, version)
            if noun == "contexts":
                self._forget_context(path)
            return operation
        return None

    def _parent_exists(self, parent: str) -> None:
        if "/metadataStores/" in parent:
            self.resources.need(parent)

    def _forget_context(self, context: str) -> None:
        for name in self.store.names():
            found = self.store.get(name)
            if found is None:
                continue
            if context in found.get("parentContexts", []) or context in found.get("_contexts", []):

                def drop(resource: Resource) -> None:
                    for key in ("parentContexts", "_contexts"):
                        if context in resource.get(key, []):
                            resource[key] = [c for c in resource[key] if c != context]

                self.store.update(name, drop)

    def _join(self, member: str, key: str, context: str) -> None:
        self.resources.need(member)

        def add(resource: Resource) -> None:
            joined = resource.setdefault(key, [])
            if context not in joined:
                joined.append(context)

        self.store.update(member, add)

    def _custom(
        self, verb: str, name: str, noun: str, custom: str, query: dict[str, str], body: Any
    ) -> dict[str, Any] | None:
        method = (verb, noun, custom)
        if method == ("POST", "contexts", "addContextArtifactsAndExecutions"):
            payload = body()
            self.resources.need(name)
            for member in _names(payload, "artifacts") + _names(payload, "executions"):
                self._join(member, "_contexts", name)
            return {}
        if method == ("POST", "contexts", "addContextChildren"):
            payload = body()
            self.resources.need(name)
            for child in _names(payload, "childContexts"):
                if child == name:
                    raise ApiError.invalid(f"a context cannot be its own child: {name}")
                self._join(child, "parentContexts", name)
            return {}
        if method == ("POST", "contexts", "removeContextChildren"):
            payload = body()
            for child in _names(payload, "childContexts"):
                self.resources.need(child)
                self.store.update(
                    child,
                    lambda r: r.update(parentContexts=[c for c in r.get("parentContexts", []) if c != name]),
                )
            return {}
        if method == ("POST", "executions", "addExecutionEvents"):
            return self._add_events(name, body())
        if method == ("GET", "contexts", "queryContextLineageSubgraph"):
            self.resources.need(name)
            members = [n for n in self.store.names() if _in_context(self.store.get(n) or {}, name)]
            return self._subgraph(set(members))
        if method == ("GET", "artifacts", "queryArtifactLineageSubgraph"):
            self.resources.need(name)
            try:
                hops = int(query.get("maxHops") or _MAX_HOPS)
            except ValueError:
                raise ApiError.invalid(f"maxHops {query['maxHops']!r} is not a number") from None
            return self._subgraph(self._reach(name, hops if hops > 0 else _MAX_HOPS))
        if method == ("GET", "executions", "queryExecutionInputsAndOutputs"):
            self.resources.need(name)
            linked = {e["artifact"] for e in self._events() if e.get("execution") == name}
            return self._subgraph(linked | {name}, executions=False)
        return None

    def _add_events(self, execution: str, payload: dict[str, Any]) -> dict[str, Any]:
        self.resources.need(execution)
        events = payload.get("events", [])
        if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
            raise ApiError.invalid("events: expected a list of Event objects")
        added = []
        for event in events:
            artifact = event.get("artifact")
            if not isinstance(artifact, str):
                raise ApiError.invalid("events[].artifact: expected an artifact's resource name")
            self.resources.need(artifact)
            added.append({**event, "execution": execution, "eventTime": now_rfc3339()})
        self.store.events.append(execution, added)  # one append to its events' file, not a rewrite
        return {}

    def _events(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for name in self.store.names():
            if "/executions/" in name:
                out.extend(self.store.events.all(name))
        return out

    def _reach(self, start: str, hops: int) -> set[str]:
        """The artifacts and executions within `hops` events of `start`."""
        events = self._events()
        seen, frontier = {start}, {start}
        for _ in range(hops):
            step = {
                other
                for e in events
                for one, other in ((e["artifact"], e["execution"]), (e["execution"], e["artifact"]))
                if one in frontier and other not in seen
            }
            if not step:
                break
            seen |= step
            frontier = step
        return seen

    def _subgraph(self, names: set[str], executions: bool = True) -> dict[str, Any]:
        found = [r for r in (self.store.get(n) for n in sorted(names)) if r is not None]
        events = [e for e in self._events() if e["artifact"] in names and e["execution"] in names]
        out: dict[str, Any] = {
            "artifacts": [visible(r) for r in found if "/artifacts/" in r["name"]],
            "events": events,
        }
        if executions:
            out["executions"] = [visible(r) for r in found if "/executions/" in r["name"]]
        return out
