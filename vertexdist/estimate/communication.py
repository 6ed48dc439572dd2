"""How long a template's gradient all-reduce takes per step, with and without reduction servers.

Applies `formulas` to the template's machines using the link speeds in `hardware`. A term whose link speed
is not known is left out and named in `unknown`; the all-reduce times then stay lower bounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from vertexdist.estimate import formulas, hardware

if TYPE_CHECKING:
    from vertexdist.spec.models import JobTemplate


@dataclass(frozen=True)
class CommEstimate:
    gradient_bytes: float
    nodes: int
    gpus_per_node: int
    node_gbps: float | None
    reducer_machine_type: str
    reducer_gbps: float | None
    intra_node_s: float | None
    inter_node_ring_s: float | None
    reducers_needed: int
    reducers_used: int
    reduction_server_inter_s: float | None
    buckets: int
    alpha_s: float
    unknown: tuple[str, ...]

    @property
    def latency_s(self) -> float:
        return formulas.latency_s(self.gradient_bytes, hardware.DDP_BUCKET_BYTES, self.alpha_s)

    @property
    def ring_s(self) -> float | None:
        """The all-reduce without reducers: the slower of the NVLink and network rings.

        None when the network speed is unknown; an unknown NVLink speed leaves the network ring alone, still a
        lower bound (`unknown` says so).
        """
        return _slowest(self.intra_node_s, self.inter_node_ring_s)

    @property
    def reduction_server_s(self) -> float | None:
        return _slowest(self.intra_node_s, self.reduction_server_inter_s)

    def step_on_ring(self, compute_s: float) -> float:
        """One step with the all-reduce on a ring; callers check `ring_s` is known first."""
        ring = self.ring_s
        assert ring is not None
        return self._step(compute_s, ring)

    def step_with_reducers(self, compute_s: float) -> float:
        """One step with the all-reduce through the reducers; callers check `reduction_server_s` first."""
        rs = self.reduction_server_s
        assert rs is not None
        return self._step(compute_s, rs)

    def _step(self, compute_s: float, allreduce_s: float) -> float:
        bucket = hardware.DDP_BUCKET_BYTES
        last = formulas.last_bucket_s(self.gradient_bytes, allreduce_s, bucket, self.alpha_s)
        return formulas.step_time_s(compute_s, allreduce_s, self.latency_s, last)


def _slowest(intra: float | None, inter: float | None) -> float | None:
    if inter is None:
        return None
    return max(inter, intra or 0.0)


def estimate_communication(
    t: JobTemplate, gradient_bytes: float, reduction_servers: int | None = None
) -> CommEstimate:
    """The all-reduce of `gradient_bytes` per step on the template's nodes.

    Reducers in the estimate: `reduction_servers` if given, else the template's, else (from 3 nodes up) the
    count that covers the workers' egress, so a template without reducers still shows what they would do.
    """
    nodes = t.replica_count
    gpus = max(1, t.accelerator_count)
    unknown: list[str] = []

    intra: float | None = 0.0
    if gpus > 1:
        nvlink = hardware.nvlink_bytes_per_s(t.accelerator_type)
        intra = formulas.ring_allreduce_s(gradient_bytes, gpus, nvlink) if nvlink else None
        if nvlink is None:
            unknown.append(
                f"no NVLink/PCIe speed known for {t.accelerator_type}: the intra-node time is left out"
            )

    node_gbps = hardware.node_network_gbps(t.machine_type)
    inter: float | None = 0.0
    if nodes > 1:
        if node_gbps is None:
            inter = None
            unknown.append(
                f"no network bandwidth known for {t.machine_type}: the inter-node time is left out"
            )
        else:
            inter = formulas.ring_allreduce_s(gradient_bytes, nodes, formulas.gbps_to_bytes_per_s(node_gbps))

    reducer_gbps = hardware.egress_gbps(t.reduction_server_machine_type)
    needed = 0
    if nodes >= 3 and node_gbps is not None and reducer_gbps:
        needed = formulas.reducers_to_cover(nodes, node_gbps, reducer_gbps)
    used = reduction_servers if reduction_servers is not None else t.reduction_server_count or needed
    rs_inter: float | None = None
    if used > 0 and nodes > 1 and node_gbps is not None and reducer_gbps:
        rs_inter = formulas.reduction_server_s(
            gradient_bytes, nodes, formulas.gbps_to_bytes_per_s(node_gbps),
            used, formulas.gbps_to_bytes_per_s(reducer_gbps),
        )  # fmt: skip
    elif used > 0 and reducer_gbps is None:
        unknown.append(f"no egress known for {t.reduction_server_machine_type}: reducers are left out")

    return CommEstimate(
        gradient_bytes=gradient_bytes,
        nodes=nodes,
        gpus_per_node=gpus,
        node_gbps=node_gbps,
        reducer_machine_type=t.reduction_server_machine_type,
        reducer_gbps=reducer_gbps,
        intra_node_s=intra,
        inter_node_ring_s=inter,
        reducers_needed=needed,
        reducers_used=used,
        reduction_server_inter_s=rs_inter,
        buckets=formulas.bucket_count(gradient_bytes, hardware.DDP_BUCKET_BYTES),
        alpha_s=formulas.latency_per_bucket_s(nodes, hardware.LATENCY_TWO_NODES_S),
        unknown=tuple(unknown),
    )
