"""Backends: one per target behind one small interface (`base.Backend`), named in `BACKENDS`.

`BACKENDS` maps a backend's name to where its class is (`module:Class`), imported only when asked for:
naming the backends loads none of them (the Vertex one loads google-cloud-aiplatform on first call, the
local one the process runtime). A new backend is a package under `vertexdist/backends/` and one line here.
`create_backend(name, target)` makes one: `target` is what that backend's class takes first, a
`backends.config.Target` for `vertex`, `backends.local.LocalOptions` (or None) for `local`. Called with a
name written out (`"vertex"`, `"local"`), it is typed as that backend's class, with that class's keywords,
so a caller needs no cast; any other name gives a `Backend[Any]` (a new backend's overload goes here too).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Literal, overload

from vertexdist.backends.base import Backend
from vertexdist.errors import UsageError

if TYPE_CHECKING:
    from vertexdist.backends.config import Target
    from vertexdist.backends.local import LocalBackend, LocalOptions
    from vertexdist.backends.vertex import VertexBackend
    from vertexdist.backends.vertex.retry import RetryPolicy

BACKENDS: dict[str, str] = {
    "vertex": "vertexdist.backends.vertex:VertexBackend",
    "local": "vertexdist.backends.local:LocalBackend",
}


class BackendNotFound(UsageError):
    """A name in BACKENDS whose `module:Class` does not exist (a registry line out of date)."""


def backend_class(name: str) -> type[Backend[Any]]:
    """The class of the backend `name` (imported now); UsageError for a name not in BACKENDS, and
    BackendNotFound when its `module:Class` line names nothing there is."""
    where = BACKENDS.get(name)
    if where is None:
        raise UsageError(f"no backend {name!r}", hint=f"one of: {', '.join(sorted(BACKENDS))}")
    module_name, _, attribute = where.partition(":")
    module = importlib.import_module(module_name)
    found: object = getattr(module, attribute, None)
    if not isinstance(found, type):
        raise BackendNotFound(
            f"BACKENDS[{name!r}] names {where}, and {module_name} has no class {attribute}",
            hint="fix its line in vertexdist/backends/__init__.py",
        )
    backend: type[Backend[Any]] = found
    return backend


@overload
def create_backend(
    name: Literal["vertex"], target: Target, *, retry: RetryPolicy | None = None
) -> VertexBackend: ...


@overload
def create_backend(
    name: Literal["local"],
    target: LocalOptions | None = None,
    *,
    grace_s: float = ...,
    timeout_s: float | None = None,
    seed: int | None = None,
) -> LocalBackend: ...


@overload
def create_backend(name: str, target: object = None, **kwargs: Any) -> Backend[Any]: ...


def create_backend(name: str, target: object = None, **kwargs: Any) -> Backend[Any]:
    """The backend `name` for `target` (see the module's docstring), with that class's own keywords."""
    factory: Any = backend_class(name)
    backend: Backend[Any] = factory(target, **kwargs)
    return backend


__all__ = ["BACKENDS", "BackendNotFound", "backend_class", "create_backend"]
