"""A replica stalled in a read that never returns, before its first step (issue 46): the job prints nothing
and makes no step, no hang clock has started, and within `health.silence` local-run prints one line naming
the frame the rank waits in; the job goes on until its own timeout."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.interrupts import default_sigint

pytestmark = [pytest.mark.integration]

STALLS = """\
import queue
print("loading the first shard", flush=True)
queue.Queue().get()  # line 3: the read that never returns
"""


def test_a_replica_stalled_before_its_first_step_gets_a_line_naming_its_frame(tmp_path: Path) -> None:
    (tmp_path / "user_script.py").write_text(STALLS)
    doc = {
        "display_name": "silent-job",
        "project": "my-project",
        "staging_bucket": "gs://my-bucket/staging",
        "machine_type": "n1-standard-4",
        "replica_count": 1,
        "timeout": "90s",
        "health": {"silence": "4s"},
        "trainer": {"script": "user_script.py", "launcher": "python"},
    }
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(doc))
    job = subprocess.Popen(
        [sys.executable, "-m", "vertexdist", "local-run", "job.yaml", "--out", str(tmp_path / "run")],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        preexec_fn=default_sigint,  # as from a shell: Ctrl-C stops it
    )
    seen: list[str] = []
    try:
        assert job.stdout is not None
        for line in job.stdout:  # the job's own timeout ends the stream if the line never comes
            seen.append(line)
            if "no output and no step for" in line:
                break
    finally:
        job.send_signal(signal.SIGINT)  # Ctrl-C: local-run stops the job
        try:
            job.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            job.kill()
            job.communicate()
    [told] = [line for line in seen if "no output and no step for" in line]
    # queue.get waits in its Condition: the innermost frame, in the standard library
    assert "the job goes on: rank 0 (workerpool0-0) is in wait (threading.py:" in told, told
    assert "(before its first step)" in told
    assert any("loading the first shard" in line for line in seen)
