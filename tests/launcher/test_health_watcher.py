"""The shipped health watcher in one process: it reads frames, counts optimizer steps with no help from the
script, writes heartbeats, answers a stacks request, and carries out a fault plan's slow and hang."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from vertexdist.shipped.vertexdist_launcher import health

TORCH_DIST = "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py"
AUTOGRAD = "/usr/lib/python3/site-packages/torch/autograd/__init__.py"
DATALOADER = "/usr/lib/python3/site-packages/torch/utils/data/dataloader.py"


def test_frames_read_as_waiting_loading_or_computing_with_the_users_frame() -> None:
    user = ("/job/train.py", 50, "train")
    waiting = health.classify([user, (TORCH_DIST, 10, "all_reduce")])
    assert waiting == {
        "state": "waiting",
        "where": "train (train.py:50)",
        "what": "the all_reduce",
        "at": "train.py:50",
    }
    backward = health.classify(
        [user, ("/x/site-packages/torch/_tensor.py", 5, "backward"), (AUTOGRAD, 9, "backward")]
    )
    assert (backward["state"], backward["what"]) == ("waiting", "the all-reduce of backward")
    assert health.classify([user, (DATALOADER, 3, "__next__")])["state"] == "loading"
    computing = health.classify([user, ("/job/train.py", 23, "fetch_shard")])
    assert (computing["state"], computing["where"]) == ("computing", "fetch_shard (train.py:23)")
    # one process, no peers: backward is computing
    assert health.classify([user, (AUTOGRAD, 9, "backward")], distributed=False)["state"] == "computing"


def test_the_packaged_copy_of_a_script_is_named_by_the_users_own_file(tmp_path: Path) -> None:
    # A script ships as aiplatform_custom_trainer_script/task.py (the SDK's layout); the user wrote train.py.
    package = tmp_path / "site-packages" / health.SCRIPT_PACKAGE
    package.mkdir(parents=True)
    task = package / "task.py"
    task.write_text("def fetch_shard():\n    return 1\n")
    (package / health.SOURCE_FILE).write_text("train.py")
    found = health.classify([(str(task), 2, "fetch_shard")])
    assert (found["where"], found["at"]) == ("fetch_shard (train.py:2)", "train.py:2")
    # a package's own task.py, and a script package without the name (an older sdist), keep their names
    assert health.shown_name("/job/mytrainer/task.py") == "task.py"
    (package / health.SOURCE_FILE).unlink()
    assert health.shown_name(str(tmp_path / "other" / health.SCRIPT_PACKAGE / "task.py")) == "task.py"


def test_stacks_name_the_users_file_and_start_with_the_main_thread(tmp_path: Path) -> None:
    package = tmp_path / health.SCRIPT_PACKAGE
    package.mkdir()
    (package / health.SOURCE_FILE).write_text("train.py")
    task = package / "task.py"
    task.write_text("import threading\n\ndef block(event):\n    event.wait()\n")
    code = compile(task.read_text(), str(task), "exec")
    scope: dict[str, Any] = {}
    exec(code, scope)
    event = threading.Event()
    thread = threading.Thread(target=scope["block"], args=(event,), name="user-thread", daemon=True)
    thread.start()
    try:
        assert _wait(lambda: "user-thread" in health.all_stacks())
        text = health.all_stacks()
    finally:
        event.set()
        thread.join()
    assert 'File "train.py", line 4, in block' in text, text
    assert str(task) not in text
    assert text.startswith("Thread MainThread "), text[:200]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        health.DIR_VARIABLE: str(tmp_path),
        "RANK": "3",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "4",
        "CLUSTER_SPEC": json.dumps({"task": {"type": "workerpool1", "index": 0}}),
        **extra,
    }


def _wait(predicate: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_optimizer_steps_are_counted_and_written_as_a_heartbeat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = pytest.importorskip("torch")
    watcher = health.Watcher(_env(tmp_path))
    watcher._register()
    assert watcher.hooked
    try:
        model = torch.nn.Linear(2, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            model(torch.ones(1, 2)).sum().backward()
            optimizer.step()
        assert watcher.steps == 3
        watcher.sample()
        watcher.write_beat()
        beat = json.loads((tmp_path / "ranks" / "rank-3.json").read_text())
        assert (beat["rank"], beat["local_rank"], beat["replica"], beat["world_size"]) == (
            3,
            1,
            "workerpool1-0",
            4,
        )
        assert beat["step"] == 3 and beat["first_step_at"] <= beat["last_step_at"]
        assert beat["step_s"] is not None and beat["own_step_s"] is not None
    finally:
        watcher.hook_handle.remove()


def test_manual_steps_turn_the_hook_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    watcher = health.Watcher(_env(tmp_path))
    monkeypatch.setattr(health, "_WATCHER", watcher)
    health.step()
    watcher._hook(None, None, None)  # an optimizer step after a manual one is not counted again
    assert watcher.steps == 1


def test_a_stacks_request_is_answered_with_every_thread(tmp_path: Path) -> None:
    watcher = health.Watcher(_env(tmp_path))
    (tmp_path / "stacks-1").write_text("")
    watcher._requests()
    text = (tmp_path / "stacks" / "rank-3.txt").read_text()
    assert text.startswith("rank 3 (workerpool1-0, local rank 1) at step 0")
    assert "Thread MainThread" in text and "test_a_stacks_request_is_answered_with_every_thread" in text


def test_slow_and_hang_faults_act_on_the_matching_rank_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    faults = [
        {"kind": "slow", "replica": "workerpool1-0", "local_rank": 1, "delay": 0.2},
        {"kind": "hang", "replica": "workerpool1-0", "local_rank": 1, "after_step": 2, "after": None},
        {"kind": "hang", "replica": "workerpool1-0", "local_rank": 0, "after_step": 1, "after": None},
    ]
    watcher = health.Watcher(_env(tmp_path, **{health.FAULTS_VARIABLE: json.dumps(faults)}))
    assert len(watcher.faults) == 2  # local rank 0's is not this rank's
    started = time.monotonic()
    watcher.on_step()
    assert time.monotonic() - started >= 0.2  # slow
    thread = threading.Thread(target=watcher.on_step, daemon=True)
    thread.start()
    thread.join(1.0)
    assert (
        thread.is_alive() and watcher.steps == 2
    )  # blocked after its 2nd step, as a read that never returns
    frames = health._frames(__import__("sys")._current_frames()[thread.ident])
    assert health.classify(frames)["state"] == "loading"
    # Issue 42, item 13: the plan's step (after 2 steps) and the verdict's (the step it is in, 3) read apart;
    # the line says both.
    assert "rank 3 blocks after step 2, in step 3" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra",
    [
        {"CLUSTER_SPEC": '{"cluster": {}}'},  # no task (the bundled trainer run by hand)
        {"CLUSTER_SPEC": "not json", health.CONFIG_VARIABLE: "[1]", health.FAULTS_VARIABLE: '{"x": 1}'},
        {health.CONFIG_VARIABLE: '{"hang_timeout": "soon"}', "RANK": "x"},
    ],
)
def test_odd_variables_never_stop_the_watcher_or_the_rank(tmp_path: Path, extra: dict[str, str]) -> None:
    watcher = health.Watcher({**_env(tmp_path), **extra})
    assert watcher.replica in ("workerpool0-0", "workerpool1-0") and watcher.faults == []
    watcher.on_step()
    watcher.write_beat()


def test_on_vertex_a_heartbeat_is_one_json_line_in_the_log_once_the_rank_steps(
    capsys: pytest.CaptureFixture[str],
) -> None:
    env = {
        "RANK": "1",
        "WORLD_SIZE": "2",
        "CLUSTER_SPEC": json.dumps({"task": {"type": "workerpool0", "index": 0}}),
    }
    watcher = health.Watcher(env)
    watcher.write_beat()
    assert capsys.readouterr().out == ""  # no step yet: nothing in the log
    watcher.on_step()
    watcher.write_beat()
    line = json.loads(capsys.readouterr().out)
    assert line["message"] == "vertexdist health: rank 1 step 1"
    assert line[health.LOG_KEY]["replica"] == "workerpool0-0" and line[health.LOG_KEY]["step"] == 1


def test_on_vertex_a_rank_with_no_step_for_hang_timeout_prints_its_stacks_and_exits_hung(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import os

    exits: list[int] = []
    monkeypatch.setattr(os, "_exit", exits.append)
    env = {health.CONFIG_VARIABLE: json.dumps({"hang_timeout": 5}), "CLUSTER_SPEC": "{}"}
    watcher = health.Watcher(env)
    watcher._own_hang()
    assert exits == []  # no step yet: the clock has not started
    watcher.on_step()
    watcher._own_hang()
    assert exits == []
    assert watcher.last_step_at is not None
    watcher.last_step_at -= 6
    watcher._own_hang()
    assert exits == [health.HUNG_EXIT]
    err = capsys.readouterr().err
    assert "hung: no progress for 6s; rank 0 is in" in err and "Thread MainThread" in err


def test_the_last_heartbeat_says_exited_with_the_final_step(tmp_path: Path) -> None:
    watcher = health.Watcher(_env(tmp_path))
    for _ in range(3):
        watcher.on_step()
    watcher.finish()
    beat = json.loads((tmp_path / "ranks" / "rank-3.json").read_text())
    assert (beat["state"], beat["step"]) == ("exited", 3)


def test_a_timed_save_marks_its_step_and_writes_a_heartbeat_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    watcher = health.Watcher(_env(tmp_path))
    monkeypatch.setattr(health, "_WATCHER", watcher)
    for _ in range(4):
        health.step()
    with health.checkpoint():
        time.sleep(0.05)
    health.step()
    with pytest.raises(OSError), health.checkpoint():  # a failed save: its time, not its step
        raise OSError("disk full")
    health.checkpoint_saved(0.5)
    beat = json.loads((tmp_path / "ranks" / "rank-3.json").read_text())  # no watcher thread: written at once
    assert (beat["step"], beat["checkpoints"], beat["checkpoint_step"]) == (5, 2, 5)
    assert 0.55 <= beat["checkpoint_s"] < 1.5


def test_a_step_aimed_preemption_marks_its_step_and_waits_there_for_the_signal(tmp_path: Path) -> None:
    faults = [{"kind": "preempt", "replica": "workerpool1-0", "local_rank": 1, "after_step": 2}]
    watcher = health.Watcher(_env(tmp_path, **{health.FAULTS_VARIABLE: json.dumps(faults)}))
    watcher.on_step()
    assert not (tmp_path / "reached-workerpool1-0").exists()
    thread = threading.Thread(target=watcher.on_step, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not (tmp_path / "reached-workerpool1-0").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert (tmp_path / "reached-workerpool1-0").read_text() == "2"
    beat = json.loads((tmp_path / "ranks" / "rank-3.json").read_text())
    assert beat["step"] == 2
    thread.join(0.2)
    assert thread.is_alive()  # it waits at that step for the platform's SIGTERM


@pytest.mark.timeout(60)
def test_the_platforms_sigterm_releases_the_held_rank_after_its_own_handler_ran(tmp_path: Path) -> None:
    import os
    import signal

    faults = [{"kind": "preempt", "replica": "workerpool1-0", "local_rank": 1, "after_step": 1}]
    watcher = health.Watcher(_env(tmp_path, **{health.FAULTS_VARIABLE: json.dumps(faults)}))
    seen: list[int] = []

    def trainer(signum: int, _frame: object) -> None:  # the script's own: asks for a checkpoint and a stop
        seen.append(signum)

    previous = signal.signal(signal.SIGTERM, trainer)
    reached = tmp_path / "reached-workerpool1-0"

    def platform() -> None:  # the preemption: SIGTERM once the step's mark is there
        assert _wait(reached.exists)
        os.kill(os.getpid(), signal.SIGTERM)

    try:
        thread = threading.Thread(target=platform, daemon=True)
        thread.start()
        watcher.on_step()  # the script's step, in the main thread: held there until the signal
        thread.join(10)
        assert seen == [signal.SIGTERM]  # the script's handler ran: the bundled trainer's checkpoints
        assert signal.getsignal(signal.SIGTERM) is trainer and watcher.steps == 1
        os.kill(os.getpid(), signal.SIGTERM)  # the hold gave the script's handler back its place
        assert _wait(lambda: len(seen) == 2)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _hung_rank(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Thread, list[int]]:
    """`env`'s watcher told that the job hung, in a thread of its own, its `os._exit` recorded."""
    import os

    exits: list[int] = []
    monkeypatch.setattr(os, "_exit", exits.append)
    watcher = health.Watcher(env)
    watcher.on_step()
    thread = threading.Thread(target=watcher.stop_hung, args=("hung: rank 3 is in fetch_shard",), daemon=True)
    thread.start()
    return thread, exits


