"""Vertex AI Experiments in the emulator: the ML Metadata store (`metadata`) and TensorBoard
(`tensorboard`) behind one store, for `http_api` to ask first: `answer` is None for any other path.

Paths are `/v1/projects/P/locations/L/{metadataStores|tensorboards}/...`, `/v1beta1/` alike, a custom
method after the last segment's `:`. Query parameters may repeat (`batchRead`'s `timeSeries`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from vertexdist.emulator.vertex.experiment_store import ExperimentStore
from vertexdist.emulator.vertex.metadata import MetadataApi
from vertexdist.emulator.vertex.tensorboard import TensorboardApi

_VERSIONS = ("v1", "v1beta1")
ReadBody = Callable[[], dict[str, Any]]


class ExperimentsApi:
    def __init__(self, data_dir: Path | None) -> None:
        self.store = ExperimentStore(data_dir)
        self.metadata = MetadataApi(self.store)
        self.tensorboard = TensorboardApi(self.store)

    def answer(self, verb: str, path: str, query_text: str, body: ReadBody) -> dict[str, Any] | None:
        version, _, rest = path.lstrip("/").partition("/")
        segments = rest.split("/")
        if version not in _VERSIONS or len(segments) < 5 or segments[0] != "projects":
            return None
        if segments[2] != "locations" or not all(segments):
            return None
        last, _, custom = segments[-1].partition(":")
        segments[-1] = last
        query = parse_qs(query_text, keep_blank_values=True)
        if segments[4] == "metadataStores":
            single = {k: v[-1] for k, v in query.items()}
            return self.metadata.answer(verb, version, segments, custom, single, body)
        if segments[4] == "tensorboards":
            return self.tensorboard.answer(verb, version, segments, custom, query, body)
        return None
