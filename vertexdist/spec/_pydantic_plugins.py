"""vertexdist's own models are built without pydantic's plugin discovery. Pure.

Building the first model class asks pydantic for its plugins, which reads the entry points of every
installed distribution (`importlib.metadata`): a tenth of a second in an environment with torch and the
Google Cloud libraries, paid by every `vertexdist validate` before it reads a file. The spec's models want no
plugins, so they are built while pydantic believes it is loading plugins (when it offers none); a program's
own models, built afterwards, still get theirs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def without_plugins() -> Iterator[None]:
    """Models built inside skip pydantic's plugin discovery; nothing changes after (or on an unknown
    pydantic, where this does nothing)."""
    try:
        from pydantic.plugin import _loader
    except ImportError:  # pragma: no cover - a pydantic without plugins
        yield
        return
    if getattr(_loader, "_loading_plugins", None) is not False:
        yield  # already loading them, or a pydantic that works otherwise
        return
    _loader._loading_plugins = True
    try:
        yield
    finally:
        _loader._loading_plugins = False
