"""The Model Registry through the SDK's ModelServiceClient, the calls `aiplatform.Model` and
`aiplatform.models.ModelRegistry` make: get (`MODEL`, `MODEL@VERSION`, `MODEL@ALIAS`), list (with a filter),
listVersions; and the files of a version's artifactUri, as a job's outputs are read (`GcsOutputs`). Models
come back as proto-JSON dicts (camelCase).
"""

from __future__ import annotations

from typing import Any

from vertexdist.backends.config import Target
from vertexdist.backends.vertex.clients import Clients, credentials_for, quiet_sdk_logging
from vertexdist.backends.vertex.outputs import GcsOutputs
from vertexdist.backends.vertex.retry import Caller
from vertexdist.errors import UsageError

CALL_TIMEOUT_S = 60.0


def _as_dict(message: Any) -> dict[str, Any]:
    from google.protobuf import json_format

    found: dict[str, Any] = json_format.MessageToDict(type(message).pb(message))
    return found


class RegisteredModels:
    """One project and location's models."""

    def __init__(self, target: Target, caller: Caller | None = None, client: Any = None) -> None:
        self.target = target
        self._call = caller or Caller(target)
        self._client = client
        self._clients = Clients(target)

    @property
    def client(self) -> Any:
        if self._client is None:
            credentials = credentials_for(self.target)
            quiet_sdk_logging()
            from google.cloud.aiplatform_v1 import ModelServiceClient

            self._client = ModelServiceClient(
                transport=self.target.api_transport,
                client_options={"api_endpoint": self.target.endpoint},
                credentials=credentials,
            )
        return self._client

    def name_of(self, ref: str) -> str:
        """A full resource name for `ID[@VERSION]` (a full name stays as it is)."""
        ref = ref.strip()
        if ref.count("@") > 1 or not ref or ref.startswith("@") or ref.endswith("@"):
            raise UsageError(f"{ref!r} is not a model", hint="write MODEL, MODEL@VERSION or MODEL@ALIAS")
        return ref if ref.startswith("projects/") else f"{self.target.parent}/models/{ref}"

    def get(self, ref: str) -> dict[str, Any]:
        name = self.name_of(ref)
        found = self._call(
            f"reading {name}", lambda: self.client.get_model(name=name, timeout=CALL_TIMEOUT_S)
        )
        return _as_dict(found)

    def list_models(self, filter_text: str = "") -> list[dict[str, Any]]:
        parent = self.target.parent

        def call() -> list[Any]:
            request = {"parent": parent, "filter": filter_text}
            return list(self.client.list_models(request=request, timeout=CALL_TIMEOUT_S))

        return [_as_dict(m) for m in self._call(f"listing the models in {parent}", call)]

    def versions(self, ref: str) -> list[dict[str, Any]]:
        name = self.name_of(ref).partition("@")[0]

        def call() -> list[Any]:
            return list(self.client.list_model_versions(name=name, timeout=CALL_TIMEOUT_S))

        return [_as_dict(m) for m in self._call(f"listing the versions of {name}", call)]

    def files(self, model: dict[str, Any]) -> GcsOutputs:
        """The files under a version's artifactUri."""
        uri = str(model.get("artifactUri") or "")
        if not uri.startswith("gs://"):
            raise UsageError(
                f"version {model.get('versionId')} of {model.get('name')} has no gs:// artifactUri",
                hint="only a model with files in Cloud Storage can be downloaded",
            )
        if self.target.is_emulator and not self.target.storage_endpoint:
            raise UsageError(
                "an emulator model's files are in the emulator's Cloud Storage, and STORAGE_EMULATOR_HOST"
                " is not set",
                hint="set it to what `vertexdist emulator start` printed, or pass --emulator",
            )
        return GcsOutputs(uri.rstrip("/"), self._clients.storage, self._call.for_storage())
