"""`vertexdist estimate` as a user runs it: a real subprocess through the CLI's error boundary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import DONE_CHECK_TEMPLATE, REPO_ROOT


def vertexdist(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_GCE_CHECK": "true"}
    return subprocess.run(
        [sys.executable, "-m", "vertexdist.cli.main", *map(str, args)],
        capture_output=True, text=True, timeout=60, cwd=REPO_ROOT, env=env,
    )  # fmt: skip


def test_done_check_prints_cost_allreduce_and_advice() -> None:
    result = vertexdist("estimate", "job_templates/a2-ultragpu-8g-rs.yaml", "--params", "1.3B")
    assert result.returncode == 0, result.stderr
    out = " ".join(result.stdout.split())  # the terminal table wraps long advice lines
    for expected in (
        "Cost in us-central1",
        "2 reduction servers",  # pool 2
        "$194.38",  # total per hour, on-demand
        "total for 72 h",
        "(1.3B params x 4 B = 5.2 GB)",
        "all-reduce without reduction servers",
        "624 ms",
        "with 13 reduction servers",
        "416 ms",
        "Advice",
        "pay for themselves while a step computes less than",
        "2026-07-30",
    ):
        assert expected in out, expected


def test_json_for_scripts() -> None:
    args = ("--gradient-bytes", "5.2GB", "--step-compute", "400ms", "--hours", "10", "--format", "json")
    result = vertexdist("estimate", DONE_CHECK_TEMPLATE, *args)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert {"cost_per_hour_usd", "allreduce_ring_s", "allreduce_reduction_server_s",
            "recommended_reduction_servers"} <= set(data)  # fmt: skip
    assert data["cost_total_usd"] == pytest.approx(data["cost_per_hour_usd"] * 10, abs=0.01)
    assert data["allreduce_ring_s"] == pytest.approx(0.624)
    assert data["step_compute_s"] == pytest.approx(0.4)
    assert data["hours_from"] == "--hours"


def test_without_gradients_prices_only() -> None:
    result = vertexdist("estimate", DONE_CHECK_TEMPLATE)
    assert result.returncode == 0, result.stderr
    assert "$194.38" in result.stdout and "pass --params 350M or --gradient-bytes 1.4GB" in result.stdout


@pytest.mark.parametrize(
    ("args", "error", "hint"),
    [
        (("--params", "1.3X"), "error: --params: '1.3X' has an unknown unit 'X'", "hint: use a count like"),
        (("--params", "1.3GB"), "is a size in bytes", "hint: use --gradient-bytes 1.3GB"),
        (("--gradient-bytes", "1.4GiG"), "unknown unit 'GiG'", "hint: did you mean 1.4GiB?"),
        (("--params", "1B", "--gradient-bytes", "4GB"), "--params and --gradient-bytes both", "give one"),
        (("--params", "1B", "--step-compute", "120"), "error: --step-compute: '120' has no unit", "120ms"),
        (("--params", "1B", "--grad-dtype", "bf61"), "error: --grad-dtype:", "did you mean bf16?"),
        (("--hours", "0"), "--hours must be more than zero", "hint: e.g. --hours 24"),
    ],
)  # fmt: skip
def test_bad_values_are_usage_errors(args: tuple[str, ...], error: str, hint: str) -> None:
    result = vertexdist("estimate", DONE_CHECK_TEMPLATE, *args)
    assert result.returncode == 2
    assert error in result.stderr and hint in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_template_is_reported_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    lines = ["display_name: x", "project: vertexdist-demo", "staging_bucket: gs://bkt/s", "machine_type: n9"]
    path.write_text("\n".join(lines) + "\n")
    result = vertexdist("estimate", path, "--params", "1B")
    assert result.returncode == 1
    assert f"{path}:4:" in result.stderr and "machine_type" in result.stderr


def test_tuning_template_prints_trials_and_wall_time() -> None:
    # Issue 27 item 3: the table said one machine for 0.5 h ($0.12).
    result = vertexdist("estimate", "job_templates/cpu-tune.yaml")
    assert result.returncode == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert "8 trials, 2 at a time" in out
    assert "total for 8 trials x 0.5 h" in out and "$0.98" in out
    assert "wall time up to 2 h (4 rounds of 0.5 h)" in out


A2_8G_X8 = (
    "display_name: big\nproject: vertexdist-demo\nstaging_bucket: gs://vertexdist-demo/staging\n"
    "machine_type: a2-highgpu-8g\naccelerator_type: NVIDIA_TESLA_A100\naccelerator_count: 8\n"
    "replica_count: 8\nrestart_job_on_worker_restart: true\n"
)


def test_memory_plan_table_and_advice(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(A2_8G_X8)
    result = vertexdist("estimate", path, "--params", "7.5B")
    assert result.returncode == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert (
        "Model states per GPU (7.5B params x (2 + 2 + 12) B; 64 GPUs (8 per machine x 8): data parallel 64)"
        in out
    )
    assert "fits A100 40GB? (32 GB usable)" in out
    for row in (
        "DDP │ 15 GB │ 15 GB │ 90 GB │ 120 GB │ no",
        "ZeRO-2 │ 15 GB │ 0.234 GB │ 1.41 GB │ 16.6 GB │ yes",
    ):
        assert row in out, row
    # The bundled trainer runs DDP or FSDP: the advice weighs those two.
    assert "DDP needs 120 GB per GPU, an A100 40GB has 40" in out
    assert "ZeRO-3/FSDP over these 64 data-parallel GPUs needs 1.88 GB at 1.5x DDP's communication" in out


def test_model_params_from_the_template_and_parallel_sizes(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(A2_8G_X8 + "model_params: 7.5B\n")
    result = vertexdist(
        "estimate", path, "--tensor-parallel", "8", "--optimizer-bytes", "4", "--format", "json"
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["params"] == 7.5e9 and data["memory"]["data_parallel"] == 8
    assert data["memory_per_gpu_gb"]["ddp"] == pytest.approx(7.5e9 / 8 * 8 / 1e9)  # (2 + 2 + 4) B per param


@pytest.mark.parametrize(
    ("args", "error", "hint"),
    [
        (("--params", "lots"), "error: --params: 'lots' is not a parameter count", "hint: use a count like"),
        (("--params", "7B", "--tensor-parallel", "3"),
         "error: tensor 3 x pipeline 1 = 3 does not divide the job's 32 GPUs (8 per machine x 4 machines)",
         "hint: tensor x pipeline must divide 32: one of 2, 4, 8, 16, 32"),
        (("--tensor-parallel", "2"), "need a parameter count", "hint: pass --params 7.5B or set"),
        (("--params", "7B", "--headroom", "120%"), "error: --headroom: '120%' leaves nothing", "20% or 0.2"),
        (("--params", "7B", "--headroom", "lots"), "error: --headroom: 'lots' is not a share", "20% or 0.2"),
    ],
)  # fmt: skip
def test_bad_planner_values_are_one_line(args: tuple[str, ...], error: str, hint: str) -> None:
    result = vertexdist("estimate", DONE_CHECK_TEMPLATE, *args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2 and error in lines[0] and hint in lines[1], result.stderr


def test_a_template_on_a_persistent_resource_shows_what_the_resource_costs_idle(tmp_path: Path) -> None:
    """Issue 26: the machines of a persistent resource are billed while it exists, busy or idle."""
    source = (REPO_ROOT / "job_templates/a2-ultragpu-8g-rs.yaml").read_text()
    template = tmp_path / "on-a-pool.yaml"
    template.write_text(source + "persistent_resource_id: warm-a2\n")
    table = vertexdist("estimate", template)
    assert table.returncode == 0, table.stderr
    out = " ".join(table.stdout.split())
    assert "persistent resource warm-a2: its machines cost at least $194.38 per hour while it exists" in out
    data = json.loads(vertexdist("estimate", template, "--format", "json").stdout)
    assert data["persistent_resource"] == {
        "id": "warm-a2",
        "idle_cost_per_hour_usd": data["cost_per_hour_on_demand_usd"],
    }
    plain = json.loads(
        vertexdist("estimate", "job_templates/a2-ultragpu-8g-rs.yaml", "--format", "json").stdout
    )
    assert plain["persistent_resource"] is None


def test_no_advice_heading_over_nothing() -> None:
    """cpu-small has no --params and nothing to advise: the table ends with the prices line, no "Advice"."""
    result = vertexdist("estimate", "job_templates/cpu-small.yaml")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "Advice" not in lines, result.stdout
    assert lines[-1].startswith("prices:")


def test_cli_files_stay_thin() -> None:
    """Each CLI module is at most 300 lines (views live beside them, e.g. estimate_view)."""
    long = {
        path.name: n
        for path in (REPO_ROOT / "vertexdist" / "cli").glob("*.py")
        if (n := len(path.read_text().splitlines())) > 300
    }
    assert not long, long
