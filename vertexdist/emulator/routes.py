"""The emulator's routes beyond Create/Get/List/Cancel of jobs, registered in one table.

Delete of CustomJobs and TrainingPipelines (long-running operations), ModelService (`vertex.models_api`), and
Get of an operation (`/v1/{parent}/operations/ID`, also under a resource, as the REST clients' operations
client asks). `http_api` asks `EmulatorRoutes.answer` first; None means "not mine".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vertexdist.emulator.vertex.deletion import delete_job
from vertexdist.emulator.vertex.jobs import ApiError, EmulatorService
from vertexdist.emulator.vertex.models import ModelRegistry
from vertexdist.emulator.vertex.models_api import ModelsApi
from vertexdist.emulator.vertex.operations import Operations
from vertexdist.emulator.vertex.persistent_resources import PersistentResourceRoutes, PersistentResources
from vertexdist.emulator.vertex.pipelines import PipelineJobs

_PARENT = r"(v1|v1beta1)/(projects/[^/]+/locations/[^/]+)"
# Job collections whose Delete is a long-running operation; a new one (tuning jobs) is one more name here
# and in `deletion`'s kinds.
DELETABLE_JOBS = ("customJobs", "trainingPipelines", "hyperparameterTuningJobs")
ReadBody = Callable[[], dict[str, Any]]


@dataclass(frozen=True)
class Call:
    version: str
    parent: str
    ident: str
    query: dict[str, str]
    read_body: ReadBody


Handler = Callable[["EmulatorRoutes", Call], dict[str, Any]]


class EmulatorRoutes:
    """The table of (verb, path pattern, handler) and the state the handlers work on."""

    def __init__(self, service: EmulatorService, models: ModelRegistry, operations: Operations) -> None:
        self.service = service
        self.models = models
        self.operations = operations
        self.models_api = ModelsApi(service.store, models, operations)
        resources = PersistentResources(service.store, service)
        self.persistent_resources = PersistentResourceRoutes(resources)
        service.check_placement = resources.check_job
        self.pipelines: PipelineJobs | None = None  # PipelineService's pipelineJobs (vertex.pipelines)

    def answer(
        self, verb: str, path: str, query: dict[str, str], read_body: ReadBody
    ) -> dict[str, Any] | None:
        answered = self.persistent_resources.answer(verb, path, query, read_body)
        if answered is None:
            answered = self.models_api.answer(verb, path, query, read_body)
        if answered is None and self.pipelines is not None:
            answered = self.pipelines.answer(verb, path, query, read_body)
        if answered is not None:
            return answered
        for route_verb, pattern, handler in _ROUTES:
            match = pattern.match(path)
            if route_verb == verb and match:
                version, parent, ident = match.group(1), match.group(2), match.group(3)
                return handler(self, Call(version, parent, ident, query, read_body))
        return None

    # --- handlers -------------------------------------------------------------------------------------
    def delete_job(self, call: Call) -> dict[str, Any]:
        name = f"{call.parent}/{call.ident}"  # ident is COLLECTION/ID here
        return self.operations.run(call.parent, call.version, lambda: delete_job(self.service.store, name))

    def get_operation(self, call: Call) -> dict[str, Any]:
        name = f"{call.parent}/operations/{call.ident}"
        found = self.operations.get(name)
        if found is None:
            raise ApiError.not_found(name)
        return found


_JOB = rf"^/{_PARENT}/((?:{'|'.join(DELETABLE_JOBS)})/[^/:]+)$"
_OPERATION = rf"^/{_PARENT}(?:/[^/]+/[^/:]+)*/operations/([^/:]+)"
_ROUTES: tuple[tuple[str, re.Pattern[str], Handler], ...] = (
    (
        "DELETE",
        re.compile(rf"^/{_PARENT}/((?:{'|'.join(DELETABLE_JOBS)})/[^/:]+)$"),
        EmulatorRoutes.delete_job,
    ),
    ("GET", re.compile(_OPERATION + "$"), EmulatorRoutes.get_operation),
    (
        "POST",
        re.compile(rf"^/{_PARENT}(?:/[^/]+/[^/:]+)*/operations/([^/:]+):wait$"),
        EmulatorRoutes.get_operation,
    ),
)
