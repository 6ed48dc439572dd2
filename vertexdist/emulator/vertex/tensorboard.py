"""Vertex TensorBoard's REST routes (https://cloud.google.com/vertex-ai/docs/reference/rest/v1/
projects.locations.tensorboards), as google-cloud-aiplatform's `TensorboardServiceClient` REST transport calls
them: tensorboards (create is a long-running operation), experiments, runs and timeSeries (create, get, list,
patch, delete, which takes what is under it along); `runs:batchCreate` and `experiments/E:batchCreate` (time
series); the data: `runs/R:write` (writeTensorboardRunData), `experiments/E:write`
(writeTensorboardExperimentData), `timeSeries/T:read`, `tensorboards/T:batchRead` and
`timeSeries/T:exportTensorboardTimeSeries`.

A time series' points are kept apart from it (`ExperimentStore.points`), in the order written: a write
appends what it adds. Reads are bounded as Vertex's are: `:read` and `:batchRead` give each series' newest
`maxDataPoints` (1,000 unless asked, at most 10,000), `:exportTensorboardTimeSeries` pages of `pageSize`
(1,000 unless asked, at most 10,000). A run's time series have distinct display names (a second one is
ALREADY_EXISTS, as on Vertex).
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

_TYPE = "type.googleapis.com/google.cloud.aiplatform.v1.Tensorboard"
COLLECTIONS = {
    "tensorboards": Collection(
        "tensorboards", "tensorboardId", "tensorboards", "CreateTensorboardOperationMetadata", _TYPE
    ),
    "experiments": Collection("experiments", "tensorboardExperimentId", "tensorboardExperiments"),
    "runs": Collection("runs", "tensorboardRunId", "tensorboardRuns"),
    "timeSeries": Collection("timeSeries", "tensorboardTimeSeriesId", "tensorboardTimeSeries"),
}
_DEFAULT_READ_POINTS = 1000
_MAX_READ_POINTS = 10_000


def _list_of_objects(body: dict[str, Any], field: str) -> list[dict[str, Any]]:
    value = body.get(field, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ApiError.invalid(f"{field}: expected a list of objects")
    return value


def _series_data(
    store: ExperimentStore, series: Resource, limit: int = _DEFAULT_READ_POINTS
) -> dict[str, Any]:
    # Vertex samples down to maxDataPoints; the newest ones are kept here
    points = store.points.newest(series["name"], limit)
    return {
        "tensorboardTimeSeriesId": series["name"].rsplit("/", 1)[-1],
        "valueType": series.get("valueType", "SCALAR"),
        "values": points,
    }


def _number(raw: object, what: str, default: int) -> int:
    """A query or body number in [1, _MAX_READ_POINTS] (0 or none: `default`); 400 otherwise."""
    try:
        value = int(str(raw or 0))
    except ValueError:
        raise ApiError.invalid(f"{what} {str(raw)[:40]!r} is not a number") from None
    if value < 0:
        raise ApiError.invalid(f"{what} must be at least 0, got {value}")
    return min(value or default, _MAX_READ_POINTS)


class TensorboardApi:
    def __init__(self, store: ExperimentStore) -> None:
        self.store = store
        self.resources = Resources(store)

    def answer(
        self,
        verb: str,
        version: str,
        segments: list[str],
        custom: str,
        query: dict[str, list[str]],
        body: Any,
    ) -> dict[str, Any] | None:
        single = {k: v[-1] for k, v in query.items()}
        path = "/".join(segments)
        if len(segments) % 2 == 1:
            kind = COLLECTIONS.get(segments[-1])
            parent = "/".join(segments[:-1])
            if kind is None:
                return None
            if custom == "batchCreate" and verb == "POST" and kind.noun == "runs":
                created = [
                    self._create(r.get("parent") or parent, kind, r, "tensorboardRun", version)
                    for r in _list_of_objects(body(), "requests")
                ]
                return {"tensorboardRuns": created}
            if custom:
                return None
            if verb == "POST":
                return self._create(parent, kind, {"r": body(), **single}, "r", version)
            if verb == "GET":
                return self.resources.list(parent, kind.noun, single, kind.listed)
            return None
        noun = segments[-2]
        if noun not in COLLECTIONS:
            return None
        if custom:
            return self._custom(verb, path, noun, custom, query, body, version)
        if verb == "GET":
            return visible(self.resources.need(path))
        if verb == "PATCH":
            return self.resources.patch(path, body(), single, lambda: self.resources.need(path))
        if verb == "DELETE":
            return self.resources.delete(path, version)
        return None

    def _create(
        self, parent: str, kind: Collection, request: dict[str, Any], field: str, version: str
    ) -> dict[str, Any]:
        """Create from a request holding the resource in `field` and maybe its id (`kind.id_param`)."""
        resource = request.get(field) or {}
        if not isinstance(resource, dict):
            raise ApiError.invalid(f"{field}: expected an object")
        if kind.noun != "tensorboards":
            self.resources.need(parent)
        if kind.noun == "timeSeries":
            shown = resource.get("displayName")
            if any(s.get("displayName") == shown for s in self.store.children(parent, "timeSeries")):
                raise ApiError(409, "ALREADY_EXISTS", f"a time series named {shown!r} exists in {parent}")
        ident = request.get(kind.id_param)
        query = {kind.id_param: ident} if isinstance(ident, str) and ident else {}
        return self.resources.create(parent, kind, resource, query, version)

    def _custom(
        self,
        verb: str,
        name: str,
        noun: str,
        custom: str,
        query: dict[str, list[str]],
        body: Any,
        version: str,
    ) -> dict[str, Any] | None:
        method = (verb, noun, custom)
        if method == ("POST", "runs", "write"):
            self.resources.need(name)
            self._write(name, _list_of_objects(body(), "timeSeriesData"))
            return {}
        if method == ("POST", "experiments", "write"):
            self.resources.need(name)
            for request in _list_of_objects(body(), "writeRunDataRequests"):
                run = request.get("tensorboardRun")
                if not isinstance(run, str) or not run.startswith(name + "/runs/"):
                    raise ApiError.invalid(f"writeRunDataRequests[].tensorboardRun: not a run of {name}")
                self.resources.need(run)
                self._write(run, _list_of_objects(request, "timeSeriesData"))
            return {}
        if method == ("POST", "experiments", "batchCreate"):
            created = []
            for request in _list_of_objects(body(), "requests"):
                parent = request.get("parent")
                if not isinstance(parent, str) or not parent.startswith(name + "/runs/"):
                    raise ApiError.invalid(f"requests[].parent: expected a run of {name}")
                created.append(
                    self._create(parent, COLLECTIONS["timeSeries"], request, "tensorboardTimeSeries", version)
                )
            return {"tensorboardTimeSeries": created}
        if method == ("GET", "timeSeries", "read"):
            series = self.resources.need(name)
            limit = _number((query.get("maxDataPoints") or ["0"])[-1], "maxDataPoints", _DEFAULT_READ_POINTS)
            return {"timeSeriesData": _series_data(self.store, series, limit)}
        if method == ("POST", "timeSeries", "exportTensorboardTimeSeries"):
            self.resources.need(name)
            request = body()
            if not isinstance(request, dict):
                raise ApiError.invalid("expected an ExportTensorboardTimeSeriesDataRequest object")
            size = _number(request.get("pageSize"), "pageSize", _DEFAULT_READ_POINTS)
            token = request.get("pageToken") or "0"
            if not isinstance(token, str) or not token.isascii() or not token.isdigit():
                raise ApiError.invalid(f"pageToken {str(token)[:40]!r} is not one this server gave")
            points, following = self.store.points.page(name, int(token), size)
            out: dict[str, Any] = {"timeSeriesDataPoints": points}
            if following is not None:
                out["nextPageToken"] = str(following)
            return out
        if method == ("GET", "tensorboards", "batchRead"):
            self.resources.need(name)
            wanted = query.get("timeSeries", [])
            if any(not n.startswith(name + "/") or "/../" in n for n in wanted):
                raise ApiError.invalid(f"timeSeries: every time series must belong to {name}")
            found = [self.resources.need(n) for n in wanted]
            return {"timeSeriesData": [_series_data(self.store, s) for s in found]}
        return None

    def _write(self, run: str, data: list[dict[str, Any]]) -> None:
        for series_data in data:
            ident = series_data.get("tensorboardTimeSeriesId")
            if not isinstance(ident, str) or not ident or "/" in ident or len(ident) > 128:
                raise ApiError.invalid("timeSeriesData[].tensorboardTimeSeriesId: expected an id")
            series = f"{run}/timeSeries/{ident}"
            self.resources.need(series)
            # Appended: the write costs what it adds, and holds only this series' lock.
            self.store.points.append(series, _list_of_objects(series_data, "values"))
