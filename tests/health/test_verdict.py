"""The pure reading of heartbeats: when a job is hung and whom the verdict names, stragglers, the rows of
`vertexdist ranks`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vertexdist.health import folder
from vertexdist.health.verdict import ROW_KEYS, all_started, hang_verdict, rank_rows, stragglers
from vertexdist.shipped.vertexdist_launcher import health as watcher
from vertexdist.spec import health as spec_health

NOW = 1000.0


def beat(rank: int, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "rank": rank,
        "local_rank": rank % 2,
        "replica": f"workerpool{min(rank // 2, 1)}-{max(rank // 2 - 1, 0)}",
        "world_size": 4,
        "step": 5,
        "first_step_at": 900.0,
        "last_step_at": 970.0,
        "own_step_s": 0.01,
        "step_s": 0.05,
        "steps_per_s": 20.0,
        "wait_share": 0.8,
        "state": "waiting",
        "where": "train (train.py:50)",
        "at": "train.py:50",
        "what": "the all-reduce of backward",
    }
    return {**base, **fields}


def hung_job() -> list[dict[str, Any]]:
    return [
        beat(0),
        beat(1),
        beat(2),
        beat(3, state="computing", step=4, where="fetch_shard (train.py:23)", at="train.py:23", what=""),
    ]


def test_the_verdict_names_the_culprit_its_replica_local_rank_function_line_and_where_the_others_wait() -> (
    None
):
    verdict = hang_verdict(hung_job(), NOW, 20.0)
    assert verdict == (
        "hung: no progress for 30s; rank 3 (workerpool1-0, local rank 1) is in fetch_shard (train.py:23) at"
        " step 5; ranks 0-2 wait in the all-reduce of backward (train.py:50)"
    )


def test_no_hang_before_the_timeout() -> None:
    assert hang_verdict(hung_job(), NOW, 60.0) is None
    assert hang_verdict(hung_job(), NOW, None) is None  # hang_timeout: never


def test_a_slow_first_step_is_never_hung() -> None:
    beats = [beat(0), beat(1), beat(2), beat(3, step=0, first_step_at=None, last_step_at=None)]
    assert not all_started(beats)
    assert hang_verdict(beats, NOW + 10_000, 20.0) is None


def test_a_rank_that_has_not_joined_yet_is_never_hung() -> None:
    beats = hung_job()[:3]  # rank 3 has written no heartbeat at all: world_size is 4
    assert hang_verdict(beats, NOW + 10_000, 20.0) is None


def test_a_job_every_rank_of_which_exited_is_not_hung() -> None:
    beats = [beat(r, state="exited") for r in range(4)]
    assert hang_verdict(beats, NOW, 20.0) is None


def test_every_rank_waiting_at_one_step_names_no_culprit_but_says_where_they_wait() -> None:
    verdict = hang_verdict([beat(r) for r in range(4)], NOW, 20.0)
    assert verdict == "hung: no progress for 30s; ranks 0-3 wait in the all-reduce of backward (train.py:50)"


def test_the_rank_behind_is_the_culprit_when_all_wait() -> None:
    beats = [beat(0), beat(1, step=3, where="barrier (x.py:2)"), beat(2), beat(3)]
    verdict = hang_verdict(beats, NOW, 20.0)
    assert (
        verdict is not None
        and "rank 1 (workerpool0-0, local rank 1) is in barrier (x.py:2) at step 4" in verdict
    )
    assert "ranks 0, 2, 3 wait in" in verdict


def test_a_straggler_is_flagged_alone_with_its_slowdown() -> None:
    beats = [beat(r, own_step_s=0.01, step=20) for r in range(4)]
    beats[2] = beat(2, own_step_s=0.05, step=20, state="computing", where="decode (data.py:9)")
    found = stragglers(beats, 1.5)
    assert [(s.rank, s.slowdown, s.state, s.where) for s in found] == [
        (2, 5.0, "computing", "decode (data.py:9)")
    ]
    assert stragglers([beat(r, step=20) for r in range(4)], 1.5) == []  # all equal: none
    # Ranks that spend their whole step waiting (own ~0): a 2 ms wobble is noise, a 0.2 s delay is not.
    idle = [beat(r, own_step_s=0.0, step=20) for r in range(3)]
    assert stragglers([*idle, beat(3, own_step_s=0.002, step=20)], 1.5) == []
    assert [s.rank for s in stragglers([*idle, beat(3, own_step_s=0.2, step=20)], 1.5)] == [3]


def test_a_straggler_needs_a_few_steps_first() -> None:
    beats = [beat(r, own_step_s=0.01, step=2) for r in range(3)] + [beat(3, own_step_s=1.0, step=2)]
    assert stragglers(beats, 1.5) == []


def test_rows_have_the_json_keys_and_freeze_at_the_end() -> None:
    beats = [beat(r, own_step_s=0.01, step=20) for r in range(3)] + [beat(3, own_step_s=0.04, step=20)]
    rows = rank_rows(beats, NOW, 1.5, ended_at=980.0)
    assert [tuple(r) for r in rows] == [ROW_KEYS] * 4
    assert [r["rank"] for r in rows] == [0, 1, 2, 3]
    assert rows[0]["last_progress_s"] == 10.0
    assert (rows[3]["straggler"], rows[3]["slowdown"]) == (True, 4.0)
    assert (rows[0]["straggler"], rows[0]["slowdown"]) == (False, None)


def test_the_shipped_watcher_and_vertexdist_agree_on_names() -> None:
    assert watcher.CONFIG_VARIABLE == spec_health.CONFIG_VARIABLE
    assert watcher.DEFAULT_HANG_TIMEOUT_S == spec_health.DEFAULT_HANG_TIMEOUT_S
    assert watcher.DEFAULT_STRAGGLER_RATIO == spec_health.DEFAULT_STRAGGLER_RATIO
    from vertexdist.health.verdict import WINDOW_STEPS

    assert watcher.WINDOW == WINDOW_STEPS
    for name in ("BEATS_DIR", "STACKS_DIR", "VERDICT_FILE", "REQUEST_PREFIX"):
        assert getattr(watcher, name) == getattr(folder, name)


def test_local_runs_summary_lists_the_stragglers_the_monitor_kept(tmp_path: Path) -> None:
    from vertexdist.backends.base import JobResult, JobState
    from vertexdist.cli.local_report import summary_lines

    result = JobResult(state=JobState.SUCCEEDED, error=None, replicas=(), restarts=0, elapsed_s=3.0)
    assert not any(line.startswith("stragglers:") for line in summary_lines(result, tmp_path))
    (tmp_path / "health").mkdir()
    (tmp_path / "health" / "summary.json").write_text(
        json.dumps({"verdict": None, "stragglers": [{"rank": 1, "slowdown": 6.8}], "ended_at": 1.0})
    )
    assert f"stragglers: rank 1 (6.8x); see vertexdist ranks {tmp_path}" in summary_lines(result, tmp_path)


def test_the_ranks_table_has_a_row_per_rank_and_ends_with_the_verdict() -> None:
    from vertexdist.cli.ranks import table

    rows = rank_rows([beat(0, own_step_s=0.01, step=20), beat(1, own_step_s=0.05, step=20)], NOW, 1.5)
    text = table({"ranks": rows, "verdict": "hung: no progress for 30s"}).splitlines()
    assert text[0].split()[:4] == ["RANK", "REPLICA", "LOCAL", "STEP"]
    assert (
        text[1].split()[:2] == ["0", "workerpool0-0"] and "50ms" in text[2] and text[2].endswith("yes (5x)")
    )
    assert text[-1] == "hung: no progress for 30s"
    assert table({"ranks": [], "verdict": None}).startswith("no heartbeats yet")


def test_the_rank_a_verdict_names_is_read_back_from_its_line() -> None:
    from vertexdist.health.verdict import named_rank

    line = (
        "hung: no progress for 20s; rank 3 (workerpool1-0, local rank 1) is in fetch_shard (train.py:23) at"
        " step 5; ranks 0-2 wait in all_reduce (train.py:50)"
    )
    assert named_rank(line) == 3
    assert named_rank("hung: no progress for 9s; rank 1 is in fetch_shard") == 1
    assert named_rank("hung: no progress for 9s; ranks 0-3 wait in all_reduce") is None
    assert named_rank(None) is None


def test_a_sample_or_two_of_noise_in_a_short_window_is_no_straggler() -> None:
    # The watcher samples every 0.1 s: at step 5 (a window of 4 steps) one stray 'computing' sample is
    # 0.025 s of own time per step, 2.5x the floor. Issue 42: rank 0 was flagged so beside a hung rank.
    idle = [beat(r, own_step_s=0.0, step=5) for r in (1, 2, 3)]
    assert stragglers([beat(0, own_step_s=0.0253, step=5), *idle], 1.5) == []
    assert stragglers([beat(0, own_step_s=0.05, step=5), *idle], 1.5) == []  # 2 samples in 4 steps
    # The same shares held over a full window are real time: 20 steps of 0.05 s extra is 1 s.
    assert [s.rank for s in stragglers([beat(0, own_step_s=0.05, step=21), *idle], 1.5)] == [0]


def test_a_slowed_rank_is_flagged_within_20_steps() -> None:
    # A fault plan's `slow` of 0.1 s a step (its own time; the others wait for it), as each step ends.
    flagged_at = None
    for step in range(1, 21):
        beats = [beat(r, own_step_s=0.005, step=step) for r in (0, 2, 3)]
        beats.append(beat(1, own_step_s=0.105, step=step, state="computing"))
        if stragglers(beats, 1.5):
            flagged_at = step
            break
    assert flagged_at is not None and flagged_at <= 10


def test_the_straggler_line_says_what_the_ratio_measures_and_where_the_rank_is_now() -> None:
    from vertexdist.health.verdict import straggler_line

    beats = [beat(r, own_step_s=0.01, step=10) for r in (0, 2, 3)]
    slow = beat(1, own_step_s=0.068, step=10, state="waiting", where="train (train.py:41)")
    (found,) = stragglers([*beats, slow], 1.5)
    line = straggler_line(found, slow)
    assert line == (
        "warning: straggler: rank 1 (workerpool0-0, local rank 1) at step 10: its own step time (the step"
        " less its waits in collectives) is 6.8x the other ranks' median, over its last 9 steps; now"
        " waiting in train (train.py:41)"
    )
    assert "extra time" not in line
