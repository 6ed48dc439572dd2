"""The list of command modules. Each exposes `register(app: typer.Typer) -> None`."""

from __future__ import annotations

from types import ModuleType

MODULES: list[ModuleType] = []
