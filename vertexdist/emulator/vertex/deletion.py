"""DeleteCustomJob and DeleteTrainingPipeline: what Vertex deletes and what it refuses to.

A job or pipeline that has not ended is refused with FAILED_PRECONDITION and Vertex's own words ("The
CustomJob "NAME" is in state "RUNNING", and cannot be deleted. Please cancel it or wait for its completion
before trying deleting it again."). Deleting a pipeline deletes its backing CustomJob too.
"""

from __future__ import annotations

from vertexdist.emulator.store import JobStore, Resource, is_terminal
from vertexdist.emulator.vertex.jobs import ApiError

_KINDS = {
    "customJobs": "CustomJob",
    "trainingPipelines": "TrainingPipeline",
    "hyperparameterTuningJobs": "HyperparameterTuningJob",
}


def refusal(resource: Resource) -> ApiError | None:
    """Why `resource` cannot be deleted now (pure), or None when it can."""
    if is_terminal(resource):
        return None
    kind = _KINDS.get(resource["name"].split("/")[-2], "resource")
    state = str(resource.get("state", "")).split("_STATE_")[-1]
    return ApiError(
        400,
        "FAILED_PRECONDITION",
        f'The {kind} "{resource["name"]}" is in state "{state}", and cannot be deleted.'
        " Please cancel it or wait for its completion before trying deleting it again.",
    )


def delete_job(store: JobStore, name: str) -> None:
    """Delete a CustomJob or TrainingPipeline (and a pipeline's backing job); ApiError when refused."""
    found = store.get(name)
    if found is None:
        raise ApiError.not_found(name)
    refused = refusal(found)
    if refused is not None:
        raise refused
    backing = (found.get("trainingTaskMetadata") or {}).get("backingCustomJob")
    store.delete(name)
    if backing:
        store.delete(str(backing))
