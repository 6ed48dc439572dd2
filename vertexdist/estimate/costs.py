"""What a template's worker pools cost per hour on Vertex AI, on-demand and Spot, from the price table.

A tuning template runs its job once per trial: `max_trial_count` trials, each up to the template's timeout,
`parallel_trial_count` at a time, so the total is trials x the job's cost and the wall time is
ceil(trials / parallel) rounds of the timeout (upper bounds: early stopping and faster trials end sooner).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vertexdist.render import REDUCTION_SERVER_DISK
from vertexdist.spec import catalog, prices

if TYPE_CHECKING:
    from vertexdist.spec.models import JobTemplate

VERTEX_DEFAULT_TIMEOUT_HOURS = 7 * 24


@dataclass(frozen=True)
class PoolCost:
    """One worker pool: its machines, and what all its replicas cost per hour with their boot disks."""

    pool: int
    role: str
    machine_type: str
    replicas: int
    accelerator_type: str | None
    accelerator_count: int
    on_demand_per_hour: float | None
    spot_per_hour: float | None
    missing: tuple[str, ...] = ()

    def per_hour(self, strategy: str) -> float | None:
        return self.spot_per_hour if strategy == "SPOT" else self.on_demand_per_hour


@dataclass(frozen=True)
class CostEstimate:
    pools: tuple[PoolCost, ...]
    region: str
    strategy: str
    hours: float
    hours_from: str
    trials: int = 1
    parallel_trials: int = 1

    @property
    def is_tuning(self) -> bool:
        return self.trials > 1 or self.parallel_trials > 1

    @property
    def rounds(self) -> int:
        """How many times in a row trials start: ceil(trials / parallel)."""
        return math.ceil(self.trials / self.parallel_trials)

    @property
    def wall_hours(self) -> float:
        """Hours from the first trial's start to the last one's end when every trial runs its full time."""
        return self.rounds * self.hours

    @property
    def machine_hours(self) -> float:
        """Machine-hours of every pool of every trial."""
        return self.trials * self.hours * sum(p.replicas for p in self.pools)

    def total_for(self, per_hour: float | None) -> float | None:
        """What `per_hour` (one job's price per hour) comes to over every trial's hours."""
        return None if per_hour is None else per_hour * self.hours * self.trials

    @property
    def total(self) -> float | None:
        """The whole run (every trial of a tuning job) for the template's scheduling strategy."""
        return self.total_for(self.per_hour)

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(m for pool in self.pools for m in pool.missing)

    @property
    def on_demand_per_hour(self) -> float | None:
        return _total(p.on_demand_per_hour for p in self.pools)

    @property
    def spot_per_hour(self) -> float | None:
        return _total(p.spot_per_hour for p in self.pools)

    @property
    def per_hour(self) -> float | None:
        """The price for the template's own scheduling strategy (Spot for SPOT, on-demand otherwise)."""
        return _total(p.per_hour(self.strategy) for p in self.pools)

    @property
    def training_per_hour(self) -> float | None:
        """The GPU pools alone (0 and 1), for the template's strategy: the job without reducers."""
        return _total(p.per_hour(self.strategy) for p in self.pools if p.pool < 2)


def _total(values: Iterable[float | None]) -> float | None:
    """The sum, or None when any part has no price: a partial total would read as the whole."""
    total = 0.0
    for value in values:
        if value is None:
            return None
        total += value
    return total


def _pool(
    region: str,
    pool: int,
    role: str,
    machine_type: str,
    replicas: int,
    accelerator: tuple[str | None, int],
    disk: tuple[str, int],
) -> PoolCost:
    missing: list[str] = []
    price = prices.machine_price(machine_type, region)
    if price is None:
        where = prices.priced_regions(machine_type)
        missing.append(
            f"no price for {machine_type} in {region} in the price table"
            + (f" (priced in {', '.join(where[:4])}{', ...' if len(where) > 4 else ''})" if where else "")
        )
    accelerator_type, count = accelerator
    if accelerator_type and count and not catalog.is_accelerator_optimized(machine_type):
        missing.append(
            f"no price for {accelerator_type} attached to {machine_type}: the table prices built-in GPUs only"
        )
    disk_type, disk_gb = disk
    per_gb_hour = prices.disk_price_per_gb_hour(disk_type, region)
    if per_gb_hour is None:
        missing.append(f"no price for {disk_type} boot disks in {region}")
    if missing or price is None or per_gb_hour is None:
        return PoolCost(
            pool, role, machine_type, replicas, accelerator_type, count, None, None, tuple(missing)
        )
    disk_cost = disk_gb * per_gb_hour
    return PoolCost(
        pool, role, machine_type, replicas, accelerator_type, count,
        on_demand_per_hour=replicas * (price.on_demand + disk_cost),
        spot_per_hour=replicas * (price.spot + disk_cost),
    )  # fmt: skip


def reducer_pool(t: JobTemplate, count: int) -> PoolCost:
    """Pool 2 with `count` reduction servers of the template's reducer machine and Vertex's default disk."""
    disk = (str(REDUCTION_SERVER_DISK["bootDiskType"]), int(str(REDUCTION_SERVER_DISK["bootDiskSizeGb"])))
    return _pool(t.location, 2, "reduction servers", t.reduction_server_machine_type, count, (None, 0), disk)


def pool_costs(t: JobTemplate) -> tuple[PoolCost, ...]:
    """Pool 0 (the primary), pool 1 (the other workers), pool 2 (the reduction servers)."""
    gpus = (t.accelerator_type, t.accelerator_count)
    disk = (t.boot_disk_type, t.boot_disk_size_gb)
    pools = [_pool(t.location, 0, "primary", t.machine_type, 1, gpus, disk)]
    if t.replica_count > 1:
        pools.append(_pool(t.location, 1, "workers", t.machine_type, t.replica_count - 1, gpus, disk))
    if t.reduction_server_count > 0:
        pools.append(reducer_pool(t, t.reduction_server_count))
    return tuple(pools)


def estimate_costs(t: JobTemplate, hours: float | None = None) -> CostEstimate:
    """The template's pools priced for its region, over `hours`, its timeout or Vertex's default 7 days.

    For a tuning template `hours` is each trial's, and the estimate counts its trials.
    """
    if hours is not None:
        span, source = hours, "--hours"
    elif t.timeout is not None:
        span, source = t.timeout / 3600, "the template's timeout"
    else:
        span, source = float(VERTEX_DEFAULT_TIMEOUT_HOURS), "Vertex's default timeout, 7 days"
    return CostEstimate(
        pools=pool_costs(t),
        region=t.location,
        strategy=t.scheduling_strategy or "STANDARD",
        hours=span,
        hours_from=source,
        trials=t.tuning.max_trial_count if t.tuning else 1,
        parallel_trials=min(t.tuning.parallel_trial_count, t.tuning.max_trial_count) if t.tuning else 1,
    )


# Vertex's boot disk when a pool's diskSpec names none (https://cloud.google.com/vertex-ai/docs/reference/rest/v1/DiskSpec).
DEFAULT_DISK = ("pd-ssd", 100)
POOL_ROLES = ("primary", "workers", "reduction servers", "evaluators")


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def job_spec_costs(spec: Mapping[str, Any], region: str) -> CostEstimate:
    """A submitted job's pools (its CustomJobSpec, camelCase) priced for `region`: what the job costs per
    hour on Vertex, on its own scheduling strategy. `hours` is 0: the caller knows how long it ran."""
    pools = []
    raw_pools = spec.get("workerPoolSpecs")
    for index, raw in enumerate(raw_pools if isinstance(raw_pools, list) else []):
        if not isinstance(raw, Mapping) or _int(raw.get("replicaCount")) < 1:
            continue
        machine = raw.get("machineSpec") or {}
        disk = raw.get("diskSpec") or {}
        accelerator = str(machine.get("acceleratorType") or "")
        pools.append(
            _pool(
                region,
                index,
                POOL_ROLES[index] if index < len(POOL_ROLES) else f"pool {index}",
                str(machine.get("machineType") or ""),
                _int(raw.get("replicaCount")),
                (
                    None if accelerator in ("", "ACCELERATOR_TYPE_UNSPECIFIED") else accelerator,
                    _int(machine.get("acceleratorCount")),
                ),
                (
                    str(disk.get("bootDiskType") or DEFAULT_DISK[0]),
                    _int(disk.get("bootDiskSizeGb"), DEFAULT_DISK[1]) or DEFAULT_DISK[1],
                ),
            )
        )
    strategy = str((spec.get("scheduling") or {}).get("strategy") or "STANDARD")
    return CostEstimate(pools=tuple(pools), region=region, strategy=strategy, hours=0.0, hours_from="the job")


def cost_so_far(spec: Mapping[str, Any], region: str, seconds: float) -> float | None:
    """What `seconds` of the job cost on Vertex at the price table's prices; None where a part is unpriced."""
    per_hour = job_spec_costs(spec, region).per_hour
    return None if per_hour is None else per_hour * max(0.0, seconds) / 3600
