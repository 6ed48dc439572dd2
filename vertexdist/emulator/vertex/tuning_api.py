"""The REST routes of `projects.locations.hyperparameterTuningJobs` (create, get, list, cancel), which
`http_api` hands over for that collection; its delete is every job's (`routes`, a long-running operation).
Answers use Vertex's shape, enums as numbers when asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vertexdist.emulator.paging import list_page
from vertexdist.emulator.store import Resource
from vertexdist.emulator.vertex.jobs import EmulatorService
from vertexdist.emulator.vertex.tuning import COLLECTION, TuningService
from vertexdist.wire.study import encode_tuning_enums

COLLECTIONS = frozenset({COLLECTION})


def public(resource: Resource, as_int: bool) -> dict[str, Any]:
    visible = {k: v for k, v in resource.items() if not k.startswith("_")}
    return encode_tuning_enums(visible, as_int=as_int)


def call(
    tuning: TuningService,
    jobs: EmulatorService,
    method: str,
    parent: str,
    ident: str | None,
    body: Callable[[], dict[str, Any]],
    query: dict[str, str],
    as_int: bool,
) -> dict[str, Any]:
    name = f"{parent}/{COLLECTION}/{ident}"
    if method == "create":
        return public(tuning.create(parent, body()), as_int)
    if method == "get":
        return public(jobs.get(name), as_int)
    if method == "cancel":
        body()
        tuning.cancel(name)
        return {}
    return list_page(
        COLLECTION,
        query,
        lambda filter_, size, token: jobs.list(parent, COLLECTION, filter_, size, token),
        lambda resource: public(resource, as_int),
    )
