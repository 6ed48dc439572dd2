"""Which replica a failed job names (`vertexdist.local.blame`), one rule per test, on the pure functions."""

from __future__ import annotations

import pytest

from vertexdist.local.blame import (
    REPLICA_RESTART_MARK,
    RESTART_MARK,
    Failure,
    first_failure,
    lost_a_peer,
    needs_cause,
)

GLOO = "RuntimeError: [gloo/transport/tcp/pair.cc:534] Read error [127.0.0.1]:5555: Connection reset by peer"
KILLED = "trainer_pkg: error: rank 1 (node 1, local rank 0) failed: killed by SIGKILL"


@pytest.mark.parametrize(
    "line",
    [
        GLOO,
        "Connection closed by peer",
        "NCCL communicator was aborted on rank 3",
        "[Errno 32] Broken pipe",
        # The bundled trainer's chief, checkpointed and stopped because its peer node got SIGTERM.
        "trainer_pkg: stopped because another node was asked to stop; the next start resumes from the last"
        " checkpoint",
    ],
)
def test_a_lost_connection_is_a_consequence(line: str) -> None:
    assert lost_a_peer(["epoch 1/2", line])


def test_a_failure_of_its_own_is_not() -> None:
    assert not lost_a_peer(["epoch 1/2", KILLED])
    assert not lost_a_peer([])


def test_only_the_last_lines_of_this_attempt_count() -> None:
    assert not lost_a_peer([GLOO, f"{RESTART_MARK} 1 -----", KILLED])
    assert not lost_a_peer([GLOO, f"{REPLICA_RESTART_MARK} workerpool0-0 (1/5) -----", KILLED])
    assert not lost_a_peer([GLOO, *[f"step {i}" for i in range(10)]])


def test_the_earliest_cause_is_named_even_when_a_consequence_exited_first() -> None:
    chief = Failure("workerpool0-0", 10.0, [GLOO])
    killed = Failure("workerpool1-0", 10.3, [KILLED])
    other = Failure("workerpool1-1", 10.4, ["ValueError: bad row 7"])
    assert first_failure([chief, other, killed]) is killed


def test_without_a_cause_the_earliest_exit_is_named() -> None:
    a, b = Failure("workerpool0-0", 2.0, [GLOO]), Failure("workerpool1-0", 1.0, [GLOO])
    assert first_failure([a, b]) is b
    c, d = Failure("workerpool0-0", 2.0, ["x"]), Failure("workerpool1-0", 1.0, ["y"])
    assert first_failure([c, d]) is d


def test_the_runner_waits_longer_only_while_it_has_seen_consequences_alone() -> None:
    assert needs_cause([Failure("workerpool0-0", 1.0, [GLOO])])
    assert not needs_cause([Failure("workerpool0-0", 1.0, [GLOO]), Failure("workerpool1-0", 2.0, [KILLED])])
    with pytest.raises(ValueError):
        first_failure([])
