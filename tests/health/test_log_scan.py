"""A Vertex job's rank health read back from its replicas' log lines: the watcher's heartbeat line parsed by
the function beside its writer, each rank's latest heartbeat, its last stack dump and the verdict."""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

from vertexdist.backends.base import JobStatus, LogChunk
from vertexdist.health.log_scan import LogLine, scan
from vertexdist.jobs.ranks import log_health, log_report
from vertexdist.shipped.vertexdist_launcher import health as watcher

ENV = {
    "RANK": "3",
    "LOCAL_RANK": "1",
    "WORLD_SIZE": "4",
    "CLUSTER_SPEC": json.dumps({"task": {"type": "workerpool1", "index": 0}}),
}


def written_line(env: dict[str, str] = ENV, steps: int = 2) -> str:
    """The line a Vertex watcher prints: its own write path, with no run folder."""
    rank = watcher.Watcher(env)
    rank.dir = None
    for _ in range(steps):
        rank.on_step()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rank.write_beat()
    return out.getvalue().rstrip("\n")


def test_the_watchers_heartbeat_line_parses_back_from_its_text_and_from_its_json_payload() -> None:
    line = written_line()
    from_text = watcher.parse_log_line(line)
    assert from_text is not None
    assert (from_text["rank"], from_text["local_rank"], from_text["replica"], from_text["step"]) == (
        3,
        1,
        "workerpool1-0",
        2,
    )
    assert watcher.parse_log_line(json.loads(line)) == from_text  # Cloud Logging's jsonPayload


def test_other_lines_are_no_heartbeat() -> None:
    for line in (
        "epoch 1 loss 0.3",
        "",
        '{"message": "hello"}',
        '{"vertexdist_health": not json',
        '{"vertexdist_health": {"step": 3}}',  # no rank
        '{"vertexdist_health": "rank 0"}',
    ):
        assert watcher.parse_log_line(line) is None, line
    assert watcher.parse_log_line({"message": "vertexdist health: rank 0 step 1"}) is None


def test_each_ranks_latest_heartbeat_wins_in_either_form() -> None:
    old = written_line(steps=1)
    new = written_line(steps=4)
    zero = written_line({**ENV, "RANK": "0", "LOCAL_RANK": "0"}, steps=3)
    found = scan(
        [
            LogLine("workerpool1-0", old),
            LogLine("workerpool0-0", "vertexdist health: rank 0 step 3", json.loads(zero)),  # Vertex
            LogLine("workerpool1-0", "loss 0.1"),
            LogLine("workerpool1-0", new),
        ]
    )
    assert [(b["rank"], b["step"]) for b in found.beats] == [(0, 3), (3, 4)]
    assert found.stacks == {}
    assert found.verdict is None


def test_a_hung_ranks_dump_gives_its_stacks_and_the_verdict() -> None:
    stacks = (
        'Thread MainThread (most recent call last):\n  File "train.py", line 23, in fetch_shard\n    read()\n'
    )
    header = "rank 3 (workerpool1-0, local rank 1) at step 5\n"
    dump = watcher.dump_text("hung: no progress for 1800s; rank 3 is in fetch_shard", header + stacks)
    lines = [LogLine("workerpool1-0", text) for text in dump.splitlines()]
    lines.insert(2, LogLine("workerpool0-0", "other replica's line"))  # another replica, interleaved
    lines.append(LogLine("workerpool1-0", "vertexdist_launcher: replica exited with 124"))  # ends the dump
    found = scan([LogLine("workerpool1-0", written_line()), *lines])
    assert found.verdict == "hung: no progress for 1800s; rank 3 is in fetch_shard"
    assert found.stacks == {3: header + stacks}
    assert [b["rank"] for b in found.beats] == [3]


def test_the_report_of_an_ended_job_stops_its_clock_and_takes_the_jobs_hung_error() -> None:
    beat: dict[str, Any] = json.loads(written_line())
    beat["vertexdist_health"]["last_step_at"] = 1_700_000_000.0
    chunks = [LogChunk("workerpool1-0", "vertexdist health: rank 3 step 2", payload=beat)]
    status = JobStatus(
        name="projects/p/locations/l/customJobs/1",
        display_name="j",
        state="FAILED",
        end_time="2023-11-14T22:13:30Z",  # 10 s after the last step
        error="hung: no progress for 9s; rank 3 is in x",
    )
    found = log_report(log_health(chunks), status, now=1_800_000_000.0)
    assert found["ended"] is True
    assert [(r["rank"], r["step"], r["last_progress_s"]) for r in found["ranks"]] == [(3, 2, 10.0)]
    assert found["verdict"] == "hung: no progress for 9s; rank 3 is in x"


def test_a_structured_entry_from_cloud_logging_keeps_its_heartbeat_for_ranks() -> None:
    """On Vertex the line arrives parsed, as `jsonPayload`: its text is only the message, the beat is in the
    payload the logs backend's chunk keeps."""
    from google.cloud.logging_v2.entries import StructEntry
    from google.cloud.logging_v2.resource import Resource

    from vertexdist.backends.vertex.cloud_logging import CloudLoggingSource

    entry = StructEntry(
        payload=json.loads(written_line()),
        resource=Resource(type="ml_job", labels={"job_id": "1", "task_name": "workerpool1-0"}),
        severity="INFO",
    )
    chunk = CloudLoggingSource._chunk(entry, 0)
    assert chunk.text == "vertexdist health: rank 3 step 2"  # what `vertexdist logs` shows
    assert [(b["rank"], b["replica"], b["step"]) for b in log_health([chunk]).beats] == [
        (3, "workerpool1-0", 2)
    ]
