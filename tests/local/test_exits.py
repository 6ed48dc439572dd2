"""Which exits are permanent, and what Vertex's restart rules do with a moment's failures (`local.exits`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vertexdist.local.exits import EXIT_RULES, Decision, Exit, decide, is_permanent

DOCS = Path(__file__).parents[2] / "docs" / "reference" / "vertex.md"


@pytest.mark.parametrize("code", [1, 2, 3, 7, 126, 127, 137, 143, 255, -9, -15, -11, -6])
def test_an_exit_of_the_programs_own_or_a_signal_not_from_the_platform_is_permanent(code: int) -> None:
    assert is_permanent(code, stopped_by_platform=False)


@pytest.mark.parametrize("code", [0, 1, 75, 137, -9, -15, 143])
def test_whatever_a_replica_the_platform_stopped_exits_with_it_is_restarted(code: int) -> None:
    assert not is_permanent(code, stopped_by_platform=True)


def test_ex_tempfail_and_success_are_not_permanent() -> None:
    assert not is_permanent(75, stopped_by_platform=False)
    assert not is_permanent(0, stopped_by_platform=False)


def test_the_docs_table_is_the_codes_table() -> None:
    text = DOCS.read_text()
    section = text[text.index("### 8.1") : text.index("### 8.2")]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| exit |"), rows[:1]
    cells = [[c.strip().replace("`", "") for c in row.strip("|").split("|")] for row in rows[1:]]
    expected = [[r.exits, "yes" if r.permanent else "no", r.reason] for r in EXIT_RULES]
    assert cells == expected


def _exit(name: str, code: int, *, platform: bool = False, lost_peer: bool = False) -> Exit:
    return Exit(name, code, stopped_by_platform=platform, lost_peer=lost_peer)


def test_a_permanent_exit_fails_the_job_naming_the_cause() -> None:
    failed = [_exit("workerpool0-0", 1, lost_peer=True), _exit("workerpool1-0", 1)]
    assert decide(failed, "workerpool1-0", restarts={}, limit=5) == Decision("fail", "workerpool1-0")


def test_a_permanent_exit_beside_a_restartable_cause_still_fails_the_job_naming_it() -> None:
    failed = [_exit("workerpool1-0", 75), _exit("workerpool1-1", 2)]
    assert decide(failed, "workerpool1-0", restarts={}, limit=5) == Decision("fail", "workerpool1-1")


def test_a_stopped_replica_and_the_peers_that_only_lost_it_are_restarted() -> None:
    failed = [_exit("workerpool0-0", 1, lost_peer=True), _exit("workerpool1-0", -15, platform=True)]
    decision = decide(failed, "workerpool1-0", restarts={}, limit=5)
    assert decision == Decision("restart", "workerpool1-0", ("workerpool0-0", "workerpool1-0"))


def test_a_lost_peer_alone_is_restarted_only_once_a_peer_was() -> None:
    lonely = [_exit("workerpool0-0", 1, lost_peer=True)]
    assert decide(lonely, "workerpool0-0", restarts={}, limit=5).action == "fail"
    later = decide(lonely, "workerpool0-0", restarts={"workerpool1-0": 1}, limit=5, peer_restarted=True)
    assert later == Decision("restart", "workerpool0-0", ("workerpool0-0",))


def test_restarts_are_counted_per_replica_and_the_sixth_failure_retries_the_job() -> None:
    failed = [_exit("workerpool1-0", 75)]
    assert decide(failed, "workerpool1-0", restarts={"workerpool1-0": 4}, limit=5).action == "restart"
    assert decide(failed, "workerpool1-0", restarts={"workerpool0-0": 5}, limit=5).action == "restart"
    spent = decide(failed, "workerpool1-0", restarts={"workerpool1-0": 5}, limit=5)
    assert spent == Decision("retry_job", "workerpool1-0")


def test_with_retries_disabled_nothing_restarts() -> None:
    failed = [_exit("workerpool1-0", -15, platform=True)]
    assert decide(failed, "workerpool1-0", restarts={}, limit=0) == Decision("fail", "workerpool1-0")


def test_there_is_nothing_to_decide_without_a_failure() -> None:
    with pytest.raises(ValueError):
        decide([], "workerpool0-0", restarts={}, limit=5)
