"""Costs per pool, the all-reduce per template, and the advice drawn from them."""

from __future__ import annotations

import pytest

from vertexdist.estimate.advice import Advice
from vertexdist.estimate.communication import estimate_communication
from vertexdist.estimate.costs import estimate_costs
from vertexdist.estimate.report import Gradients, build_estimate, to_json
from vertexdist.spec import JobTemplate, load_template

from .conftest import REPO_ROOT, MakeTemplate

FEE = 1.15
A2_ULTRA_8G, N1_HIGHCPU_16, PD_SSD = 40.221616, 0.566789, 0.17  # us-central1 rows of the price table
DISK_HOUR = PD_SSD * FEE / 730


def messages(advice: tuple[Advice, ...] | list[Advice], level: str) -> list[str]:
    return [a.message for a in advice if a.level == level]


def test_done_check_template_costs_by_pool(done_check_template: JobTemplate) -> None:
    costs = estimate_costs(done_check_template)
    assert [(p.pool, p.role, p.replicas) for p in costs.pools] == [
        (0, "primary", 1), (1, "workers", 3), (2, "reduction servers", 13),
    ]  # fmt: skip
    gpu_node = A2_ULTRA_8G * FEE + 500 * DISK_HOUR
    reducers = 13 * (N1_HIGHCPU_16 * FEE + 100 * DISK_HOUR)
    assert costs.pools[1].on_demand_per_hour == pytest.approx(3 * gpu_node)
    assert costs.pools[2].on_demand_per_hour == pytest.approx(reducers)
    assert costs.on_demand_per_hour == pytest.approx(4 * gpu_node + reducers)
    assert costs.per_hour == costs.on_demand_per_hour  # no scheduling_strategy: on-demand
    assert costs.spot_per_hour is not None and costs.spot_per_hour < costs.on_demand_per_hour
    assert (costs.hours, costs.hours_from) == (72, "the template's timeout")
    assert costs.training_per_hour == pytest.approx(4 * gpu_node)


def test_hours_from_option_or_vertex_default(make_template: MakeTemplate) -> None:
    assert estimate_costs(make_template(), hours=5).hours == 5
    default = estimate_costs(make_template())
    assert (default.hours, default.hours_from) == (168, "Vertex's default timeout, 7 days")


def test_spot_strategy_prices_spot(make_template: MakeTemplate) -> None:
    costs = estimate_costs(make_template(scheduling_strategy="SPOT"))
    assert costs.per_hour == costs.spot_per_hour


def test_unpriced_machine_and_disk_say_so(make_template: MakeTemplate) -> None:
    t = make_template(machine_type="a3-ultragpu-8g", accelerator_type="NVIDIA_H200_141GB", replica_count=2)
    costs = estimate_costs(t)
    assert costs.per_hour is None and costs.on_demand_per_hour is None
    assert any("no price for a3-ultragpu-8g in us-central1" in m for m in costs.missing)
    assert any("hyperdisk-balanced" in m for m in costs.missing)
    advice = build_estimate(t, None).advice
    assert any("no price for a3-ultragpu-8g" in m for m in messages(advice, "warning"))


def test_attached_gpus_have_no_price(make_template: MakeTemplate) -> None:
    t = make_template(machine_type="n1-standard-8", accelerator_type="NVIDIA_TESLA_T4", accelerator_count=1)
    costs = estimate_costs(t)
    assert costs.per_hour is None
    assert any("NVIDIA_TESLA_T4 attached to n1-standard-8" in m for m in costs.missing)


def test_done_check_template_all_reduce(done_check_template: JobTemplate) -> None:
    comm = estimate_communication(done_check_template, 1.3e9 * 4)
    # S/B = 5.2e9 / 12.5e9 = 0.416 s; ring over 4 nodes 1.5x that; NVLink 2*7/8 * 5.2e9 / 300e9.
    assert comm.inter_node_ring_s == pytest.approx(0.624)
    assert comm.intra_node_s == pytest.approx(1.75 * 5.2e9 / 300e9)
    assert comm.ring_s == pytest.approx(0.624)
    # 13 x 32 Gbps = 416 >= 400 Gbps, so S/B_node.
    assert (comm.reducers_needed, comm.reducers_used) == (13, 13)
    assert comm.reduction_server_s == pytest.approx(0.416)
    assert comm.buckets == 199  # 5.2e9 / 25 MiB
    assert comm.latency_s == pytest.approx(199 * 0.15e-3 * 2)  # log2(4) = 2


def test_unknown_network_is_named_not_zero(make_template: MakeTemplate) -> None:
    t = make_template(machine_type="a3-highgpu-1g", accelerator_type="NVIDIA_H100_80GB", accelerator_count=1,
                      replica_count=2)  # fmt: skip
    comm = estimate_communication(t, 1e9)
    assert comm.ring_s is None
    assert any("no network bandwidth known for a3-highgpu-1g" in m for m in comm.unknown)


def test_single_node_is_nvlink_only(make_template: MakeTemplate) -> None:
    comm = estimate_communication(make_template(replica_count=1), 1.4e9)
    assert comm.ring_s == pytest.approx(1.75 * 1.4e9 / 300e9)
    assert comm.latency_s == 0.0 and comm.reducers_used == 0 and comm.reduction_server_s is None


def test_matching_reducers_are_ok_and_priced(done_check_template: JobTemplate) -> None:
    advice = build_estimate(done_check_template, Gradients(5.2e9)).advice
    assert messages(advice, "ok") == ["13 x n1-highcpu-16 (416 Gbps) cover the 4 nodes' 400 Gbps"]
    [pays] = [m for m in messages(advice, "info") if "pay for themselves while" in m]
    assert "13 reducers add $8.82/h (+4.8%)" in pays and "624 ms to 416 ms (1.50x)" in pays


