"""`projects.locations.persistentResources` (create, get, list, delete): Vertex's reserved clusters.

https://cloud.google.com/vertex-ai/docs/reference/rest/v1/projects.locations.persistentResources:
`POST /v1/{parent}/persistentResources?persistentResourceId=ID` with a PersistentResource body answers a
long-running operation (metadata `CreatePersistentResourceOperationMetadata`, response the resource);
`GET /v1/{name}`, `GET /v1/{parent}/persistentResources` (`persistentResources`, `nextPageToken`);
`DELETE /v1/{name}` answers an operation whose response is Empty. States are
`google.cloud.aiplatform.v1.PersistentResource.State`. The emulator has no machines to provision, so a
create's operation is done when it answers and the resource is RUNNING; a job that names it runs at once.
Its errors are Vertex's codes: a bad or taken id, missing resource pools, an unknown resource.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vertexdist.emulator.paging import list_page
from vertexdist.emulator.store import JobStore, Resource
from vertexdist.emulator.vertex.jobs import ApiError, EmulatorService, parse_parent
from vertexdist.emulator.vertex.operations import finished_operation
from vertexdist.emulator.vertex.validation import location_problems
from vertexdist.spec.rules import persistent_resource_id_problem
from vertexdist.wire.enums import ACCELERATOR_TYPES, enum_name, enum_number
from vertexdist.wire.placement import placement_problems, with_used
from vertexdist.wire.proto_json import now_rfc3339
from vertexdist.wire.shapes import INT64_MAX

COLLECTION = "persistentResources"
RESOURCE_TYPE = "PersistentResource"
# google.cloud.aiplatform.v1.PersistentResource.State
STATES = {
    "STATE_UNSPECIFIED": 0,
    "PROVISIONING": 1,
    "RUNNING": 3,
    "STOPPING": 4,
    "ERROR": 5,
    "REBOOTING": 6,
    "UPDATING": 7,
}
# Fields a client may set on create; the rest (state, times, usedReplicaCount, resourceRuntime) are output.
_INPUT_FIELDS = (
    "displayName",
    "labels",
    "network",
    "encryptionSpec",
    "resourceRuntimeSpec",
    "reservedIpRanges",
    "pscInterfaceConfig",
)
_PATH = re.compile(rf"^/(v1|v1beta1)/(projects/[^/]+/locations/[^/]+)/{COLLECTION}(?:/([^/:]+))?$")
_POOL_ID = re.compile(r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$")


def _whole(value: Any, field: str) -> int:
    """An int64 field as proto-JSON sends it (a number or a decimal string)."""
    if isinstance(value, bool):
        raise ApiError.invalid(f"{field}: expected an integer, got {value!r}")
    try:
        number = int(value) if isinstance(value, str) else value
    except ValueError:
        raise ApiError.invalid(f"{field}: expected an integer, got {value!r}") from None
    if not isinstance(number, int):
        raise ApiError.invalid(f"{field}: expected an integer, got {value!r}")
    if not -INT64_MAX - 1 <= number <= INT64_MAX:  # the SDK could not read the resource back
        raise ApiError.invalid(
            f"{field}: Invalid value (TYPE_INT64), {value!r}: out of range, at most {INT64_MAX}"
        )
    return number


def resource_pools(body: Resource) -> list[Resource]:
    """The request's resource pools, checked and normalised (enum names, ints, an id for each)."""
    pools = body.get("resourcePools")
    if not isinstance(pools, list) or not pools:
        raise ApiError.invalid("persistentResource.resourcePools: at least one resource pool is required")
    out: list[Resource] = []
    seen: set[str] = set()
    for index, pool in enumerate(pools):
        where = f"persistentResource.resourcePools[{index}]"
        if not isinstance(pool, dict):
            raise ApiError.invalid(f"{where}: expected an object")
        machine = pool.get("machineSpec")
        if not isinstance(machine, dict) or not machine.get("machineType"):
            raise ApiError.invalid(f"{where}.machineSpec.machineType is required")
        machine = dict(machine)
        if "acceleratorType" in machine:
            try:
                machine["acceleratorType"] = enum_name(
                    ACCELERATOR_TYPES, machine["acceleratorType"], f"{where}.machineSpec.acceleratorType"
                )
            except ValueError as exc:
                raise ApiError.invalid(str(exc)) from None
        if "acceleratorCount" in machine:
            machine["acceleratorCount"] = _whole(
                machine["acceleratorCount"], f"{where}.machineSpec.acceleratorCount"
            )
        replicas = _whole(pool.get("replicaCount", 0), f"{where}.replicaCount")
        autoscaling = pool.get("autoscalingSpec")
        if replicas < 1 and not autoscaling:
            raise ApiError.invalid(f"{where}.replicaCount must be at least 1 (got {replicas})")
        ident = str(pool.get("id") or f"{machine['machineType']}-{index}".lower())
        if not _POOL_ID.match(ident):
            raise ApiError.invalid(
                f"{where}.id {ident!r} must be 1-63 of a-z, 0-9 and '-', starting with a letter"
            )
        if ident in seen:
            raise ApiError.invalid(f"{where}.id {ident!r} is used by another resource pool")
        seen.add(ident)
        normal: Resource = {"id": ident, "machineSpec": machine, "replicaCount": str(replicas)}
        for key in ("diskSpec", "autoscalingSpec"):
            if key in pool:
                normal[key] = pool[key]
        normal["usedReplicaCount"] = "0"
        out.append(normal)
    return out


