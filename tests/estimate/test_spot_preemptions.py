"""The expected Spot cost with preemptions (issue 22, part 5): recomputed work and start-up per preemption."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vertexdist.estimate.spot import (
    DEFAULT_PREEMPTIONS_PER_HOUR,
    RECOMPUTED_MINUTES,
    RESTART_MINUTES,
    expect_spot,
    expected_spot_cost,
)

TEMPLATE = "job_templates/a2-ultragpu-8g-rs.yaml"
REPO = Path(__file__).resolve().parents[2]


def test_no_preemptions_costs_the_plain_spot_hours() -> None:
    e = expect_spot(72.0, 0.0)
    assert e.spot_hours == 72.0 and e.preemptions == 0.0


def test_each_preemption_adds_its_recomputed_work_and_start_up() -> None:
    e = expect_spot(10.0, 0.5, recomputed_minutes=30.0, restart_minutes=30.0)  # 1 h lost per preemption
    assert e.spot_hours == pytest.approx(20.0)  # 10 / (1 - 0.5)
    assert e.preemptions == pytest.approx(10.0)
    assert expected_spot_cost(2.0, e) == pytest.approx(40.0)
    # Check the renewal: the work done equals the Spot hours less what each preemption wasted.
    assert e.spot_hours - e.preemptions * e.lost_hours_per_preemption == pytest.approx(10.0)


def test_a_rate_that_wastes_every_hour_never_finishes() -> None:
    e = expect_spot(10.0, 6.0, recomputed_minutes=5.0, restart_minutes=5.0)
    assert not e.finishes and expected_spot_cost(2.0, e) is None


def _estimate_json(*extra: str, cwd: Path | None = None) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-m", "vertexdist", "estimate", str(REPO / TEMPLATE), "--format", "json", *extra],
        capture_output=True,
        text=True,
        check=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO)} if cwd is not None else None,
    ).stdout
    return json.loads(out)  # type: ignore[no-any-return]


def test_the_cli_default_is_the_documented_figure_and_the_rate_changes_the_cost() -> None:
    default = _estimate_json()["spot_with_preemptions"]
    assert isinstance(default, dict)
    assert default["preemptions_per_hour"] == DEFAULT_PREEMPTIONS_PER_HOUR
    assert default["lost_hours_per_preemption"] == pytest.approx(
        (RECOMPUTED_MINUTES + RESTART_MINUTES) / 60, abs=1e-4
    )
    busy = _estimate_json("--preemptions-per-hour", "0.5")["spot_with_preemptions"]
    assert isinstance(busy, dict)
    assert busy["expected_cost_total_usd"] > default["expected_cost_total_usd"]
    assert busy["on_demand_cost_total_usd"] == default["on_demand_cost_total_usd"]
    calm = _estimate_json("--preemptions-per-hour", "0")["spot_with_preemptions"]
    assert isinstance(calm, dict) and calm["expected_preemptions"] == 0


def test_the_expected_spot_cost_uses_this_projects_failure_history(tmp_path: Path) -> None:
    from vertexdist.goodput.history import key_of
    from vertexdist.spec import load_template

    loaded = load_template(REPO / TEMPLATE)
    history = {
        "entries": {
            key_of(loaded.machine_type, loaded.location, "SPOT"): {
                "attempts": 5,
                "running_s": 8 * 3600.0,
                "interruptions": 4,
                "stockouts": 1,
                "startup_s": 5 * 300.0,
                "recomputed_s": 4 * 900.0,
            }
        },
        "jobs": [],
    }
    (tmp_path / ".vertexdist").mkdir()
    (tmp_path / ".vertexdist" / "failure-history.json").write_text(json.dumps(history))
    seen = _estimate_json(cwd=tmp_path)["spot_with_preemptions"]
    assert isinstance(seen, dict)
    assert seen["preemptions_per_hour"] == pytest.approx(0.5)
    assert seen["lost_hours_per_preemption"] == pytest.approx((15.0 + 5.0) / 60, abs=1e-4)
    assert str(seen["rate_from"]).startswith("this project's history (5 attempts")
    expected = expect_spot(72.0, 0.5, recomputed_minutes=15.0, restart_minutes=5.0)
    assert expected.spot_hours is not None
    assert seen["expected_spot_hours"] == pytest.approx(round(expected.spot_hours, 2))
    assert _estimate_json()["spot_with_preemptions"]["rate_from"] == "default"  # type: ignore[index]


def test_a_managed_template_on_no_persistent_resource_is_told_how_a_restart_starts_warm_on_vertex() -> None:
    from vertexdist.estimate.advice import restarts_start_warm
    from vertexdist.spec.loader import load_template
    from vertexdist.spec.recovery import RecoverySpec

    plain = load_template(TEMPLATE)
    managed = plain.model_copy(update={"recovery": RecoverySpec()})
    assert restarts_start_warm(plain) == []  # no new attempts: nothing to start again
    (advice,) = restarts_start_warm(managed)
    assert advice.level == "info" and "persistent_resource_id:" in advice.message
    assert "persistent-resource-overview" in advice.message
    on_pool = managed.model_copy(update={"persistent_resource_id": "my-pool"})
    assert restarts_start_warm(on_pool) == []  # already starts on machines that are up
