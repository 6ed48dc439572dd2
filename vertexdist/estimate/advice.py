"""Advice from an estimate: how many reducers, whether they pay for themselves, if it is network-bound."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from vertexdist.estimate import formulas
from vertexdist.estimate.communication import CommEstimate
from vertexdist.estimate.costs import CostEstimate, reducer_pool
from vertexdist.estimate.units import format_seconds

if TYPE_CHECKING:
    from vertexdist.spec.models import JobTemplate

Level = Literal["warning", "info", "ok"]


@dataclass(frozen=True)
class Advice:
    level: Level
    message: str


def _money(value: float) -> str:
    return f"${value:,.2f}"


def _reducers_per_hour(t: JobTemplate, costs: CostEstimate, count: int) -> float | None:
    return reducer_pool(t, count).per_hour(costs.strategy) if count > 0 else 0.0


def reducer_sizing(t: JobTemplate, comm: CommEstimate, costs: CostEstimate) -> list[Advice]:
    """How many reducers cover the GPU nodes' egress, against what the template has."""
    have, need, nodes, machine = (
        t.reduction_server_count,
        comm.reducers_needed,
        comm.nodes,
        t.reduction_server_machine_type,
    )
    if nodes <= 2:
        if have == 0:
            return []
        extra = _reducers_per_hour(t, costs, have)
        cost = f" and add {_money(extra)}/h" if extra is not None else ""
        return [
            Advice(
                "warning",
                f"{have} reduction servers gain nothing at {nodes} node{'s' * (nodes != 1)}"
                f" (a ring already sends each gradient once){cost}: remove them",
            )
        ]
    if not need or comm.node_gbps is None or comm.reducer_gbps is None:
        return []
    workers = f"the {nodes} nodes' {nodes * comm.node_gbps:g} Gbps"
    covered = f"{need} x {machine} ({need * comm.reducer_gbps:g} Gbps) cover {workers}"
    if have == 0:
        would = f"{need} x {machine} ({need * comm.reducer_gbps:g} Gbps) would cover {workers}"
        return [Advice("info", f"reduction servers: {would}")]
    if have < need:
        given = f"{have} x {machine} give {have * comm.reducer_gbps:g} Gbps"
        return [Advice("warning", f"{given}, below {workers}: the reducers set the pace; use {need}")]
    if have > need:
        saving = _reducers_per_hour(t, costs, have - need)
        save = f", saving {_money(saving)}/h" if saving is not None else ""
        return [Advice("info", f"{covered}: {have - need} fewer would do{save}")]
    return [Advice("ok", covered)]


def reducers_pay(
    t: JobTemplate, comm: CommEstimate, costs: CostEstimate, compute_s: float | None
) -> list[Advice]:
    """Whether the reducers in the estimate lower the cost per step: step-time gain against price."""
    ring, rs, count = comm.ring_s, comm.reduction_server_s, comm.reducers_used
    if comm.nodes <= 2 or ring is None or rs is None or count == 0:
        return []
    speedup = f"the all-reduce goes from {format_seconds(ring)} to {format_seconds(rs)} ({ring / rs:.2f}x)"
    base, extra = costs.training_per_hour, _reducers_per_hour(t, costs, count)
    if base is None or extra is None:
        return [Advice("info", f"with {count} reducers {speedup}; there is no price to weigh it against")]
    ratio = (base + extra) / base
    price = f"{count} reducers add {_money(extra)}/h (+{ratio - 1:.1%})"
    if compute_s is not None:
        step_ring, step_rs = comm.step_on_ring(compute_s), comm.step_with_reducers(compute_s)
        per_1000_ring, per_1000_rs = base * step_ring / 3.6, (base + extra) * step_rs / 3.6
        pays = per_1000_rs < per_1000_ring
        return [
            Advice(
                "ok" if pays else "warning",
                f"{price} and {speedup}; a step takes {format_seconds(step_ring)}"
                f" -> {format_seconds(step_rs)}, so they {'pay' if pays else 'do not pay'} for themselves:"
                f" {_money(per_1000_ring)} -> {_money(per_1000_rs)} per 1000 steps",
            )
        ]
    limit = formulas.break_even_compute_s(ratio, comm.step_on_ring, comm.step_with_reducers)
    if limit is None:
        return [Advice("warning", f"{price} and {speedup}: they do not pay for themselves at any step time")]
    return [
        Advice(
            "info",
            f"{price} and {speedup}: they pay for themselves while a step computes less than"
            f" {format_seconds(limit)} (pass --step-compute to check yours)",
        )
    ]


