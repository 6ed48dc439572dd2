"""What the launcher says about a failed local rank, and how it counts this machine's GPUs (pure parts)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trainer_pkg.cluster import visible_gpu_count
from vertexdist.local.blame import lost_a_peer
from vertexdist.local.gpus import host_gpus
from vertexdist.shipped.vertexdist_launcher.failures import (
    ABORT_HINT,
    WorkerFailure,
    describe_exit,
    failure_lines,
)
from vertexdist.shipped.vertexdist_launcher.gpus import count_gpus, visible_count, visible_devices


def test_the_last_line_names_the_replica_the_local_rank_and_the_signal() -> None:
    killed = WorkerFailure(global_rank=3, local_rank=1, pid=42, exitcode=-9)
    stopped = WorkerFailure(global_rank=2, local_rank=0, pid=41, exitcode=-15)
    lines = failure_lines("workerpool1-0", [stopped, killed], killed)
    assert lines[-1] == "workerpool1-0 failed: local rank 1 (global rank 3) was killed by SIGKILL (pid 42)"
    assert (
        lines[0] == "workerpool1-0: also ended: local rank 0 (global rank 2) was killed by SIGTERM (pid 41)"
    )


def test_the_error_message_comes_just_before_the_last_line() -> None:
    failed = WorkerFailure(1, 1, 7, 1, "ValueError: bad batch\n")
    assert failure_lines("workerpool0-0", [failed], failed) == [
        "workerpool0-0: local rank 1: ValueError: bad batch",
        "workerpool0-0 failed: local rank 1 (global rank 1) exited with status 1 (pid 7)",
    ]


@pytest.mark.parametrize("exitcode", [-6, 134])
def test_a_rank_that_died_of_sigabrt_gets_a_hint_just_before_the_last_line(exitcode: int) -> None:
    aborted = WorkerFailure(global_rank=2, local_rank=0, pid=9, exitcode=exitcode)
    stopped = WorkerFailure(global_rank=3, local_rank=1, pid=10, exitcode=-15)
    lines = failure_lines("workerpool1-0", [aborted, stopped], aborted)
    assert lines[-2] == f"workerpool1-0: hint: {ABORT_HINT}"
    assert lines[-1].startswith("workerpool1-0 failed: local rank 0 (global rank 2)")
    # A barrier cannot prevent gloo's abort at interpreter shutdown; the hint must not promise it does.
    assert "end the script with dist.barrier()" not in ABORT_HINT
    assert "interpreter shutdown" in ABORT_HINT and "Ending a script safely" in ABORT_HINT
    # The hint must not read as "this replica only lost a peer": blame would then pass over the cause.
    assert not lost_a_peer([f"vertexdist_launcher: {line}" for line in lines])


@pytest.mark.parametrize("exitcode", [1, -9, -15, 6, -11, 139])
def test_no_hint_for_other_endings(exitcode: int) -> None:
    failed = WorkerFailure(1, 1, 7, exitcode)
    assert not any("hint" in line for line in failure_lines("workerpool0-0", [failed], failed))


def test_the_hint_follows_the_first_failure_not_another_rank() -> None:
    first = WorkerFailure(0, 0, 5, 1, "ValueError: bad batch")
    later = WorkerFailure(1, 1, 6, -6)  # aborted as a consequence: the hint would mislead
    assert not any("hint" in line for line in failure_lines("workerpool0-0", [first, later], first))


def test_exit_descriptions() -> None:
    assert describe_exit(3) == "exited with status 3"
    assert describe_exit(-6) == "was killed by SIGABRT"
    assert describe_exit(-200) == "was killed by signal 200"


@pytest.mark.parametrize(
    ("value", "count"),
    [("0,1,2", 3), ("", 0), ("-1", 0), ("0,-1,2", 1), ("0,-1,1", 1), ("0,,1", 1), ("GPU-ab,GPU-cd", 2)],
)
def test_cuda_visible_devices_counts_up_to_the_first_invalid_entry(value: str, count: int) -> None:
    assert visible_count(value) == count


def _three_counts(value: str) -> tuple[int, int, int]:
    """What the host (local runs), the shipped launcher and the bundled trainer make of one value."""
    env = {"CUDA_VISIBLE_DEVICES": value}
    return len(host_gpus(env)), count_gpus(env), visible_gpu_count(env)


@pytest.mark.parametrize("value", ["0,-1,1", "0,,1", " 1 , 2 ", "-1", "", "3", "GPU-ab,-1", "0,1,2,3"])
def test_the_host_the_launcher_and_the_trainer_count_alike(value: str) -> None:
    # The wall forces two counters (the trainer cannot import the launcher); this keeps them one rule.
    host, launcher, trainer = _three_counts(value)
    assert host == launcher == trainer == len(visible_devices(value))


def test_the_host_hands_out_the_devices_cuda_would_see() -> None:
    assert host_gpus({"CUDA_VISIBLE_DEVICES": "0,-1,1"}) == ["0"]
    assert host_gpus({"CUDA_VISIBLE_DEVICES": " 2, 3"}) == ["2", "3"]


@given(st.lists(st.sampled_from(["0", "1", "7", "-1", "-2", "", " ", " 3 ", "GPU-ab", "MIG-x"]), max_size=6))
def test_they_agree_on_any_list(entries: list[str]) -> None:
    host, launcher, trainer = _three_counts(",".join(entries))
    assert host == launcher == trainer


def test_gpus_come_from_the_driver_unless_cuda_visible_devices_says(tmp_path: Path) -> None:
    proc = tmp_path / "gpus"
    for bus in ("0000:00:04.0", "0000:00:05.0"):
        (proc / bus).mkdir(parents=True)
    assert count_gpus({}, proc=proc) == 2
    assert count_gpus({"CUDA_VISIBLE_DEVICES": "1"}, proc=proc) == 1


def test_the_host_counts_the_drivers_gpus_as_the_launcher_does(tmp_path: Path) -> None:
    proc = tmp_path / "gpus"
    proc.mkdir()
    assert host_gpus({}, proc=proc) == [] == list(range(count_gpus({}, proc=proc)))
    for bus in ("0000:00:04.0", "0000:00:05.0", "0000:00:06.0"):
        (proc / bus).mkdir()
    assert host_gpus({}, proc=proc) == ["0", "1", "2"]
    assert len(host_gpus({}, proc=proc)) == count_gpus({}, proc=proc)
    assert host_gpus({"CUDA_VISIBLE_DEVICES": "2,0"}, proc=proc) == ["2", "0"]
