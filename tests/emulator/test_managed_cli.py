"""`vertexdist submit --managed` and `vertexdist managed ...` against the emulator: the real entry point, and
a real controller process SIGKILLed while its attempt runs, then resumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from vertexdist.emulator import Emulator
from vertexdist.managed import store as st
from vertexdist.managed.attempts import MANAGED_LABEL
from vertexdist.managed.service import open_store

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SLOW = "import time\ntime.sleep(6)\nprint('done')\n"


def labelled(emu: Emulator, label: str) -> int:
    pipelines = emu.store.list("projects/test-proj/locations/us-central1", "trainingPipelines")
    return sum(1 for p in pipelines if p.get("labels", {}).get(MANAGED_LABEL) == label)


def test_submit_managed_prints_its_id_first_and_status_shows_each_attempt(
    emu: Emulator, cli: Any, write_template: Any
) -> None:
    code, out, err = cli("submit", str(write_template(name="managed-cli-ok")), "--managed")
    assert code == 0, err
    first = out.splitlines()[0]
    assert first.startswith("managed: m-")
    managed_id = first.removeprefix("managed: ")
    code, out, _ = cli("managed", "status", managed_id, "--json")
    found = json.loads(out)
    assert set(found) == {"id", "state", "template", "attempts"}
    assert found["id"] == managed_id and found["state"] == "SUCCEEDED"
    assert [set(a) for a in found["attempts"]] == [
        {"job", "location", "machine_type", "scheduling_strategy", "state", "reason", "started", "ended"}
    ]
    assert found["attempts"][0]["reason"] == "SUCCEEDED"
    code, out, _ = cli("managed", "list")
    assert code == 0 and managed_id in out and "SUCCEEDED" in out
    code, _, err = cli("managed", "status", "m-nope")
    assert code != 0 and "no managed job 'm-nope'" in err and "Traceback" not in err


def test_a_failed_job_exits_non_zero(emu: Emulator, cli: Any, write_template: Any) -> None:
    code, out, err = cli(
        "submit", str(write_template("raise SystemExit(3)\n", name="managed-cli-bug")), "--managed"
    )
    assert code != 0 and out.startswith("managed: ")
    assert "FAILED" in err and "max_restarts_on_errors is 0" in err


def _wait_for(predicate: Any, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_the_controller_killed_while_running_is_resumed_without_a_second_job(
    emu: Emulator, cli: Any, write_template: Any
) -> None:
    path = write_template(SLOW, name="managed-cli-kill")
    cli("managed", "list")  # the cli fixture's folder becomes this process's folder
    controller = subprocess.Popen(
        [sys.executable, "-m", "vertexdist", "submit", str(path), "--managed"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ),
        cwd=Path.cwd(),
    )
    assert controller.stdout is not None
    managed_id = controller.stdout.readline().decode().strip().removeprefix("managed: ")
    store = open_store()
    _wait_for(lambda: any(a.phase == st.CREATED for a in store.attempts(managed_id)))
    controller.send_signal(signal.SIGKILL)
    controller.wait(timeout=30)
    assert store.get(managed_id).state == st.RUNNING
    code, _, err = cli("managed", "resume", managed_id)
    assert code == 0, err
    assert [a.reason for a in store.attempts(managed_id)] == ["SUCCEEDED"]
    assert labelled(emu, f"{managed_id}-a1") == 1


def test_cancel_stops_the_running_attempt_and_makes_no_other(
    emu: Emulator, cli: Any, write_template: Any
) -> None:
    path = write_template("import time\ntime.sleep(60)\n", name="managed-cli-cancel")
    code, out, err = cli("submit", str(path), "--managed", "--detach")
    assert code == 0, err
    managed_id = out.splitlines()[0].removeprefix("managed: ")
    store = open_store()
    _wait_for(lambda: any(a.phase == st.CREATED for a in store.attempts(managed_id)))
    code, out, err = cli("managed", "cancel", managed_id)
    assert code == 0, err
    assert "CANCELLED" in out
    _wait_for(lambda: emu.store.get(store.attempts(managed_id)[0].job or "")["state"].endswith("CANCELLED"))
    time.sleep(1.5)
    assert [a.reason for a in store.attempts(managed_id)] == ["CANCELLED"]
    code, _, err = cli("managed", "resume", managed_id)
    assert code != 0 and "CANCELLED" in err


def test_managed_logs_shows_the_attempt_s_job_lines_from_the_emulator(
    emu: Emulator, cli: Any, write_template: Any
) -> None:
    code, out, err = cli("submit", str(write_template(name="managed-cli-logs")), "--managed")
    assert code == 0, err
    managed_id = out.splitlines()[0].removeprefix("managed: ")
    (attempt,) = open_store().attempts(managed_id)
    code, out, err = cli("managed", "logs", managed_id, "--follow")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"== attempt 1 of {managed_id}: {attempt.job} SUCCEEDED"
    assert "[workerpool0-0] hello from managed-cli-logs" in lines[1:]
