"""A Vertex job's rank health from its replicas' log lines (docs/guide/rank-health.md), where its watchers
write it there: no run folder. Pure: lines in, each rank's latest heartbeat, last stacks and the verdict out.

- A heartbeat is a line of `vertexdist_launcher.health.log_line` (its JSON text, or the `jsonPayload` Cloud
  Logging made of it), read back by that module's `parse_log_line`: the format lives beside its writer.
- A hung rank writes `health.dump_text`: the verdict line, then `DUMP_MARK` with `rank N (...) at step S` and
  every thread's stack as a traceback prints it (`Thread T (most recent call last):`, indented frames). The
  dump ends at the first line of that replica that is neither.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from vertexdist.shipped.vertexdist_launcher.health import (
    DUMP_MARK,
    MARK_VARIABLE,
    VERDICT_MARK,
    parse_log_line,
    parse_verdict_line,
)

_RANK = re.compile(r"rank (\d+)\b")


@dataclass(frozen=True)
class LogLine:
    """One log entry of one replica: its text and, where Cloud Logging parsed it, its JSON payload."""

    replica: str
    text: str
    payload: Mapping[str, Any] | None = None


@dataclass
class LogHealth:
    beats: list[dict[str, Any]] = field(default_factory=list)  # each rank's latest heartbeat
    stacks: dict[int, str] = field(default_factory=dict)  # each rank's last dump
    verdict: str | None = None  # the first hung rank's verdict


def _stack_line(line: str) -> bool:
    return line.startswith("  ") or (line.startswith("Thread ") and line.endswith("(most recent call last):"))


def job_mark(spec: Any) -> str | None:
    """The job's health mark, from the env of its spec (a CustomJobSpec, as Vertex returns it); None for a
    job made without one (before marks, or not by vertexdist), whose lines are read unchecked."""
    pools = spec.get("workerPoolSpecs") if isinstance(spec, Mapping) else None
    for pool in pools if isinstance(pools, list) else []:
        code = (
            (pool.get("pythonPackageSpec") or pool.get("containerSpec"))
            if isinstance(pool, Mapping)
            else None
        )
        for entry in (code.get("env") or []) if isinstance(code, Mapping) else []:
            if isinstance(entry, Mapping) and entry.get("name") == MARK_VARIABLE and entry.get("value"):
                return str(entry["value"])
    return None


class LogScan:
    """A scan that takes a job's lines as they come (`add`, in time order) and tells what they show so far
    (`result`): the console's Ranks panel keeps one per job and feeds it only the lines after its cursor.

    With the job's `mark`, only the watchers' own lines count: heartbeats and verdicts carrying the mark (a
    line the script prints that looks like one is skipped), and a stack dump only right after its replica's
    marked verdict. A line whose fields are not of their types is skipped, never an error."""

    def __init__(self, mark: str | None = None) -> None:
        self.mark = mark
        self.vouched: set[str] = set()  # replicas whose marked verdict came last: their dump is theirs
        self.found = LogHealth()
        self.latest: dict[int, dict[str, Any]] = {}
        self.open: dict[str, tuple[int, list[str]]] = {}  # replica -> a dump being read
        self.previous: dict[str, str] = {}

    def close(self, replica: str) -> None:
        dump = self.open.pop(replica, None)
        if dump is not None:
            rank, lines = dump
            self.found.stacks[rank] = "\n".join(lines) + "\n"

    def text_line(self, replica: str, line: str) -> None:
        if self.mark is not None and line.startswith(VERDICT_MARK) and not line.startswith(DUMP_MARK):
            self.previous[replica] = line  # the verdict's text, between its marked line and the dump
            return
        if line.startswith(DUMP_MARK):
            self.close(replica)
            header = line[len(DUMP_MARK) :]
            rank = _RANK.match(header)
            if rank is not None and (self.mark is None or replica in self.vouched):
                self.open[replica] = (int(rank.group(1)), [header])
            self.vouched.discard(replica)
            before = self.previous.get(replica, "")
            if self.mark is None and self.found.verdict is None and before.startswith(VERDICT_MARK):
                self.found.verdict = before[len(VERDICT_MARK) :].strip() or None
        elif replica in self.open and _stack_line(line):
            self.open[replica][1].append(line)
        else:
            self.close(replica)
            self.vouched.discard(replica)
        self.previous[replica] = line

    def add(self, entry: LogLine) -> None:
        beat = parse_log_line(entry.payload, self.mark) if entry.payload else None
        beat = beat or parse_log_line(entry.text, self.mark)
        if beat is not None:
            self.close(entry.replica)
            self.latest[int(beat["rank"])] = beat
            return
        verdict = parse_verdict_line(entry.payload, self.mark) if entry.payload else None
        verdict = verdict or parse_verdict_line(entry.text, self.mark)
        if verdict is not None:
            self.close(entry.replica)
            if self.mark is not None:
                self.vouched.add(entry.replica)
                if self.found.verdict is None:
                    self.found.verdict = verdict[1]
            return
        for line in entry.text.splitlines() or [""]:
            self.text_line(entry.replica, line.rstrip("\r"))

    def result(self) -> LogHealth:
        """What the lines so far show; a dump still being read counts as it stands (more lines may follow)."""
        stacks = dict(self.found.stacks)
        for rank, lines in self.open.values():
            stacks[rank] = "\n".join(lines) + "\n"
        return LogHealth(
            beats=[self.latest[rank] for rank in sorted(self.latest)],
            stacks=dict(sorted(stacks.items())),
            verdict=self.found.verdict,
        )


def scan(lines: Iterable[LogLine], mark: str | None = None) -> LogHealth:
    """Each rank's latest heartbeat, its last stack dump and the verdict, from a job's lines in time order
    (only the lines carrying the job's `mark`, where it has one)."""
    state = LogScan(mark)
    for line in lines:
        state.add(line)
    return state.result()
