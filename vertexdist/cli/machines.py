"""`vertexdist machines [--accelerator X]`: the machine catalog as a table (source URL in the footer)."""

from __future__ import annotations

import json
from typing import Any

import typer

FORMATS = ("table", "json")
_COLUMNS = ("machine_type", "accelerator", "counts", "vcpus", "memory_gb", "egress_gbps", "note")


def catalog_rows(accelerator: str | None = None) -> list[dict[str, Any]]:
    """One row per (machine, accelerator option); CPU-only machines get accelerator None."""
    from vertexdist.spec.catalog_data import MACHINES

    rows: list[dict[str, Any]] = []
    for machine in MACHINES.values():
        options: list[tuple[str | None, tuple[int, ...]]] = list(machine.accelerators.items()) or [(None, ())]
        for acc, counts in options:
            if accelerator is not None and acc != accelerator:
                continue
            rows.append(
                {
                    "machine_type": machine.name,
                    "accelerator": acc,
                    "counts": list(counts),
                    "vcpus": machine.vcpus,
                    "memory_gb": machine.memory_gb,
                    "egress_gbps": machine.egress_gbps,
                    "note": machine.note,
                }
            )
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    def cell(key: str, value: Any) -> str:
        if value is None:
            return "-" if key != "accelerator" else "(CPU only)"
        if key == "counts":
            return ",".join(str(c) for c in value) or "-"
        if isinstance(value, float):
            return f"{value:g}"
        return str(value)

    cells = [[cell(key, row[key]) for key in _COLUMNS] for row in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(_COLUMNS)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(_COLUMNS, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    return "\n".join(lines)


def machines(
    accelerator: str | None = typer.Option(
        None, "--accelerator", help="Only machines that take this accelerator, e.g. NVIDIA_L4."
    ),
    output_format: str = typer.Option("table", "--format", help="table (default) or json."),
) -> None:
    """Print the Vertex AI training machines, the accelerators and counts each takes, and their size."""
    from vertexdist.errors import UsageError
    from vertexdist.spec import catalog
    from vertexdist.spec.catalog_data import ACCELERATORS, SOURCE_URL

    if output_format not in FORMATS:
        raise UsageError(f"unknown --format {output_format!r}", hint=f"use one of {', '.join(FORMATS)}")
    if accelerator is not None:
        accelerator = accelerator.upper()
        if accelerator not in ACCELERATORS:
            reason = catalog.retired_accelerator_reason(accelerator)
            guess = catalog.did_you_mean(accelerator, list(ACCELERATORS), described=ACCELERATORS)
            raise UsageError(
                (reason and f"{accelerator}: {reason}") or f"unknown accelerator {accelerator!r}",
                hint=(f"{guess} " if guess else "") + "known: " + ", ".join(ACCELERATORS),
            )
    rows = catalog_rows(accelerator)
    if output_format == "json":
        typer.echo(json.dumps({"source": SOURCE_URL, "machines": rows}, indent=2))
        return
    typer.echo(format_table(rows))
    typer.echo(f"\nsource: {SOURCE_URL}")


def register(app: typer.Typer) -> None:
    app.command("machines")(machines)
