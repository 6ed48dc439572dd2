"""Backends: one per target behind one small interface (`base.Backend`), named in `BACKENDS`.

`BACKENDS` maps a backend's name to where its class is (`module:Class`), imported only when asked for:
naming the backends loads none of them (the Vertex one loads google-cloud-aiplatform on first call, the
local one the process runtime). A new backend is a package under `vertexdist/backends/` and one line here.
`create_backend(name, target)` makes one: `target` is what that backend's class takes first, a
`backends.config.Target` for `vertex`, `backends.local.LocalOptions` (or None) for `local`.
"""

from __future__ import annotations

import importlib
from typing import Any, cast

from vertexdist.backends.base import Backend
from vertexdist.errors import UsageError

BACKENDS: dict[str, str] = {
    "vertex": "vertexdist.backends.vertex:VertexBackend",
    "local": "vertexdist.backends.local:LocalBackend",
}


def backend_class(name: str) -> type[Backend[Any]]:
    """The class of the backend `name` (imported now); UsageError for a name not in BACKENDS."""
    where = BACKENDS.get(name)
    if where is None:
        raise UsageError(f"no backend {name!r}", hint=f"one of: {', '.join(sorted(BACKENDS))}")
    module, _, attribute = where.partition(":")
    return cast("type[Backend[Any]]", getattr(importlib.import_module(module), attribute))


def create_backend(name: str, target: object = None, **kwargs: Any) -> Backend[Any]:
    """The backend `name` for `target` (see the module's docstring), with that class's own keywords."""
    factory = cast("Any", backend_class(name))
    return cast("Backend[Any]", factory(target, **kwargs))


__all__ = ["BACKENDS", "backend_class", "create_backend"]
