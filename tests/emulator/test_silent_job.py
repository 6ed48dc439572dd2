"""A replica stalled in a read that never returns, before its first step (issue 46), through `submit
--emulator --follow`: within `health.silence` the follow shows the job's own line (task `service`, as Vertex's
own lines are) naming the frame the rank waits in, while the job goes on."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.interrupts import default_sigint
from vertexdist.emulator import Emulator

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

# The rank blocks opening a FIFO no one writes yet: a read that never returns, until the test lets it go.
STALLS = """\
import os, sys
print("loading the first shard", flush=True)
shard = open(os.environ["SHARD_FIFO"]).read()  # line 3: the read
print("read", shard.strip(), flush=True)
"""


def test_a_replica_stalled_before_its_first_step_gets_a_line_naming_its_frame_in_the_follow(
    emu: Emulator, tmp_path: Path, write_template: Any
) -> None:
    # If the line never comes, the job's own timeout (90s) ends the job and the stream.
    fifo = tmp_path / "shard"
    os.mkfifo(fifo)
    template = write_template(
        STALLS,
        name="silent-emulator-job",
        env={"SHARD_FIFO": str(fifo)},
        extra="timeout: 90s\nhealth:\n  silence: 2s\n",
    )
    command = [sys.executable, "-m", "vertexdist", "submit", str(template), "--emulator", "--follow"]
    # --emulator finds the session's emulator serving its folder (as one `vertexdist emulator start` runs)
    command += ["--emulator-data-dir", str(emu.data_dir)]
    job = subprocess.Popen(
        command,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        preexec_fn=default_sigint,  # as from a shell: Ctrl-C stops it
    )
    seen: list[str] = []
    try:
        assert job.stdout is not None
        for line in job.stdout:  # the stream ends with the job if the line never comes
            seen.append(line)
            if "no output and no step for" in line:
                break
    finally:
        # The read returns and the job ends by itself in the session's emulator (one that ended has no
        # reader: ENXIO); Ctrl-C stops the follow, not the job.
        with contextlib.suppress(OSError), open(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK), "w") as shard:
            shard.write("shard-0\n")
        job.send_signal(signal.SIGINT)
        try:
            job.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            job.kill()
            job.communicate()
    [told] = [line for line in seen if "no output and no step for" in line]
    assert told.startswith("[service] "), told
    # the rank's top frame: the user's own line where the read waits
    assert "the job goes on: rank 0 (workerpool0-0) is in <module> (" in told, told
    assert ".py:3)" in told and "(before its first step)" in told, told
    assert any("loading the first shard" in line for line in seen[: seen.index(told)])