def test_no_reducers_at_four_nodes_suggests_them(make_template: MakeTemplate) -> None:
    e = build_estimate(make_template(), Gradients(5.2e9))
    assert e.comm is not None and e.comm.reducers_used == 13
    info = messages(e.advice, "info")
    assert any(m.startswith("reduction servers: 13 x n1-highcpu-16 (416 Gbps) would cover") for m in info)
    assert to_json(e)["allreduce_reduction_server_s"] == pytest.approx(0.416)


def test_too_few_reducers_warn(make_template: MakeTemplate) -> None:
    e = build_estimate(make_template(reduction_server_count=4), Gradients(5.2e9))
    assert any("use 13" in m for m in messages(e.advice, "warning"))
    assert e.comm is not None and e.comm.reduction_server_s == pytest.approx(4 * 5.2e9 / (4 * 4e9))


def test_too_many_reducers_say_how_many_fewer(make_template: MakeTemplate) -> None:
    e = build_estimate(make_template(reduction_server_count=20), Gradients(5.2e9))
    assert any("7 fewer would do, saving $" in m for m in messages(e.advice, "info"))


def test_reducers_at_two_nodes_gain_nothing(make_template: MakeTemplate) -> None:
    e = build_estimate(make_template(replica_count=2, reduction_server_count=4), Gradients(5.2e9))
    [warning] = [m for m in messages(e.advice, "warning") if "gain nothing" in m]
    assert "at 2 nodes" in warning and "remove them" in warning


def test_step_compute_decides_pay_and_bound(done_check_template: JobTemplate) -> None:
    short = build_estimate(done_check_template, Gradients(5.2e9, 1.3e9, 4), compute_s=0.4)
    assert any(m.startswith("communication-bound") and "bf16" in m for m in messages(short.advice, "warning"))
    assert any("so they pay for themselves" in m for m in messages(short.advice, "ok"))
    data = to_json(short)
    # 0.4 s compute hides 0.267 s; 0.416 + 0.0597 s latency leaves 0.209 s out, plus the last bucket.
    expected = 0.4 + (0.416 + 0.0597 - 0.4 * 2 / 3) + 0.0024
    assert data["step_reduction_server_s"] == pytest.approx(expected, abs=2e-4)
    assert data["scaling_efficiency_reduction_server"] > data["scaling_efficiency_ring"]
    long = build_estimate(done_check_template, Gradients(5.2e9, 1.3e9, 4), compute_s=30.0)
    assert any("hides behind backward" in m for m in messages(long.advice, "ok"))
    assert any("do not pay for themselves" in m for m in messages(long.advice, "warning"))


def test_json_has_the_issue_keys(done_check_template: JobTemplate) -> None:
    data = to_json(build_estimate(done_check_template, Gradients(5.2e9)))
    pools = sum(p["on_demand_usd_per_hour"] for p in data["pools"])
    assert data["cost_per_hour_usd"] == pytest.approx(pools, rel=1e-4)
    assert data["allreduce_ring_s"] == pytest.approx(0.624)
    assert data["allreduce_reduction_server_s"] == pytest.approx(0.416)
    assert data["recommended_reduction_servers"] == 13
    assert data["cost_total_usd"] == pytest.approx(data["cost_per_hour_usd"] * 72, abs=0.05)
    without = to_json(build_estimate(done_check_template, None))
    assert without["allreduce_ring_s"] is None and without["cost_per_hour_usd"] == data["cost_per_hour_usd"]


TUNE_TEMPLATE = REPO_ROOT / "job_templates" / "cpu-tune.yaml"


def test_tuning_prices_every_trial_and_the_wall_time_from_parallel_trials() -> None:
    # Issue 27 item 3: 8 trials of up to 30 min, 2 at a time, each on an n1-standard-4; not one 0.5 h job.
    costs = estimate_costs(load_template(TUNE_TEMPLATE))
    assert (costs.trials, costs.parallel_trials, costs.hours) == (8, 2, 0.5)
    assert costs.wall_hours == 2.0  # ceil(8 / 2) rounds of 30 min
    assert costs.machine_hours == 4.0  # 8 trials x 1 machine x 0.5 h
    per_hour = costs.per_hour
    assert per_hour is not None
    assert costs.total == pytest.approx(8 * 0.5 * per_hour)
    data = to_json(build_estimate(load_template(TUNE_TEMPLATE), None))
    assert data["cost_total_usd"] == pytest.approx(round(8 * 0.5 * per_hour, 2))
    assert data["tuning"] == {
        "trials": 8,
        "parallel_trials": 2,
        "trial_hours": 0.5,
        "wall_hours": 2.0,
        "machine_hours": 4.0,
        "cost_per_trial_usd": pytest.approx(round(0.5 * per_hour, 2)),
    }


def test_uneven_rounds_round_up(make_template: MakeTemplate) -> None:
    tuning = {
        "metric_spec": {"acc": "maximize"},
        "parameter_spec": {"lr": {"type": "double", "min": 0.001, "max": 0.1}},
        "max_trial_count": 5,
        "parallel_trial_count": 2,
    }
    costs = estimate_costs(make_template(tuning=tuning, timeout="1h"))
    assert (costs.trials, costs.wall_hours, costs.machine_hours) == (5, 3.0, 5 * 4)  # 3 rounds; 4 machines


def test_a_job_without_tuning_is_one_run(make_template: MakeTemplate) -> None:
    costs = estimate_costs(make_template(timeout="2h"))
    assert (costs.trials, costs.parallel_trials, costs.wall_hours) == (1, 1, 2.0)
    assert to_json(build_estimate(make_template(), None))["tuning"] is None