def test_a_hung_rank_dumps_then_exits_only_once_every_rank_of_the_job_has_dumped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env = _env(tmp_path, WORLD_SIZE="2", RANK="1")
    thread, exits = _hung_rank(env, monkeypatch)
    assert _wait((tmp_path / "stacks" / health.dumped_marker(1)).exists)  # its own dump is done
    assert "Thread MainThread" in (tmp_path / "stacks" / "rank-1.txt").read_text()
    assert json.loads((tmp_path / "ranks" / "rank-1.json").read_text())["step"] == 1  # its last heartbeat
    assert "vertexdist_launcher: stacks of rank 1" in capsys.readouterr().err
    assert thread.is_alive() and exits == []  # rank 0 has not dumped yet: rank 1 must not end its replica
    (tmp_path / "stacks" / health.dumped_marker(0)).write_text("")
    thread.join(health.DUMP_WAIT_S)
    assert exits == [health.HUNG_EXIT]


def test_the_wait_for_dumps_is_bounded_and_names_the_ranks_still_missing(tmp_path: Path) -> None:
    (tmp_path / health.dumped_marker(0)).write_text("")
    assert health.wait_for_dumps(str(tmp_path), ["0", "1", "2"], 0.0) == ["1", "2"]
    assert health.wait_for_dumps(str(tmp_path / "none"), ["0"], 0.0) == ["0"]
    assert health.wait_for_dumps(str(tmp_path), ["0"], 60.0) == []


