"""The list of command modules. Each exposes `register(app: typer.Typer) -> None`."""

from __future__ import annotations

from types import ModuleType

from vertexdist.cli import build, machines, render, schema, validate

MODULES: list[ModuleType] = [validate, render, schema, machines, build]
