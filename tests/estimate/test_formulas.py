"""Each formula against a hand-computed case, the worked-example table and the measured 2-node run of
docs/reference/perf-reliability.md §(b)."""

from __future__ import annotations

import math

import pytest

from vertexdist.estimate import formulas, hardware

GIB = 2**30


def ms(seconds: float) -> int:
    """Milliseconds rounded half up, as the reference's table rounds (24.5 -> 25)."""
    return math.floor(seconds * 1e3 + 0.5)


def test_ring_allreduce_is_2_n_minus_1_over_n_times_s_over_b() -> None:
    # 1.4 GB over 4 ranks on 12.5 GB/s links: 2*3/4 * 0.112 s.
    assert formulas.ring_allreduce_s(1.4e9, 4, 12.5e9) == pytest.approx(0.168)
    assert formulas.ring_allreduce_s(1.4e9, 2, 12.5e9) == pytest.approx(0.112)
    assert formulas.ring_allreduce_s(1.4e9, 1, 12.5e9) == 0.0


def test_hierarchical_is_the_slower_of_nvlink_and_network() -> None:
    # intra: 2*7/8 * 1.4e9 / 300e9 = 8.17 ms; inter: 2*1/2 * 1.4e9 / 12.5e9 = 112 ms.
    assert formulas.hierarchical_allreduce_s(1.4e9, 2, 8, 300e9, 12.5e9) == pytest.approx(0.112)
    # One node: only the NVLink ring is left.
    one_node = formulas.hierarchical_allreduce_s(1.4e9, 1, 8, 300e9, 12.5e9)
    assert one_node == pytest.approx(1.75 * 1.4e9 / 300e9)


@pytest.mark.parametrize(
    ("machine", "accelerator", "peak_flops", "t_c", "intra", "inter", "rs"),
    [
        ("a2-highgpu-8g", "NVIDIA_TESLA_A100", 312e12, 69, 8, (112, 168, 196), 112),
        ("a3-highgpu-8g", "NVIDIA_H100_80GB", 989e12, 22, 5, (14, 21, 25), 14),
        ("a3-megagpu-8g", "NVIDIA_H100_MEGA_80GB", 989e12, 22, 5, (7, 11, 12), 7),
    ],
)  # fmt: skip
def test_worked_example_rows(
    machine: str, accelerator: str, peak_flops: float, t_c: int, intra: int, inter: tuple[int, ...], rs: int
) -> None:
    """P = 350M, fp32 gradients (S = 1.4 GB), 4096 tokens per GPU, MFU 0.4, link speeds from `hardware`."""
    size = 350e6 * 4
    nvlink = hardware.nvlink_bytes_per_s(accelerator)
    node_gbps = hardware.node_network_gbps(machine)
    assert nvlink is not None and node_gbps is not None
    node = formulas.gbps_to_bytes_per_s(node_gbps)
    assert ms(formulas.compute_time_s(350e6, 4096, peak_flops, 0.4)) == t_c
    assert ms(formulas.ring_allreduce_s(size, 8, nvlink)) == intra
    assert tuple(ms(formulas.ring_allreduce_s(size, n, node)) for n in (2, 4, 8)) == inter
    for nodes in (2, 4, 8):  # "RS (any N)": with enough n1-highcpu-16 reducers, S/B_node
        reducers = formulas.reducers_to_cover(nodes, node_gbps, 32.0)
        reducer = formulas.gbps_to_bytes_per_s(32.0)
        assert ms(formulas.reduction_server_s(size, nodes, node, reducers, reducer)) == rs


def test_measured_two_a3_mega_nodes() -> None:
    """The model says 43 ms for 8 GiB on 2 x a3-megagpu-8g; nccl-tests measured 47.5 ms (about 90% of it)."""
    size = 8 * GIB
    nvlink = hardware.nvlink_bytes_per_s("NVIDIA_H100_MEGA_80GB")
    assert nvlink is not None
    model = formulas.hierarchical_allreduce_s(size, 2, 8, nvlink, formulas.gbps_to_bytes_per_s(1600))
    assert ms(model) == 43
    assert 0.9 <= model / 47.5e-3 <= 1.0


