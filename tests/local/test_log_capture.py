"""A replica's stdout and stderr through `LogCapture` (real processes): one merged log as before, the index
beside it telling the streams apart, and `LogReader` turning both into lines with severity and time."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from vertexdist.local import JobContext, start_job
from vertexdist.local.log_capture import LogCapture, index_path
from vertexdist.local.log_records import LogReader


def capture(log: Path, code: str, processes: int = 1) -> None:
    """Run `code` as the runner runs a replica: stdout into the log, stderr through a LogCapture."""
    with open(log, "ab") as stdout:
        started = LogCapture(log)
        procs = [
            subprocess.Popen([sys.executable, "-c", code, str(n)], stdout=stdout, stderr=started.stderr)
            for n in range(processes)
        ]
        started.start("test")
    assert all(proc.wait(timeout=60) == 0 for proc in procs)
    assert started.wait(10)


def test_stdout_and_stderr_lines_keep_their_stream_in_one_log(tmp_path: Path) -> None:
    log = tmp_path / "workerpool0-0.log"
    code = (
        "import sys\n"
        "for i in range(3):\n"
        "    print('out', i, flush=True)\n"
        "    print('err', i, file=sys.stderr, flush=True)\n"
    )
    capture(log, code)
    text = log.read_text()
    assert sorted(text.splitlines()) == sorted(f"{s} {i}" for s in ("out", "err") for i in range(3))
    lines = LogReader(log).lines()
    assert {line.text: line.stderr for line in lines} == {
        f"{s} {i}": s == "err" for s in ("out", "err") for i in range(3)
    }
    assert [line.offset for line in lines] == sorted(line.offset for line in lines)
    times = [line.time_ns for line in lines]
    assert times == sorted(set(times))  # strictly increasing within a replica
    assert abs(times[0] - time.time_ns()) < 60 * 10**9


def test_a_partial_stderr_line_waits_for_its_newline_unless_stderr_goes_quiet(tmp_path: Path) -> None:
    log = tmp_path / "r.log"
    code = (
        "import sys, time\n"
        "sys.stderr.write('progress 50%'); sys.stderr.flush()\n"
        "time.sleep(0.01)\n"
        "sys.stderr.write(' ... 100%\\n'); sys.stderr.flush()\n"
        "time.sleep(0.5)\n"
        "sys.stderr.write('prompt> '); sys.stderr.flush(); time.sleep(1.0)\n"
        "print('answer', file=sys.stderr)\n"
    )
    capture(log, code)
    assert log.read_text().splitlines() == ["progress 50% ... 100%", "prompt> answer"]
    regions = [record.split() for record in index_path(log).read_text().splitlines()]
    prompt = log.read_bytes().index(b"prompt> ")
    # "prompt> " went out on its own once stderr was quiet, "answer" after it.
    assert ["e", str(prompt), str(prompt + len(b"prompt> "))] in [r[:3] for r in regions]
    assert [(line.text, line.stderr) for line in LogReader(log).lines()] == [
        ("progress 50% ... 100%", True),
        ("prompt> answer", True),
    ]


def test_stdout_is_the_log_file_itself_and_stderr_a_pipe(tmp_path: Path) -> None:
    # Through a pipe, every write would wake the copying thread, and workers of one replica printing at
    # once would split each other's lines far more often (a print is two writes): stdout stays direct.
    log = tmp_path / "r.log"
    with open(log, "ab") as stdout:
        started = LogCapture(log)
        proc = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(30)"], stdout=stdout, stderr=started.stderr
        )
        started.start("test")
    try:
        assert os.readlink(f"/proc/{proc.pid}/fd/1") == str(log)
        assert os.readlink(f"/proc/{proc.pid}/fd/2").startswith("pipe:")
    finally:
        proc.kill()
        proc.wait()
    assert started.wait(10)


def test_the_reader_reads_only_what_was_appended_and_an_unterminated_line_when_final(tmp_path: Path) -> None:
    log = tmp_path / "r.log"
    log.write_bytes(b"one\ntwo\nthr")  # no index: an older log, or one written by something else
    reader = LogReader(log)
    assert [line.text for line in reader.lines()] == ["one", "two"]
    assert [line.text for line in reader.lines(final=True)] == ["one", "two", "thr"]
    with open(log, "ab") as handle:
        handle.write(b"ee\r\nfour\n")
    lines = reader.lines()
    assert [line.text for line in lines] == ["one", "two", "three", "four"]
    assert not any(line.stderr for line in lines)
    assert [line.offset for line in lines] == [0, 4, 8, 15]


def _pool(code: str, replicas: int = 1) -> dict[str, Any]:
    return {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": replicas,
        "containerSpec": {"imageUri": "example.com/standin:latest", "command": [sys.executable, "-c", code]},
    }


def test_the_runner_captures_every_replica_and_notes_a_restart_as_stdout(tmp_path: Path) -> None:
    marker = tmp_path / "failed-once"
    code = (
        "import os, pathlib, sys\n"
        "print('hello from', os.environ['CLOUD_ML_JOB_ID'])\n"
        "print('trouble', file=sys.stderr)\n"
        f"m = pathlib.Path({str(marker)!r} + os.environ['RANK'])\n"
        "if not m.exists():\n"
        "    m.touch(); sys.exit(3)\n"
    )
    spec = {"workerPoolSpecs": [_pool(code), _pool(code)], "scheduling": {"restartJobOnWorkerRestart": True}}
    ctx = JobContext(job_id="t", project="p", region="us-central1", gcs_root=str(tmp_path / "gcs"))
    job = start_job(spec, ctx, run_dir=tmp_path / "run", fetch_package=Path, grace_s=2.0, max_restarts=2)
    result = job.wait(120)
    assert result is not None and result.state.value == "JOB_STATE_SUCCEEDED", result
    assert result.restarts >= 1
    marker = ("----- vertexdist: job restart 1 -----", False)
    for path in job.log_paths().values():
        lines = [(line.text, line.stderr) for line in LogReader(path).lines(final=True)]
        assert marker in lines
        # The last attempt ran to its end; an earlier one may have been stopped before it printed anything.
        restarts = [
            i for i, (text, _) in enumerate(lines) if text.startswith("----- vertexdist: job restart")
        ]
        assert all(not lines[i][1] for i in restarts)  # the runner's own lines are stdout (INFO)
        assert sorted(lines[restarts[-1] + 1 :]) == [("hello from t", False), ("trouble", True)]