def test_on_vertex_a_hung_rank_waits_for_its_replicas_local_ranks_and_other_replicas_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {
        "RANK": "3",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "4",
        "LOCAL_WORLD_SIZE": "2",
        "CLUSTER_SPEC": json.dumps({"task": {"type": "workerpool1", "index": 0}}),
        health.DUMPS_VARIABLE: str(tmp_path),
    }
    watcher = health.Watcher(env)
    assert watcher.dir is None and watcher.remote_grace_s() == pytest.approx(1.2)  # no step time yet
    watcher.durations.extend([0.5, 0.5])
    assert watcher.remote_grace_s() == pytest.approx(2.2)  # two steps and two samples
    watcher.durations.extend([60.0])
    assert watcher.remote_grace_s() == health.DUMP_WAIT_S  # bounded
    assert health.Watcher({**env, "WORLD_SIZE": "2"}).remote_grace_s() == 0.0  # one replica: no one else

    thread, exits = _hung_rank({**env, "WORLD_SIZE": "2"}, monkeypatch)
    assert _wait((tmp_path / health.dumped_marker("local-1-0")).exists)
    assert thread.is_alive() and exits == []  # its replica's local rank 0 has not dumped yet
    (tmp_path / health.dumped_marker("local-0-0")).write_text("")
    thread.join(health.DUMP_WAIT_S)
    assert exits == [health.HUNG_EXIT]


