"""A silent job's status line (issue 46): nothing printed and no step for `silence` seconds gives one line
naming where each rank's main thread is, the Ray driver's included; one line per quiet spell, none once the
job speaks or steps again, and none where `silence` is off."""

from __future__ import annotations

import json
from pathlib import Path

from vertexdist.health.silence import duration_text, quiet_since, silence_line
from vertexdist.local.health_monitor import HealthConfig, HealthMonitor
from vertexdist.shipped.vertexdist_launcher.health import ROLE_VARIABLE, Watcher, top_frame
from vertexdist.spec.health import DEFAULT_SILENCE_S, HealthSpec

DRIVER = {
    "rank": 0,
    "replica": "workerpool0-0",
    "role": "ray driver",
    "step": 0,
    "state": "starting",
    "top": "get_file_info (pyarrow/_fs.pyx:590)",
    "where": "main (tune_hpo.py:96)",
    "last_step_at": None,
}
WORKER = {
    "rank": 1,
    "replica": "workerpool1-0",
    "step": 7,
    "state": "loading",
    "top": "recv_into (socket.py:706)",
    "last_step_at": 100.0,
}


def test_the_line_names_each_rank_s_top_frame() -> None:
    line = silence_line([WORKER, DRIVER], 125)
    assert line == (
        "no output and no step for 2m5s; the job goes on:"
        " rank 0 (workerpool0-0, ray driver) is in get_file_info (pyarrow/_fs.pyx:590)"
        " (before its first step);"
        " rank 1 (workerpool1-0) is in recv_into (socket.py:706) (loading, at step 7)"
    )
    assert silence_line([], 60).endswith("no rank has said where it is yet (no health watcher reported)")
    assert [duration_text(s) for s in (45, 120, 3725)] == ["45s", "2m0s", "1h2m"]


def test_the_quiet_spell_starts_at_the_last_line_the_last_step_or_the_start() -> None:
    assert quiet_since([WORKER, DRIVER], 90.0, 10.0) == 100.0
    assert quiet_since([DRIVER], 90.0, 10.0) == 90.0
    assert quiet_since([DRIVER], None, 10.0) == 10.0


def test_the_top_frame_is_the_library_a_rank_waits_in() -> None:
    frames = [
        ("/home/u/job/tune_hpo.py", 96, "main"),
        ("/venv/lib/python3.11/site-packages/pyarrow/_fs.pyx", 590, "get_file_info"),
    ]
    assert top_frame(frames) == "get_file_info (pyarrow/_fs.pyx:590)"
    assert top_frame([("/job/train.py", 3, "<module>")]) == "<module> (train.py:3)"


class FakeJob:
    done = False

    def __init__(self) -> None:
        self.notes: list[str] = []

    def impose_failure(self, error: object, *, stop: bool = False) -> None:
        raise AssertionError("a silent job is never ended")

    def note(self, message: str) -> None:
        self.notes.append(message)


def test_one_line_per_quiet_spell_and_none_when_off(tmp_path: Path) -> None:
    now = [1000.0]
    job = FakeJob()
    monitor = HealthMonitor(job, tmp_path, HealthConfig(silence=120.0), clock=lambda: now[0])
    monitor.new_attempt()
    (tmp_path / "ranks").mkdir(exist_ok=True)
    (tmp_path / "ranks" / "rank-0.json").write_text(json.dumps(DRIVER))
    printed = [1010.0]
    assert monitor.check_silence(lambda: printed[0]) is None
    now[0] = 1129.0
    assert monitor.check_silence(lambda: printed[0]) is None  # 119 s quiet
    now[0] = 1131.0
    line = monitor.check_silence(lambda: printed[0])
    assert line is not None and line.startswith("no output and no step for 2m1s")
    assert "rank 0 (workerpool0-0, ray driver) is in get_file_info (pyarrow/_fs.pyx:590)" in line
    now[0] = 1500.0
    assert monitor.check_silence(lambda: printed[0]) is None  # the same spell: told once
    printed[0] = 1490.0  # the job printed a line, then fell silent again
    now[0] = 1611.0
    assert monitor.check_silence(lambda: printed[0]) is not None
    assert len(job.notes) == 2 and monitor.verdict is None
    off = HealthMonitor(job, tmp_path, HealthConfig(silence=None), clock=lambda: now[0])
    assert off.check_silence(lambda: 0.0) is None


def test_the_template_field_reaches_the_monitor() -> None:
    assert HealthConfig().silence == DEFAULT_SILENCE_S == 120
    assert HealthConfig.from_env({"VERTEXDIST_HEALTH": HealthSpec(silence="30s").env_value()}).silence == 30
    assert (
        HealthConfig.from_env({"VERTEXDIST_HEALTH": HealthSpec(silence="never").env_value()}).silence is None
    )


def test_the_ray_driver_s_watcher_counts_no_optimizer_steps() -> None:
    driver = Watcher({"RANK": "0", "WORLD_SIZE": "1", ROLE_VARIABLE: "ray driver"})
    driver._hook(None, None, None)  # the driver's own torch step, if it makes one
    assert driver.steps == 0 and driver.beat()["role"] == "ray driver"
    rank = Watcher({"RANK": "0", "WORLD_SIZE": "1"})
    rank._hook(None, None, None)
    assert rank.steps == 1 and rank.beat()["role"] == ""
