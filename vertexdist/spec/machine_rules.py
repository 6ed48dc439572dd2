"""The machine and accelerator rules, over one machine choice: a template's training nodes, or one worker
pool of a request the emulator receives (so `validate` and the emulator refuse the very same things).

Sources: docs/reference/vertex.md §3 (the GPU compatibility table), the catalog in `catalog_data`. Where
Vertex's own wording of a refusal is known, a finding carries it as `api_message` for the emulator to answer
with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from vertexdist.spec import catalog
from vertexdist.spec.catalog_data import ACCELERATORS, MACHINES
from vertexdist.spec.findings import Finding

_NO_ACCELERATOR = ("", "ACCELERATOR_TYPE_UNSPECIFIED")


@dataclass(frozen=True)
class MachineChoice:
    """A machine type with the accelerators asked for it (the template fields, or a pool's machineSpec)."""

    machine_type: str
    accelerator_type: str | None = None
    accelerator_count: int = 0


def requested_accelerator(accelerator_type: str | None) -> str | None:
    """The accelerator type asked for, or None for none (empty and UNSPECIFIED mean none, as on Vertex)."""
    return None if accelerator_type in (None, *_NO_ACCELERATOR) else accelerator_type


def _accelerator(m: MachineChoice) -> str | None:
    return requested_accelerator(m.accelerator_type)


def _join(*parts: str) -> str:
    return " ".join(p for p in parts if p)


def machine_type_known(m: MachineChoice) -> Iterator[Finding]:
    if m.machine_type not in MACHINES:
        yield Finding(
            "machine_type",
            f"{m.machine_type!r} is not a Vertex AI training machine type",
            _join(
                catalog.did_you_mean(m.machine_type, list(MACHINES)), "run `vertexdist machines` for the list"
            ),
            api_message=f'Machine type "{m.machine_type}" is not supported for training',
        )


def accelerator_type_known(m: MachineChoice) -> Iterator[Finding]:
    accelerator = _accelerator(m)
    if accelerator is None or catalog.known_accelerator(accelerator):
        return
    retired = catalog.retired_accelerator_reason(accelerator)
    if retired:
        yield Finding(
            "accelerator_type", f"{accelerator!r}: {retired}", "run `vertexdist machines` for the GPUs"
        )
        return
    yield Finding(
        "accelerator_type",
        f"{accelerator!r} is not an accelerator type",
        _join(
            catalog.did_you_mean(accelerator, list(ACCELERATORS), described=ACCELERATORS),
            "names are the API's enum names, e.g. NVIDIA_TESLA_A100, NVIDIA_L4",
        ),
    )


def accelerator_type_and_count_together(m: MachineChoice) -> Iterator[Finding]:
    accelerator = _accelerator(m)
    options = catalog.describe_options(m.machine_type)
    if accelerator is not None and m.accelerator_count == 0:
        # The SDK and the API silently drop a type whose count is 0: the job would run without GPUs.
        yield Finding(
            "accelerator_count",
            f"accelerator_type is {accelerator} but accelerator_count is 0 (the job would get no GPU)",
            f"set accelerator_count; {m.machine_type} takes {options}",
        )
    if accelerator is None and m.accelerator_count > 0:
        yield Finding(
            "accelerator_type",
            f"accelerator_count is {m.accelerator_count} but no accelerator_type is set",
            f"set accelerator_type; {m.machine_type} takes {options}",
        )


def _machines_taking(accelerator: str) -> str:
    names = [row.name for row in catalog.machines_for_accelerator(accelerator)]
    shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
    return f"{accelerator} goes on {shown}" if names else ""


def _not_supported(accelerator: str, machine_type: str) -> str:
    return f'Accelerator "{accelerator}" is not supported for machine type "{machine_type}"'


def accelerator_fits_machine(m: MachineChoice) -> Iterator[Finding]:
    accelerator = _accelerator(m)
    row = catalog.machine(m.machine_type)
    if accelerator is None or row is None or not catalog.known_accelerator(accelerator):
        return
    if accelerator in row.accelerators:
        return
    if accelerator == "NVIDIA_A100_80GB" and m.machine_type.startswith("a2-"):
        yield Finding(
            "accelerator_type",
            f"NVIDIA_A100_80GB goes only on a2-ultragpu machines, not on {m.machine_type}",
            f"{m.machine_type} has the 40GB A100: use NVIDIA_TESLA_A100, or an a2-ultragpu-*g for 80GB",
            api_message=_not_supported(accelerator, m.machine_type),
        )
        return
    if accelerator == "NVIDIA_TESLA_A100" and m.machine_type.startswith("a2-ultragpu"):
        yield Finding(
            "accelerator_type",
            f"{m.machine_type} has the 80GB A100 (NVIDIA_A100_80GB); NVIDIA_TESLA_A100 is the 40GB part",
            "use NVIDIA_A100_80GB, or an a2-highgpu-*g machine for the 40GB A100",
            api_message=_not_supported(accelerator, m.machine_type),
        )
        return
    if not row.accelerators:
        yield Finding(
            "accelerator_type",
            f"{m.machine_type} takes no accelerators",
            _join(_machines_taking(accelerator), "(`vertexdist machines --accelerator " + accelerator + "`)"),
            api_message=_not_supported(accelerator, m.machine_type),
        )
        return
    yield Finding(
        "accelerator_type",
        f"{m.machine_type} does not take {accelerator}; it takes {catalog.describe_options(m.machine_type)}",
        _machines_taking(accelerator),
        api_message=_not_supported(accelerator, m.machine_type),
    )


def accelerator_count_allowed(m: MachineChoice) -> Iterator[Finding]:
    accelerator = _accelerator(m)
    if accelerator is None or m.accelerator_count == 0:
        return
    counts = catalog.allowed_counts(m.machine_type, accelerator)
    if counts and m.accelerator_count not in counts:
        allowed = ", ".join(str(c) for c in counts)
        yield Finding(
            "accelerator_count",
            f"{m.machine_type} takes {allowed} x {accelerator}, not {m.accelerator_count}",
            f"set accelerator_count: {counts[-1] if len(counts) > 1 else counts[0]}"
            + ("" if len(counts) == 1 else f" (or {allowed})"),
            api_message=f"{m.accelerator_count} x {_not_supported(accelerator, m.machine_type)};"
            f" allowed counts: {allowed}",
        )


def gpu_machine_needs_its_gpus(m: MachineChoice) -> Iterator[Finding]:
    row = catalog.machine(m.machine_type)
    if row is None or not catalog.is_accelerator_optimized(m.machine_type) or _accelerator(m) is not None:
        return
    if m.accelerator_count > 0:
        return  # reported by accelerator_type_and_count_together
    accelerator, counts = next(iter(row.accelerators.items()))
    yield Finding(
        "accelerator_type",
        f"{m.machine_type} comes with {counts[0]} x {accelerator}, but the template names no accelerator",
        f"set accelerator_type: {accelerator} and accelerator_count: {counts[0]}",
    )


def a4x_needs_reservation(m: MachineChoice) -> Iterator[Finding]:
    row = catalog.machine(m.machine_type)
    if row is not None and "reservation" in row.note:
        yield Finding(
            "machine_type",
            f"{m.machine_type} {row.note}; vertexdist templates cannot name one yet",
            "the job will wait for capacity unless the project has a matching reservation",
            "warning",
        )


MachineRule = Callable[[MachineChoice], Iterator[Finding]]

MACHINE_RULES: tuple[MachineRule, ...] = (
    machine_type_known,
    accelerator_type_known,
    accelerator_type_and_count_together,
    accelerator_fits_machine,
    accelerator_count_allowed,
    gpu_machine_needs_its_gpus,
    a4x_needs_reservation,
)


def check_machine(m: MachineChoice) -> list[Finding]:
    """Every finding of every machine rule, errors and warnings, in rule order."""
    return [finding for rule in MACHINE_RULES for finding in rule(m)]
