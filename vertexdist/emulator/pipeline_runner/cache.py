"""Task caching as Vertex AI Pipelines does it: a task whose component and inputs match an earlier
successful task's is not run again; its outputs are that task's and its state SKIPPED.

The key covers what decides a task's result: the component's interface, its executor (image, command,
args), the input parameter values and the input artifacts' URIs. A task whose `cachingOptions.enableCache`
is false (the SDK's `enable_caching=False` sets it on every task; `--no-cache` does the same) neither reads
nor fills the cache. https://cloud.google.com/vertex-ai/docs/pipelines/configure-caching
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vertexdist.private_files import make_private_dir


def cache_key(
    component: dict[str, Any], executor: dict[str, Any], parameters: dict[str, Any], artifacts: dict[str, Any]
) -> str:
    """The task's fingerprint (pure)."""
    uris = {k: [a.get("uri", "") for a in v] for k, v in artifacts.items()}
    interface = {k: component.get(k) for k in ("inputDefinitions", "outputDefinitions")}
    text = json.dumps([interface, executor, parameters, uris], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def caching_on(task: dict[str, Any]) -> bool:
    return bool(task.get("cachingOptions", {}).get("enableCache", False))


@dataclass(frozen=True)
class CachedOutputs:
    parameters: dict[str, Any]
    artifacts: dict[str, list[dict[str, Any]]]
    job: str  # the pipeline job that ran it


class TaskCache:
    """Successful tasks' outputs by key, in a JSON file of the emulator's folder (kept across restarts)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._entries: dict[str, dict[str, Any]] = {}
        if path is not None and path.is_file():
            try:
                self._entries = json.loads(path.read_text())
            except ValueError:
                self._entries = {}

    def get(self, key: str) -> CachedOutputs | None:
        with self._lock:
            found = self._entries.get(key)
        if found is None:
            return None
        return CachedOutputs(found["parameters"], found["artifacts"], found["job"])

    def put(self, key: str, outputs: CachedOutputs) -> None:
        with self._lock:
            self._entries[key] = {
                "parameters": outputs.parameters,
                "artifacts": outputs.artifacts,
                "job": outputs.job,
            }
            if self.path is not None:
                make_private_dir(self.path.parent)
                tmp = self.path.with_suffix(".tmp")
                tmp.write_text(json.dumps(self._entries, default=str))
                tmp.replace(self.path)
