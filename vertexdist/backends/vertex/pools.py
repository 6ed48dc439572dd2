"""Persistent resources (Vertex's reserved clusters) through the SDK's PersistentResourceServiceClient, the
same calls `aiplatform.persistent_resource.PersistentResource` makes: create (a long-running operation,
waited on), get, list, delete. Resources come back as proto-JSON dicts (camelCase, enum names).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from vertexdist.backends.config import Target
from vertexdist.backends.vertex.clients import credentials_for, quiet_sdk_logging
from vertexdist.backends.vertex.retry import Caller

CALL_TIMEOUT_S = 60.0
# Creating a real one provisions machines: minutes (the emulator's is done at once).
CREATE_TIMEOUT_S = 3600.0


def create_body(
    ident: str,
    pools: Sequence[Mapping[str, Any]],
    display_name: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The PersistentResource of a create, as `PersistentResource.create(...)` builds it: `name` is the id
    (the server makes the full name), the pools as given, display name and labels when set."""
    body: dict[str, Any] = {"name": ident, "resourcePools": [dict(p) for p in pools]}
    if display_name:
        body["displayName"] = display_name
    if labels:
        body["labels"] = dict(labels)
    return body


def _as_dict(message: Any) -> dict[str, Any]:
    from google.protobuf import json_format

    found: dict[str, Any] = json_format.MessageToDict(type(message).pb(message))
    return found


class PersistentResources:
    """One project and location's persistent resources."""

    def __init__(self, target: Target, caller: Caller | None = None, client: Any = None) -> None:
        self.target = target
        self._call = caller or Caller(target)
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            quiet_sdk_logging()
            from google.cloud.aiplatform_v1 import PersistentResourceServiceClient

            self._client = PersistentResourceServiceClient(
                transport=self.target.api_transport,
                client_options={"api_endpoint": self.target.endpoint},
                credentials=credentials_for(self.target),
            )
        return self._client

    def name_of(self, ref: str) -> str:
        """A full resource name for an id (a full name stays as it is)."""
        ref = ref.strip()
        return ref if ref.startswith("projects/") else f"{self.target.parent}/persistentResources/{ref}"

    def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        from google.cloud.aiplatform_v1.types import PersistentResource

        resource = PersistentResource.from_json(json.dumps(dict(body)))
        ident = str(body["name"])

        def call() -> Any:
            operation = self.client.create_persistent_resource(
                parent=self.target.parent,
                persistent_resource=resource,
                persistent_resource_id=ident,
                timeout=CALL_TIMEOUT_S,
            )
            return operation.result(timeout=CREATE_TIMEOUT_S)

        self._call(f"creating persistent resource {ident}", call)
        return self.get(ident)

    def get(self, ref: str) -> dict[str, Any]:
        name = self.name_of(ref)
        found = self._call(
            f"reading {name}", lambda: self.client.get_persistent_resource(name=name, timeout=CALL_TIMEOUT_S)
        )
        return _as_dict(found)

    def list(self) -> list[dict[str, Any]]:
        parent = self.target.parent

        def call() -> list[Any]:
            return list(self.client.list_persistent_resources(parent=parent, timeout=CALL_TIMEOUT_S))

        return [_as_dict(r) for r in self._call(f"listing persistent resources in {parent}", call)]

    def delete(self, ref: str) -> str:
        name = self.name_of(ref)
        self._call(
            f"deleting {name}",
            lambda: self.client.delete_persistent_resource(name=name, timeout=CALL_TIMEOUT_S).result(
                timeout=CREATE_TIMEOUT_S
            ),
        )
        return name
