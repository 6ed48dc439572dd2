"""The whole estimate for one template: costs, the all-reduce, advice; and its JSON form for scripts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vertexdist.estimate.advice import Advice, advise
from vertexdist.estimate.communication import CommEstimate, estimate_communication
from vertexdist.estimate.costs import CostEstimate, estimate_costs
from vertexdist.estimate.memory import STRATEGIES, MemoryPlan, memory_advice, usable_strategies
from vertexdist.estimate.reserved import reserved_cost
from vertexdist.estimate.spot import (
    DEFAULT_PREEMPTIONS_PER_HOUR,
    RECOMPUTED_MINUTES,
    RESTART_MINUTES,
    SpotExpectation,
    expect_spot,
)
from vertexdist.spec import prices
from vertexdist.spec.prices_data import PRICES_READ_ON, PRICES_SOURCE_URL

if TYPE_CHECKING:
    from vertexdist.spec.models import JobTemplate


@dataclass(frozen=True)
class Gradients:
    """What every step all-reduces: S bytes, from a parameter count and bytes per parameter or given as is."""

    size_bytes: float
    params: float | None = None
    bytes_per_param: int | None = None


@dataclass(frozen=True)
class Estimate:
    template: JobTemplate
    costs: CostEstimate
    gradients: Gradients | None
    comm: CommEstimate | None
    compute_s: float | None
    advice: tuple[Advice, ...]
    memory: MemoryPlan | None = None
    spot: SpotExpectation | None = None
    spot_from: str = "default"  # where the preemption rate and the time lost per preemption came from

    @property
    def spot_expected_total(self) -> float | None:
        """The whole run on Spot with its expected preemptions (recomputed work and start-ups included)."""
        spot_total = self.costs.total_for(self.costs.spot_per_hour)
        if spot_total is None or self.spot is None or self.spot.spot_hours is None:
            return None
        return spot_total * self.spot.spot_hours / self.spot.hours


def build_estimate(
    t: JobTemplate,
    gradients: Gradients | None,
    compute_s: float | None = None,
    hours: float | None = None,
    memory: MemoryPlan | None = None,
    preemptions_per_hour: float = DEFAULT_PREEMPTIONS_PER_HOUR,
    *,
    recomputed_minutes: float = RECOMPUTED_MINUTES,
    restart_minutes: float = RESTART_MINUTES,
    spot_from: str = "default",
) -> Estimate:
    """Costs, the all-reduce (with `gradients`) and the memory plan (with `memory`), and their advice."""
    costs = estimate_costs(t, hours)
    comm = estimate_communication(t, gradients.size_bytes) if gradients else None
    bytes_per_param = gradients.bytes_per_param if gradients else None
    advice = advise(t, comm, costs, compute_s, bytes_per_param)
    if memory is not None:
        advice = memory_advice(memory, usable_strategies(t)) + advice
        if bytes_per_param == 4:
            advice.append(
                Advice(
                    "info",
                    "the all-reduce counts fp32 gradients, the memory plan bf16/fp16 ones (mixed precision):"
                    " pass --grad-dtype bf16 to time a mixed-precision step",
                )
            )
    spot = expect_spot(costs.hours, preemptions_per_hour, recomputed_minutes, restart_minutes)
    return Estimate(t, costs, gradients, comm, compute_s, tuple(advice), memory, spot, spot_from)


def _round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(value, digits)


def _times(e: Estimate) -> dict[str, Any]:
    comm = e.comm
    if comm is None:
        keys = ("allreduce_ring_s", "allreduce_reduction_server_s", "recommended_reduction_servers")
        return dict.fromkeys(keys)
    times: dict[str, Any] = {
        "allreduce_ring_s": _round(comm.ring_s),
        "allreduce_reduction_server_s": _round(comm.reduction_server_s),
        "recommended_reduction_servers": comm.reducers_needed,
        "reduction_servers_in_estimate": comm.reducers_used,
        "allreduce_intra_node_s": _round(comm.intra_node_s),
        "allreduce_inter_node_ring_s": _round(comm.inter_node_ring_s),
        "latency_s": _round(comm.latency_s),
        "buckets": comm.buckets,
        "nodes": comm.nodes,
        "gpus_per_node": comm.gpus_per_node,
        "node_network_gbps": comm.node_gbps,
    }
    if e.compute_s is not None and comm.ring_s is not None:
        ring_step = comm.step_on_ring(e.compute_s)
        rs_step = comm.step_with_reducers(e.compute_s) if comm.reduction_server_s is not None else None
        times |= {
            "step_compute_s": e.compute_s,
            "step_ring_s": _round(ring_step),
            "step_reduction_server_s": _round(rs_step),
            "scaling_efficiency_ring": _round(e.compute_s / ring_step, 4),
            "scaling_efficiency_reduction_server": _round(e.compute_s / rs_step, 4) if rs_step else None,
        }
    return times


def _tuning(costs: CostEstimate) -> dict[str, Any] | None:
    """A tuning job's trials: how many, how many at once, their hours and the wall time they take."""
    if not costs.is_tuning:
        return None
    per_hour = costs.per_hour
    return {
        "trials": costs.trials,
        "parallel_trials": costs.parallel_trials,
        "trial_hours": costs.hours,
        "wall_hours": costs.wall_hours,
        "machine_hours": costs.machine_hours,
        "cost_per_trial_usd": _round(per_hour * costs.hours if per_hour is not None else None, 2),
    }


