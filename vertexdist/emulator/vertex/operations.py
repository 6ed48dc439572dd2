"""Vertex's long-running operations, for the methods that return one (deletes, models:upload).

https://cloud.google.com/vertex-ai/docs/reference/rest/Shared.Types/ListOperationsResponse#Operation: a
delete answers `{name: "{parent}/operations/ID", metadata: {@type: ...DeleteOperationMetadata,
genericMetadata: {createTime, updateTime}}, done: true, response: {@type: google.protobuf.Empty}}`. The
emulator finishes every such operation before answering, so a client's `operation.result()` never polls;
`GET /v1/{operation}` still answers, for clients that poll anyway. Any collection's delete can use this;
an upload answers `response: {@type: ...UploadModelResponse, model, modelVersionId}` with
UploadModelOperationMetadata.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vertexdist.emulator.store import JobStore, Resource, new_id
from vertexdist.wire.proto_json import now_rfc3339

_TYPE_PREFIX = "type.googleapis.com/"
EMPTY_TYPE = _TYPE_PREFIX + "google.protobuf.Empty"


def metadata_type(version: str, message: str = "DeleteOperationMetadata") -> str:
    """The `@type` of an operation's metadata, in the API version the client called (v1, v1beta1)."""
    return f"{_TYPE_PREFIX}google.cloud.aiplatform.{version}.{message}"


def response_type(version: str, message: str) -> str:
    """The `@type` of an operation's response message of the API (e.g. UploadModelResponse)."""
    return metadata_type(version, message)


def finished_operation(
    parent: str,
    version: str,
    metadata_message: str = "DeleteOperationMetadata",
    response: dict[str, Any] | None = None,
) -> Resource:
    """A done operation under `parent` (projects/P/locations/L) whose response is `response` (with its
    `@type`), Empty when None (pure)."""
    stamp = now_rfc3339()
    return {
        "name": f"{parent}/operations/{new_id()}",
        "metadata": {
            "@type": metadata_type(version, metadata_message),
            "genericMetadata": {"createTime": stamp, "updateTime": stamp},
        },
        "done": True,
        "response": response if response is not None else {"@type": EMPTY_TYPE},
    }


class Operations:
    """Operations kept in the job store, so `GET /v1/{operation}` answers across restarts."""

    def __init__(self, store: JobStore) -> None:
        self._store = store

    def run(self, parent: str, version: str, work: Callable[[], None]) -> Resource:
        """Do `work` (it raises ApiError to refuse), then record and return its finished operation."""
        work()
        return self._store.insert(finished_operation(parent, version))

    def answer(
        self, parent: str, version: str, metadata_message: str, work: Callable[[], dict[str, Any]]
    ) -> Resource:
        """Do `work` (it raises ApiError to refuse), then record and return the finished operation whose
        response is what `work` returned (with its `@type`)."""
        return self._store.insert(finished_operation(parent, version, metadata_message, work()))

    def get(self, name: str) -> Resource | None:
        return self._store.get(name)
