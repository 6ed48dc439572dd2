"""The one lookup module over the machine catalog (`catalog_data`): machines, accelerators, regions."""

from __future__ import annotations

import difflib

from vertexdist.spec.catalog_data import ACCELERATORS, MACHINES, REGIONS, RETIRED_ACCELERATORS, MachineRow


def machine(name: str) -> MachineRow | None:
    """The catalog row of a machine type, or None when Vertex training does not offer it."""
    return MACHINES.get(name)


def is_gpu_machine(name: str) -> bool:
    row = MACHINES.get(name)
    return bool(row and row.accelerators)


def is_accelerator_optimized(name: str) -> bool:
    """a2/a3/a4/g2/g4 machines come with their GPUs built in; n1 takes them attached."""
    row = MACHINES.get(name)
    return bool(row and row.accelerators and not name.startswith("n1-"))


def allowed_counts(machine_type: str, accelerator_type: str) -> tuple[int, ...]:
    """The accelerator counts a machine takes for one accelerator type; empty when it takes none."""
    row = MACHINES.get(machine_type)
    return row.accelerators.get(accelerator_type, ()) if row else ()


def machines_for_accelerator(accelerator_type: str) -> list[MachineRow]:
    return [row for row in MACHINES.values() if accelerator_type in row.accelerators]


def known_accelerator(name: str) -> bool:
    return name in ACCELERATORS


def retired_accelerator_reason(name: str) -> str | None:
    return RETIRED_ACCELERATORS.get(name)


def known_region(name: str) -> bool:
    return name in REGIONS


def close_match(value: str, choices: list[str] | tuple[str, ...]) -> str | None:
    """The closest known name to a misspelt one (difflib), or None."""
    matches = difflib.get_close_matches(value, list(choices), n=1, cutoff=0.6)
    return matches[0] if matches else None


def describe_options(machine_type: str) -> str:
    """`NVIDIA_L4 x 1` style text naming what a machine takes, for error messages."""
    row = MACHINES.get(machine_type)
    if not row or not row.accelerators:
        return "no accelerators"
    return "; ".join(
        f"{acc} x {'/'.join(str(c) for c in counts)}" for acc, counts in row.accelerators.items()
    )