def test_the_last_heartbeat_of_a_script_that_failed_points_at_the_failing_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 42, item 10: a script that failed at its second line's import left `ranks` at line 1, the last
    # place the watcher had sampled; its last heartbeat takes the uncaught exception's own frame.
    watcher = health.Watcher(_env(tmp_path))
    watcher.last = {**health.classify([("/job/train.py", 1, "<module>")]), "top": ""}
    try:
        exec(compile("import os\nimport nosuchmod_vertexdist\n", "/job/train.py", "exec"), {})
    except ModuleNotFoundError as exc:
        monkeypatch.setattr("sys.last_traceback", exc.__traceback__, raising=False)
    watcher.finish()
    beat = json.loads((tmp_path / "ranks" / "rank-3.json").read_text())
    assert (beat["state"], beat["where"], beat["at"]) == ("exited", "<module> (train.py:2)", "train.py:2")


def test_an_uncaught_exception_is_kept_as_the_interpreter_keeps_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # run_as_python ends a forked script as Python would: sys.last_traceback is what the watcher reads.
    import sys

    from vertexdist.shipped.vertexdist_launcher import fork_protocol

    monkeypatch.setattr(sys, "excepthook", lambda *_: None)
    for name in ("last_type", "last_value", "last_traceback"):
        monkeypatch.setattr(sys, name, None, raising=False)
    try:
        raise ImportError("no")
    except ImportError as exc:
        fork_protocol.report_uncaught(exc)
        assert sys.last_value is exc and sys.last_traceback is exc.__traceback__