def test_reduction_server_gain_is_2_n_minus_1_over_n() -> None:
    assert [formulas.reduction_server_gain(n) for n in (1, 2, 4, 8)] == [1.0, 1.0, 1.5, 1.75]


def test_short_reducers_set_the_pace() -> None:
    # 4 nodes x 50 Gbps (a2-highgpu-4g) through 4 x 32 Gbps: 4 * 1.4e9 / (4 * 4e9) = 0.35 s, not S/B 0.224 s.
    node, reducer = formulas.gbps_to_bytes_per_s(50), formulas.gbps_to_bytes_per_s(32)
    assert formulas.reduction_server_s(1.4e9, 4, node, 4, reducer) == pytest.approx(0.35)
    assert formulas.reduction_server_s(1.4e9, 4, node, 7, reducer) == pytest.approx(0.224)
    with pytest.raises(ValueError, match="at least one reducer"):
        formulas.reduction_server_s(1.4e9, 4, node, 0, reducer)


def test_reducers_to_cover() -> None:
    assert formulas.reducers_to_cover(4, 50, 32) == 7  # the validate rule's 200 Gbps case
    assert formulas.reducers_to_cover(4, 100, 32) == 13  # the shipped a2-ultragpu-8g-rs template
    assert formulas.reducers_to_cover(4, 100, 25) == 16  # exact ratios do not round up once more


def test_latency_floor() -> None:
    """1.4 GB in 25 MB buckets is 56 buckets: a 7-9 ms floor at 0.125-0.16 ms each (reference §(b) 3)."""
    assert formulas.bucket_count(1.4e9, 25e6) == 56
    assert 7e-3 <= formulas.latency_s(1.4e9, 25e6, 0.125e-3) <= 9e-3
    assert 7e-3 <= formulas.latency_s(1.4e9, 25e6, 0.16e-3) <= 9e-3
    # DDP's buckets are 25 MiB: 1.4e9 / 26214400 = 53.4 -> 54.
    assert formulas.bucket_count(1.4e9, hardware.DDP_BUCKET_BYTES) == 54
    assert formulas.latency_per_bucket_s(1, 0.15e-3) == 0.0
    assert formulas.latency_per_bucket_s(2, 0.15e-3) == pytest.approx(0.15e-3)
    assert formulas.latency_per_bucket_s(8, 0.15e-3) == pytest.approx(0.45e-3)


def test_step_time_and_efficiency() -> None:
    # T_c 120 ms hides 80 ms of all-reduce; 50 + 10 ms fit, so only the last bucket (2 ms) shows.
    assert formulas.step_time_s(0.12, 0.05, 0.01, 0.002) == pytest.approx(0.122)
    # 200 + 10 ms do not: 130 ms stick out.
    step = formulas.step_time_s(0.12, 0.2, 0.01, 0.002)
    assert step == pytest.approx(0.252)
    assert formulas.scaling_efficiency(0.12, step) == pytest.approx(0.12 / 0.252)
    assert formulas.compute_to_hide_s(0.2, 0.01) == pytest.approx(0.315)
    assert formulas.last_bucket_s(1e9, 0.4, 25e6, 1e-4) == pytest.approx(0.4 * 0.025 + 1e-4)


def test_break_even_compute() -> None:
    # (T + 1) >= 1.1 (T + 0.5) while T <= 4.5 s.
    limit = formulas.break_even_compute_s(1.1, lambda t: t + 1.0, lambda t: t + 0.5)
    assert limit == pytest.approx(4.5, rel=1e-6)
    # Costing 3x for at most a 2x faster step never pays; costing nothing more always does.
    assert formulas.break_even_compute_s(3.0, lambda t: t + 1.0, lambda t: t + 0.5) is None
    assert formulas.break_even_compute_s(1.0, lambda t: t + 1.0, lambda t: t + 0.5) == 3600.0