def _memory(plan: MemoryPlan | None) -> dict[str, Any]:
    """The issue's keys (`memory_per_gpu_gb`, `memory_fits`, `gpu_memory_gb`) and the plan behind them."""
    if plan is None:
        return {"memory_per_gpu_gb": None, "memory_fits": None, "gpu_memory_gb": None, "memory": None}
    shape = plan.layout
    return {
        "memory_per_gpu_gb": {s: _round(gb, 4) for s, gb in plan.per_gpu_gb.items()},
        "memory_fits": plan.fits,
        "gpu_memory_gb": plan.gpu_memory_gb,
        "memory": {
            "params": plan.params,
            "bytes_per_param": {"params": 2, "grads": 2, "optimizer": plan.optimizer_bytes},
            "headroom": plan.headroom,
            "usable_gb": _round(plan.usable_gb, 4),
            "gpus": shape.gpus,
            "data_parallel": shape.data_parallel,
            "tensor_parallel": shape.tensor,
            "pipeline_parallel": shape.pipeline,
            "parts_gb": {
                s: {k: _round(v / 1e9, 4) for k, v in vars(plan.parts(s)).items()} for s in STRATEGIES
            },
            "source": "Rajbhandari et al., ZeRO (SC 2020), arXiv:1910.02054, Figure 1 and Table 1",
        },
    }


def _reserved(e: Estimate) -> dict[str, Any] | None:
    reserved = reserved_cost(e.template, e.costs)
    if reserved is None:
        return None
    return {"id": reserved.resource_id, "idle_cost_per_hour_usd": _round(reserved.idle_per_hour, 4)}


def _spot(e: Estimate) -> dict[str, Any] | None:
    if e.spot is None:
        return None
    return {
        "preemptions_per_hour": e.spot.rate_per_hour,
        "rate_from": e.spot_from,
        "lost_hours_per_preemption": round(e.spot.lost_hours_per_preemption, 4),
        "expected_preemptions": _round(e.spot.preemptions, 2),
        "expected_spot_hours": _round(e.spot.spot_hours, 2),
        "expected_cost_total_usd": _round(e.spot_expected_total, 2),
        "on_demand_cost_total_usd": _round(e.costs.total_for(e.costs.on_demand_per_hour), 2),
    }


def to_json(e: Estimate) -> dict[str, Any]:
    """The estimate as plain data; the keys named in the issue stay at the top level."""
    costs = e.costs
    per_hour = costs.per_hour
    return {
        "template": str(e.template.source_path) if e.template.source_path else None,
        "display_name": e.template.display_name,
        "region": costs.region,
        "scheduling_strategy": costs.strategy,
        "cost_per_hour_usd": _round(per_hour, 4),
        "cost_per_hour_on_demand_usd": _round(costs.on_demand_per_hour, 4),
        "cost_per_hour_spot_usd": _round(costs.spot_per_hour, 4),
        "hours": costs.hours,
        "hours_from": costs.hours_from,
        "cost_total_usd": _round(costs.total, 2),
        "spot_with_preemptions": _spot(e),
        "tuning": _tuning(costs),
        "persistent_resource": _reserved(e),
        "pools": [
            {
                "pool": p.pool,
                "role": p.role,
                "machine_type": p.machine_type,
                "replicas": p.replicas,
                "accelerator_type": p.accelerator_type,
                "accelerator_count": p.accelerator_count,
                "on_demand_usd_per_hour": _round(p.on_demand_per_hour, 4),
                "spot_usd_per_hour": _round(p.spot_per_hour, 4),
                "missing": list(p.missing),
            }
            for p in costs.pools
        ],
        "gradient_bytes": e.gradients.size_bytes if e.gradients else None,
        "params": e.gradients.params if e.gradients else None,
        **_times(e),
        **_memory(e.memory),
        "advice": [{"level": a.level, "message": a.message} for a in e.advice],
        "prices": {
            "basis": prices.BASIS,
            "source": PRICES_SOURCE_URL,
            "read_on": PRICES_READ_ON,
        },
    }