def communication_bound(
    t: JobTemplate, comm: CommEstimate, compute_s: float | None, bytes_per_param: int | None
) -> list[Advice]:
    """Whether the template's own all-reduce (with its reducers, if any) hides behind backward."""
    with_reducers = t.reduction_server_count > 0 and comm.reduction_server_s is not None
    allreduce = comm.reduction_server_s if with_reducers else comm.ring_s
    if allreduce is None or comm.nodes * comm.gpus_per_node <= 1:
        return []
    total = allreduce + comm.latency_s
    if compute_s is None:
        need = formulas.compute_to_hide_s(allreduce, comm.latency_s)
        return [
            Advice(
                "info",
                f"the all-reduce ({format_seconds(total)} with latency) hides behind backward only if a step"
                f" computes at least {format_seconds(need)}; pass --step-compute for the scaling efficiency",
            )
        ]
    step_s = comm.step_with_reducers(compute_s) if with_reducers else comm.step_on_ring(compute_s)
    efficiency = formulas.scaling_efficiency(compute_s, step_s)
    if total <= formulas.overlap_window_s(compute_s):
        return [Advice("ok", f"the all-reduce hides behind backward; scaling efficiency {efficiency:.0%}")]
    fixes = []
    if bytes_per_param == 4:
        fixes.append("a bf16 gradient hook halves the bytes")
    if comm.nodes >= 3 and not with_reducers:
        fixes.append("reduction servers cut the network time")
    return [
        Advice(
            "warning",
            f"communication-bound: the all-reduce ({format_seconds(total)}) does not fit in backward"
            f" (2/3 of {format_seconds(compute_s)}); scaling efficiency {efficiency:.0%}"
            + (f"; {', '.join(fixes)}" if fixes else ""),
        )
    ]


def caveats(t: JobTemplate, comm: CommEstimate | None, costs: CostEstimate) -> list[Advice]:
    """What the figures leave out: missing prices, unknown link speeds, TCP-only NCCL on A2/G2, Flex-start."""
    notes = [Advice("warning", m) for m in costs.missing]
    if comm is not None:
        notes += [Advice("warning", m) for m in comm.unknown]
        if comm.nodes > 1 and t.machine_type.startswith(("a2-", "g2-")):
            notes.append(
                Advice(
                    "info",
                    f"{t.machine_type.split('-')[0].upper()} NCCL runs over TCP without GPUDirect: expect"
                    " well below these line-rate times; nccl-tests all_reduce_perf measures the real busbw",
                )
            )
    if costs.strategy == "FLEX_START":
        notes.append(
            Advice("info", "FLEX_START has its own, lower prices, not in the table: on-demand is shown")
        )
    return notes


PERSISTENT_RESOURCES = "https://cloud.google.com/vertex-ai/docs/training/persistent-resource-overview"


def restarts_start_warm(t: JobTemplate) -> list[Advice]:
    """A managed job (`recovery:`) on no persistent resource: every new attempt (a preemption's, a hang's
    retry) pays Vertex's provisioning and set-up again, the start-up the Spot figure counts per preemption.
    On a persistent resource the machines are already up, so an attempt starts on them at once: on Vertex,
    the warm start a managed local run gets from its controller's own pool."""
    if t.recovery is None or t.persistent_resource_id is not None:
        return []
    return [
        Advice(
            "info",
            "recovery: each new attempt provisions its machines again (minutes on Vertex; the Spot figure"
            " counts 10 per preemption); on a persistent resource (`persistent_resource_id:`, made by"
            " `vertexdist pool create ID --from` this template) it starts on machines already up, at the"
            f" resource's idle cost ({PERSISTENT_RESOURCES})",
        )
    ]


def advise(
    t: JobTemplate,
    comm: CommEstimate | None,
    costs: CostEstimate,
    compute_s: float | None,
    bytes_per_param: int | None,
) -> list[Advice]:
    if comm is None:
        return caveats(t, comm, costs) + restarts_start_warm(t)
    return (
        reducer_sizing(t, comm, costs)
        + reducers_pay(t, comm, costs, compute_s)
        + communication_bound(t, comm, compute_s, bytes_per_param)
        + caveats(t, comm, costs)
        + restarts_start_warm(t)
    )
