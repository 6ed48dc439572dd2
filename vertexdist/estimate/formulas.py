"""The DDP step-time model of docs/reference/perf-reliability.md §(b), as pure functions.

Units: bytes, seconds, bytes per second. Where each formula comes from:
- Ring all-reduce, best case: t = 2(n-1)/n · S/B (https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md).
- Hierarchical all-reduce on rail-aligned NICs, lower bound: max(2(g-1)/g · S/B_nvl, 2(N-1)/N · S/B_node)
  (§(b) 2): the intra-node ring over NVLink or the inter-node ring over the node's network, the slower.
- Reduction Server: each worker node sends S once and receives S once, so T ≈ S/B_node while the reducers'
  total egress covers the workers' (§(b) 4; Vertex's sizing rule in the reduction-server sample notebook).
  With fewer reducers their total bandwidth sets the pace: all N nodes' S goes through R·B_r.
- Latency: one α per DDP bucket, n_buckets = ceil(S / bucket) (§(b) 3).
- Compute: T_c = 6·P·tokens / (F·u) (Kaplan et al., arXiv 2001.08361; §(b) 1); backward, ≈ 2/3 of it, is the
  window the all-reduce can hide in.
- Step: T_step = T_c + max(0, T_ar + latency - 2/3·T_c) + T_last_bucket; efficiency = T_c / T_step (§(b) 5;
  the optimizer step is left inside the measured T_c).
"""

from __future__ import annotations

import math
from collections.abc import Callable

BYTES_PER_GBIT = 1e9 / 8


def gbps_to_bytes_per_s(gbps: float) -> float:
    return gbps * BYTES_PER_GBIT


def ring_allreduce_s(size_bytes: float, ranks: int, bandwidth_bytes_per_s: float) -> float:
    """Best-case ring all-reduce of S bytes over n ranks on links of B bytes/s: 2(n-1)/n · S/B."""
    if ranks <= 1:
        return 0.0
    return 2 * (ranks - 1) / ranks * size_bytes / bandwidth_bytes_per_s


def hierarchical_allreduce_s(
    size_bytes: float, nodes: int, gpus_per_node: int, nvlink_bytes_per_s: float, node_bytes_per_s: float
) -> float:
    """Lower bound of an all-reduce across N nodes of g GPUs: the slower of the NVLink and network rings."""
    intra = ring_allreduce_s(size_bytes, gpus_per_node, nvlink_bytes_per_s)
    inter = ring_allreduce_s(size_bytes, nodes, node_bytes_per_s)
    return max(intra, inter)


def reduction_server_s(
    size_bytes: float, nodes: int, node_bytes_per_s: float, reducers: int, reducer_bytes_per_s: float
) -> float:
    """Inter-node all-reduce through R reducers: S/B_node, or N·S/(R·B_r) when the reducers are slower."""
    if reducers < 1:
        raise ValueError("a reduction-server all-reduce needs at least one reducer")
    return max(size_bytes / node_bytes_per_s, nodes * size_bytes / (reducers * reducer_bytes_per_s))


def reduction_server_gain(nodes: int) -> float:
    """How much faster reducers make a bandwidth-bound all-reduce: 2(N-1)/N (1.0x at 2 nodes, 1.5x at 4)."""
    return 2 * (nodes - 1) / nodes if nodes > 1 else 1.0


def reducers_to_cover(nodes: int, node_gbps: float, reducer_gbps: float) -> int:
    """The fewest reducers whose total egress covers the GPU nodes': ceil(N·B_node / B_r)."""
    # A hair below the exact ratio so 4 x 100 / 25 gives 16, not 17, after float rounding.
    return max(1, math.ceil(nodes * node_gbps / reducer_gbps - 1e-9))


def bucket_count(size_bytes: float, bucket_bytes: float) -> int:
    return max(1, math.ceil(size_bytes / bucket_bytes))


def latency_per_bucket_s(nodes: int, two_node_latency_s: float) -> float:
    """α between nodes: the 2-node floor, growing with log2(N) like a tree all-reduce; 0 inside one node."""
    return two_node_latency_s * math.log2(nodes) if nodes > 1 else 0.0


def latency_s(size_bytes: float, bucket_bytes: float, alpha_s: float) -> float:
    """The per-step latency floor: one α per DDP bucket."""
    return bucket_count(size_bytes, bucket_bytes) * alpha_s if alpha_s > 0 else 0.0


def last_bucket_s(size_bytes: float, allreduce_s: float, bucket_bytes: float, alpha_s: float) -> float:
    """The last bucket's own all-reduce: it is ready only when backward ends, so nothing hides it."""
    share = min(1.0, bucket_bytes / size_bytes) if size_bytes > 0 else 0.0
    return allreduce_s * share + alpha_s


def compute_time_s(params: float, tokens_per_gpu: float, peak_flops: float, mfu: float) -> float:
    """Forward + backward time of one step: 6·P·tokens / (F·u)."""
    return 6 * params * tokens_per_gpu / (peak_flops * mfu)


def overlap_window_s(compute_s: float) -> float:
    """The part of a step the all-reduce can hide behind: backward, about 2/3 of the compute."""
    return 2 / 3 * compute_s


def step_time_s(compute_s: float, allreduce_s: float, latency_floor_s: float, last_bucket: float) -> float:
    """T_c + max(0, T_ar + latency - overlap) + T_last_bucket."""
    exposed = max(0.0, allreduce_s + latency_floor_s - overlap_window_s(compute_s))
    return compute_s + exposed + last_bucket


def scaling_efficiency(compute_s: float, step_s: float) -> float:
    return compute_s / step_s if step_s > 0 else 1.0


def compute_to_hide_s(allreduce_s: float, latency_floor_s: float) -> float:
    """The compute per step whose backward window (2/3 of it) is long enough to hide the all-reduce."""
    return 1.5 * (allreduce_s + latency_floor_s)


def break_even_compute_s(
    cost_ratio: float,
    step_without: Callable[[float], float],
    step_with: Callable[[float], float],
    upper_s: float = 3600.0,
) -> float | None:
    """The compute per step below which paying `cost_ratio` times more per hour lowers the cost per step.

    Cost per step is price x step time, so the extra machines pay while step_without/step_with >= cost_ratio.
    That ratio only falls as compute grows (compute dilutes the saving), so bisection finds the crossing.
    None when they never pay (not even with no compute at all).
    """

    def pays(compute_s: float) -> bool:
        return step_without(compute_s) >= cost_ratio * step_with(compute_s)

    low, high = 0.0, upper_s
    if not pays(low):
        return None
    if pays(high):
        return high
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if pays(middle) else (low, middle)
    return low
