"""The REST routes of `projects.locations.models` (ModelService), which `routes` hands over for that
collection: `models:upload` (a long-running operation), Get, List (with a filter), `:listVersions`,
`:mergeVersionAliases`, Patch (`updateMask`), `:deleteVersion` (an operation) and Delete (an operation).

https://cloud.google.com/vertex-ai/docs/reference/rest/v1/projects.locations.models: a name may carry
`@VERSION` or `@ALIAS` (`models/ID@2`, `models/ID@prod`); none means the default version. A listed model is
its default version; `:listVersions` lists every version, oldest first. `answer` returns None for a path
that is not a model's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from vertexdist.emulator.filters import parse_filter
from vertexdist.emulator.paging import list_page
from vertexdist.emulator.store import JobStore, Resource
from vertexdist.emulator.vertex.jobs import ApiError
from vertexdist.emulator.vertex.models import ModelRegistry, mask_paths, split_version
from vertexdist.emulator.vertex.operations import Operations, response_type
from vertexdist.wire.model_shapes import model_id_problem

_PREFIX = r"^/(v1|v1beta1)/(projects/[^/]+/locations/[^/]+)/models"
_MODELS = re.compile(_PREFIX + r"(?::upload)?$")
_MODEL = re.compile(_PREFIX + r"/([^/:]+)(?::(listVersions|mergeVersionAliases|deleteVersion))?$")
# A model's own filter field: its id (ListModelsRequest.filter `model=ID`).
_MODEL_FIELDS = {"model": lambda r: split_version(str(r.get("name", "")))[0].rsplit("/", 1)[-1]}


def public(resource: Resource) -> dict[str, Any]:
    return {k: v for k, v in resource.items() if not k.startswith("_")}


def _page(items: Sequence[Resource], size: int, token: str) -> tuple[Sequence[Resource], str]:
    try:
        start = int(token) if token else 0
    except ValueError:
        raise ApiError.invalid(f"page_token {token[:40]!r} is not valid") from None
    if start < 0:
        raise ApiError.invalid(f"page_token {token[:40]!r} is not valid")
    size = size if size > 0 else 100
    return items[start : start + size], (str(start + size) if start + size < len(items) else "")


def _filtered(items: list[Resource], text: str) -> list[Resource]:
    try:
        keep = parse_filter(text, _MODEL_FIELDS)
    except ValueError as exc:
        raise ApiError.invalid(str(exc)) from None
    return [item for item in items if keep(item)]


class ModelsApi:
    """ModelService over the registry; deletes and uploads answer finished operations."""

    def __init__(self, store: JobStore, models: ModelRegistry, operations: Operations) -> None:
        self._store = store
        self.models = models
        self.operations = operations

    def answer(
        self, verb: str, path: str, query: dict[str, str], read_body: Callable[[], dict[str, Any]]
    ) -> dict[str, Any] | None:
        match = _MODELS.match(path)
        if match:
            version, parent = match.groups()
            if verb == "POST" and path.endswith(":upload"):
                return self._upload(version, parent, read_body())
            if verb == "GET" and not path.endswith(":upload"):
                return self._list(parent, query)
            raise ApiError(405, "UNIMPLEMENTED", f"{verb} is not supported on {path}")
        match = _MODEL.match(path)
        if not match:
            return None
        version, parent, ident, method = match.groups()
        problem = model_id_problem(split_version(ident)[0] if "@" in ident else ident)
        if problem:  # never a name, nor a file, from an id that is not one
            raise ApiError.invalid(f"model id: {problem}")
        name = f"{parent}/models/{ident}"
        handler = _METHODS.get((verb, method))
        if handler is None:
            raise ApiError(405, "UNIMPLEMENTED", f"{verb} is not supported on {path}")
        return handler(self, version, parent, name, query, read_body)

    def _upload(self, version: str, parent: str, body: dict[str, Any]) -> dict[str, Any]:
        def work() -> dict[str, Any]:
            made = self.models.upload(parent, body)
            return {
                "@type": response_type(version, "UploadModelResponse"),
                "model": made["name"],
                "modelVersionId": made["versionId"],
            }

        return self.operations.answer(parent, version, "UploadModelOperationMetadata", work)

    def _list(self, parent: str, query: dict[str, str]) -> dict[str, Any]:
        def lister(text: str, size: int, token: str) -> tuple[Sequence[Resource], str]:
            return _page(_filtered(self._store.list(parent, "models"), text), size, token)

        return list_page("models", query, lister, public)

    def _get(self, version: str, parent: str, name: str, query: dict[str, str], body: Any) -> dict[str, Any]:
        found = self.models.get(name)
        if found is None:
            raise ApiError.not_found(name)
        return public(found)

    def _versions(
        self, version: str, parent: str, name: str, query: dict[str, str], body: Any
    ) -> dict[str, Any]:
        def lister(text: str, size: int, token: str) -> tuple[Sequence[Resource], str]:
            return _page(_filtered(self.models.versions(name), text), size, token)

        return list_page("models", query, lister, public)

    def _merge(
        self, version: str, parent: str, name: str, query: dict[str, str], body: Any
    ) -> dict[str, Any]:
        changes = body().get("versionAliases")
        if not isinstance(changes, list) or not changes or not all(isinstance(c, str) for c in changes):
            raise ApiError.invalid("version_aliases must be a non-empty list of aliases")
        return public(self.models.merge_aliases(name, changes))

    def _patch(
        self, version: str, parent: str, name: str, query: dict[str, str], body: Any
    ) -> dict[str, Any]:
        model = body()
        mask = mask_paths(query.get("updateMask", ""))
        if not mask:
            raise ApiError.invalid("update_mask is required (e.g. updateMask=display_name,labels)")
        return public(self.models.patch(name, model, mask))

    def _delete_version(
        self, version: str, parent: str, name: str, query: dict[str, str], body: Any
    ) -> dict[str, Any]:
        def work() -> None:
            self.models.delete_version(name)

        return self.operations.run(parent, version, work)

    def _delete(
        self, version: str, parent: str, name: str, query: dict[str, str], body: Any
    ) -> dict[str, Any]:
        def work() -> None:
            if split_version(name)[1] is not None:
                raise ApiError.invalid(f"{name} names a version: delete it with :deleteVersion")
            if self.models.delete(name) is None:
                raise ApiError.not_found(name)

        return self.operations.run(parent, version, work)


Handler = Callable[[ModelsApi, str, str, str, dict[str, str], Callable[[], dict[str, Any]]], dict[str, Any]]
_METHODS: dict[tuple[str, str | None], Handler] = {
    ("GET", None): ModelsApi._get,
    ("GET", "listVersions"): ModelsApi._versions,
    ("POST", "mergeVersionAliases"): ModelsApi._merge,
    ("PATCH", None): ModelsApi._patch,
    ("DELETE", "deleteVersion"): ModelsApi._delete_version,
    ("DELETE", None): ModelsApi._delete,
}
