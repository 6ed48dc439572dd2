"""The console's own errors: what a page or API route answers 404 or 503 for."""

from __future__ import annotations

from vertexdist.errors import VertexdistError


class NotFound(VertexdistError):
    """No job of that ref."""


class Unavailable(VertexdistError):
    """A backend did not answer (the emulator stopped, Vertex refused the call)."""
