"""The one lookup module over the price table (`prices_data`): Vertex training prices per machine and disk."""

from __future__ import annotations

from typing import NamedTuple

from vertexdist.spec.prices_data import (
    DISK_PRICES_PER_GB_MONTH,
    HOURS_PER_MONTH,
    MACHINE_PRICES,
    PRICES_READ_ON,
    PRICES_SOURCE_URL,
    VERTEX_MANAGEMENT_FEE,
)

BASIS = (
    f"Compute Engine list prices (Cloud Billing catalog, {PRICES_READ_ON}) plus Vertex AI's"
    f" {VERTEX_MANAGEMENT_FEE:.0%} management fee; Spot = Compute Engine Spot + the same fee"
)


class MachinePrice(NamedTuple):
    """Vertex AI training USD per hour for one replica of a machine type in one region."""

    on_demand: float
    spot: float


def machine_price(machine_type: str, region: str) -> MachinePrice | None:
    """What Vertex training bills per hour for one machine, or None when the table has no price there."""
    row = MACHINE_PRICES.get(machine_type, {}).get(region)
    if row is None:
        return None
    on_demand, spot = row
    fee = VERTEX_MANAGEMENT_FEE * on_demand
    return MachinePrice(on_demand=on_demand + fee, spot=spot + fee)


def disk_price_per_gb_hour(disk_type: str, region: str) -> float | None:
    """Vertex training USD per GB-hour of a boot disk, or None when the table has no price for it."""
    per_month = DISK_PRICES_PER_GB_MONTH.get(disk_type, {}).get(region)
    if per_month is None:
        return None
    return per_month * (1 + VERTEX_MANAGEMENT_FEE) / HOURS_PER_MONTH


def priced_regions(machine_type: str) -> list[str]:
    return sorted(MACHINE_PRICES.get(machine_type, {}))


def source_line() -> str:
    """One line naming the prices' basis, date and source, for the foot of a report."""
    return f"prices: {BASIS}; source {PRICES_SOURCE_URL}"
