"""The list of command modules. Each exposes `register(app: typer.Typer) -> None`."""

from __future__ import annotations

from types import ModuleType

from vertexdist.cli import (
    build,
    emulator,
    estimate,
    experiments,
    goodput,
    jobs,
    local_run,
    machines,
    managed,
    models,
    outputs,
    pipeline,
    pool,
    ranks,
    record,
    render,
    schema,
    shell,
    submit,
    trials,
    ui,
    validate,
)

MODULES: list[ModuleType] = [
    validate,
    render,
    local_run,
    schema,
    machines,
    estimate,
    build,
    submit,
    managed,
    jobs,
    ranks,
    goodput,
    shell,
    trials,
    outputs,
    models,
    experiments,
    pipeline,
    record,
    emulator,
    pool,
    ui,
]
