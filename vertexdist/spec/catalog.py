"""The one lookup module over the machine catalog (`catalog_data`): machines, accelerators, regions."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping

from vertexdist.spec.catalog_data import (
    ACCELERATORS,
    GPU_MEMORY_GB,
    MACHINES,
    REGIONS,
    RETIRED_ACCELERATORS,
    MachineRow,
)


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


def gpu_memory_gb(accelerator_type: str | None) -> float | None:
    """One GPU's memory in GB (10^9 bytes), or None for CPU machines and GPUs whose memory is not known."""
    return GPU_MEMORY_GB.get(accelerator_type or "")


def accelerator_name(accelerator_type: str) -> str:
    """`NVIDIA_TESLA_A100` -> `A100 40GB`: the GPU as people call it."""
    return ACCELERATORS.get(accelerator_type, accelerator_type).removeprefix("NVIDIA ")


def retired_accelerator_reason(name: str) -> str | None:
    return RETIRED_ACCELERATORS.get(name)


def known_region(name: str) -> bool:
    return name in REGIONS


def _tokens(name: str) -> set[str]:
    return set(re.split(r"[_\-.\s]+", name.upper())) - {""}


# A part that many names share (NVIDIA, TESLA) says little about which one is meant.
_COMMON_SHARE = 0.25


def close_matches(
    value: str, choices: list[str] | tuple[str, ...], n: int = 2, described: Mapping[str, str] | None = None
) -> list[str]:
    """Known names close to a misspelt one, best first: names holding every part of the value
    (NVIDIA_A100 -> NVIDIA_A100_80GB, NVIDIA_TESLA_A100), then names holding its distinctive parts, those
    few names share (NVIDIA_TESLA_L4 -> NVIDIA_L4), shortest first; difflib's closest only when neither.
    `described` adds each name's description to its parts (NVIDIA_TESLA_A100: "NVIDIA A100 40GB")."""
    parts = _tokens(value)
    held = {c: _tokens(c) | _tokens((described or {}).get(c, "")) for c in choices}
    holding = [c for c in choices if parts and (value.upper() in c.upper() or parts <= held[c])]
    share = {p: sum(p in tokens for tokens in held.values()) / max(1, len(choices)) for p in parts}
    distinctive = {p for p in parts if share[p] < _COMMON_SHARE}
    sharing = [c for c in choices if distinctive and distinctive <= held[c]]
    found = list(dict.fromkeys(sorted(holding, key=lambda c: (len(c), c)) + sorted(sharing, key=len)))
    if not found:
        found = difflib.get_close_matches(value, list(choices), n=n, cutoff=0.6)
    return found[:n]


def close_match(value: str, choices: list[str] | tuple[str, ...]) -> str | None:
    """The closest known name to a misspelt one, or None."""
    matches = close_matches(value, choices, n=1)
    return matches[0] if matches else None


def did_you_mean(
    value: str, choices: list[str] | tuple[str, ...], described: Mapping[str, str] | None = None
) -> str:
    """`did you mean 'A' or 'B'?`, or empty when nothing is close."""
    matches = close_matches(value, choices, described=described)
    return f"did you mean {' or '.join(repr(m) for m in matches)}?" if matches else ""


def describe_options(machine_type: str) -> str:
    """`NVIDIA_L4 x 1` style text naming what a machine takes, for error messages."""
    row = MACHINES.get(machine_type)
    if not row or not row.accelerators:
        return "no accelerators"
    return "; ".join(
        f"{acc} x {'/'.join(str(c) for c in counts)}" for acc, counts in row.accelerators.items()
    )
