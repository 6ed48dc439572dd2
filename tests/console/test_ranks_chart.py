"""The Ranks panel's chart of a job that ended (issue 42, item 13): its ranks' heartbeats are one point each,
which a line chart drew as one dot on a -1..1 s axis; the panel gives a bar per rank from zero. Pure."""

from __future__ import annotations

from typing import Any

from vertexdist.console.ranks import panel


def _row(rank: int, own_step_s: float | None, straggler: bool = False) -> dict[str, Any]:
    return {
        "rank": rank,
        "replica": f"workerpool0-{rank}",
        "local_rank": 0,
        "step": 40,
        "steps_per_s": None,
        "own_step_s": own_step_s,
        "wait_share": 0.0,
        "last_progress_s": None,
        "state": "exited",
        "where": "",
        "straggler": straggler,
        "slowdown": 3.0 if straggler else None,
    }


def test_an_ended_jobs_chart_is_a_bar_per_rank_from_zero() -> None:
    rows = [_row(1, 0.3, straggler=True), _row(0, 0.1), _row(2, None)]
    chart = panel({"ranks": rows, "verdict": None, "ended": True})["bars"]
    assert chart == {
        "title": "own step time per rank at its last heartbeat (s)",
        "labels": ["rank 0", "rank 1"],
        "values": [0.1, 0.3],
        "stragglers": [False, True],
    }


def test_a_running_jobs_chart_is_drawn_live_and_a_job_with_no_step_time_has_none() -> None:
    assert panel({"ranks": [_row(0, 0.1)], "verdict": None, "ended": False})["bars"] is None
    assert panel({"ranks": [_row(0, None)], "verdict": None, "ended": True})["bars"] is None