def new_resource(parent: str, ident: str, body: Resource) -> Resource:
    """The stored resource for a create request: RUNNING at once (nothing to provision here)."""
    stamp = now_rfc3339()
    resource: Resource = {"name": f"{parent}/{COLLECTION}/{ident}"}
    resource.update({key: body[key] for key in _INPUT_FIELDS if key in body})
    resource["resourcePools"] = resource_pools(body)
    resource.update(state="RUNNING", createTime=stamp, startTime=stamp, updateTime=stamp)
    return resource


def public(resource: Resource, as_int: bool) -> Resource:
    """What a client sees: no private keys, enums as numbers when it asked for them."""
    out = {k: v for k, v in resource.items() if not k.startswith("_")}
    if not as_int:
        return out
    out["state"] = enum_number(STATES, str(out.get("state", "STATE_UNSPECIFIED")))
    pools = []
    for pool in out.get("resourcePools") or []:
        machine = pool.get("machineSpec") or {}
        if isinstance(machine.get("acceleratorType"), str):
            accelerator = enum_number(ACCELERATOR_TYPES, machine["acceleratorType"])
            pool = {**pool, "machineSpec": {**machine, "acceleratorType": accelerator}}
        pools.append(pool)
    out["resourcePools"] = pools
    return out


class PersistentResources:
    """The handlers, over the job store (resources survive an emulator restart, still RUNNING)."""

    def __init__(self, store: JobStore, service: EmulatorService) -> None:
        self._store = store
        self._service = service

    def create(self, parent: str, version: str, query: dict[str, str], body: Resource) -> Resource:
        _project, location = parse_parent(parent)
        problems = location_problems(location)
        if problems:
            raise ApiError.invalid(problems[0])
        ident = query.get("persistentResourceId", "")
        if not ident:
            raise ApiError.invalid("persistentResourceId is required (a query parameter of the create)")
        problem = persistent_resource_id_problem(ident)
        if problem is not None:
            raise ApiError.invalid(f"persistentResourceId: {problem[0]}; {problem[1]}")
        name = f"{parent}/{COLLECTION}/{ident}"
        if self._store.get(name) is not None:
            raise ApiError(409, "ALREADY_EXISTS", f'The PersistentResource "{name}" already exists.')
        created = self._store.insert(new_resource(parent, ident, body))
        operation = finished_operation(parent, version, "CreatePersistentResourceOperationMetadata")
        operation["response"] = {
            "@type": f"type.googleapis.com/google.cloud.aiplatform.{version}.{RESOURCE_TYPE}",
            **public(created, as_int=False),
        }
        return self._store.insert(operation)

    def get(self, name: str) -> Resource:
        """The resource, each pool's usedReplicaCount the machines its jobs hold now."""
        found = self._store.get(name)
        if found is None:
            raise ApiError.not_found(name)
        return self.with_use(found)

    def with_use(self, resource: Resource) -> Resource:
        return with_used(resource, self._service.replicas.in_use(str(resource["name"])))

    def list(self, parent: str, query: dict[str, str], render: Callable[[Resource], Resource]) -> Resource:
        return list_page(
            COLLECTION,
            query,
            lambda filter_, size, token: self._service.list(parent, COLLECTION, filter_, size, token),
            render,
        )

    def check_job(self, parent: str, spec: Resource, where: str) -> None:
        """Refuse a job spec naming a persistent resource that is missing, not RUNNING, or too small."""
        ident = spec.get("persistentResourceId")
        if not ident:
            return
        name = f"{parent}/{COLLECTION}/{ident}"
        found = self._store.get(name)
        if found is None:
            raise ApiError.invalid(
                f"{where}.persistentResourceId: the PersistentResource {name!r} does not exist; "
                "create it first (vertexdist pool create) or leave persistentResourceId out"
            )
        if found.get("state") != "RUNNING":
            raise ApiError(
                400,
                "FAILED_PRECONDITION",
                f"{where}.persistentResourceId: the PersistentResource {name!r} is {found.get('state')}, "
                "not RUNNING",
            )
        problems = placement_problems(spec, found)
        if problems:
            raise ApiError.invalid(f"{where}: " + "; ".join(problems))

    def delete(self, parent: str, version: str, name: str) -> Resource:
        if self._store.delete(name) is None:
            raise ApiError.not_found(name)
        return self._store.insert(finished_operation(parent, version))


ReadBody = Callable[[], Resource]


@dataclass
class PersistentResourceRoutes:
    """The collection's REST routes; `EmulatorRoutes.answer` asks `answer` first (None: not mine)."""

    resources: PersistentResources

    def answer(self, verb: str, path: str, query: dict[str, str], read_body: ReadBody) -> Resource | None:
        match = _PATH.match(path)
        if match is None:
            return None
        version, parent, ident = match.groups()
        as_int = "enum-encoding=int" in query.get("$alt", "")
        name = f"{parent}/{COLLECTION}/{ident}"
        if verb == "POST" and ident is None:
            return self.resources.create(parent, version, query, read_body())
        if verb == "GET" and ident is None:
            return self.resources.list(
                parent, query, lambda resource: public(self.resources.with_use(resource), as_int)
            )
        if verb == "GET":
            return public(self.resources.get(name), as_int)
        if verb == "DELETE" and ident is not None:
            return self.resources.delete(parent, version, name)
        raise ApiError(405, "UNIMPLEMENTED", f"{verb} {path} is not a method the emulator serves")
