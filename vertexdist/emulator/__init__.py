"""A local Vertex AI API (custom training) and Cloud Storage that run jobs with the local backend."""

from __future__ import annotations

from vertexdist.emulator.server import Emulator

__all__ = ["Emulator"]
