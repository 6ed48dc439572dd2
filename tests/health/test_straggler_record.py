"""Issue 42's straggler checks over real heartbeats: 10 undisturbed 2 x 2 runs (DDP on gloo, 150 steps each,
recorded by `record_heartbeats.py` as the local monitor reads them) flag no straggler at any moment, and a
rank slowed by a fault plan's `slow` (0.1 s and 0.05 s a step) is flagged within 20 steps, alone. Pure: the
recorded snapshots replayed through `health.verdict.stragglers` at the default ratio."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from vertexdist.health.verdict import stragglers
from vertexdist.spec.health import DEFAULT_STRAGGLER_RATIO

RUNS: list[dict[str, Any]] = json.loads((Path(__file__).parent / "data" / "heartbeats_2x2.json").read_text())
UNDISTURBED = [run for run in RUNS if run["slow"] is None]
SLOWED = [run for run in RUNS if run["slow"] is not None]


def test_the_record_is_of_ten_whole_undisturbed_2x2_runs() -> None:
    assert len(UNDISTURBED) == 10 and all(run["ok"] for run in RUNS)
    for run in UNDISTURBED:
        last = {beat["rank"]: beat["step"] for beat in run["snapshots"][-1]}
        assert last == {0: 150, 1: 150, 2: 150, 3: 150}
        assert len(run["snapshots"]) >= 10  # the monitor's view all along, not just the end


@pytest.mark.parametrize("number", range(len(UNDISTURBED)))
def test_no_straggler_is_flagged_at_any_moment_of_an_undisturbed_run(number: int) -> None:
    for snapshot in UNDISTURBED[number]["snapshots"]:
        assert stragglers(snapshot, DEFAULT_STRAGGLER_RATIO) == [], snapshot


@pytest.mark.parametrize("run", SLOWED, ids=lambda run: f"slow-{run['slow']}")
def test_a_slowed_rank_is_flagged_within_20_steps_and_alone(run: dict[str, Any]) -> None:
    first_flagged = None
    for snapshot in run["snapshots"]:
        found = stragglers(snapshot, DEFAULT_STRAGGLER_RATIO)
        assert {s.rank for s in found} <= {3}, found
        if found and first_flagged is None:
            first_flagged = next(b["step"] for b in snapshot if b["rank"] == 3)
    assert first_flagged is not None and first_flagged <= 20, first_flagged
