"""`logs` of the local backend: a job's replica log files as pages of lines in time order, as Cloud Logging
would give them (stdout INFO, stderr ERROR: `local.log_capture`). The cursor is each replica's byte offset
of its next line, so a follower gets every line once, however the pages fall.

A job's secret env values are masked in every page (`masked`), as local-run masks its live view: the run
folder keeps them in `secrets.json` (0600, in the user's 0700 folder) for that, since `job.json` holds them
masked (docs/commands/local-run.md, "Secrets in the run folder")."""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import itertools
from collections.abc import Iterator, Mapping
from pathlib import Path

from vertexdist.backends.base import LogChunk, LogQuery, LogsPage, severity_rank
from vertexdist.backends.local.run_folders import read_run_json
from vertexdist.errors import UsageError
from vertexdist.local.log_records import LogLine, LogReader
from vertexdist.private_files import write_private_json
from vertexdist.render import mask_text
from vertexdist.wire.timestamps import format_ns

PAGE_LINES = 5000
SECRETS = "secrets.json"


def keep_secrets(run_dir: Path, secrets: tuple[str, ...]) -> None:
    """Keep a job's secret values in its run folder (0600), only to mask them in its logs later."""
    if secrets:
        write_private_json(run_dir / SECRETS, {"values": list(secrets)})


def kept_secrets(run_dir: Path) -> tuple[str, ...]:
    values = read_run_json(run_dir / SECRETS).get("values")
    return tuple(str(v) for v in values if v) if isinstance(values, list) else ()


def masked(page: LogsPage, secrets: tuple[str, ...]) -> LogsPage:
    """The page with every secret value masked in its text."""
    if not secrets:
        return page
    chunks = [dataclasses.replace(c, text=mask_text(c.text, secrets)) for c in page.chunks]
    return dataclasses.replace(page, chunks=chunks)


def _keyed(replica: str, lines: list[LogLine], first: int) -> Iterator[tuple[int, str, LogLine]]:
    for line in itertools.islice(lines, first, None):
        yield line.time_ns, replica, line


class LocalLogs:
    """Readers of the log files seen so far (each reads only what was appended since it last read)."""

    def __init__(self) -> None:
        self._readers: dict[Path, LogReader] = {}

    def page(
        self,
        files: Mapping[str, Path],
        cursor: object | None,
        query: LogQuery | None,
        *,
        final: bool,
        limit: int = PAGE_LINES,
    ) -> LogsPage:
        """Up to `limit` lines after `cursor` (replica -> offset) that `query` keeps, oldest first."""
        query = query or LogQuery()
        if query.trial is not None:
            raise UsageError(
                "--trial picks a trial of a tuning job on Vertex or the emulator; a local job has none",
                hint="drop --trial",
            )
        offsets: dict[str, int] = dict(cursor) if isinstance(cursor, Mapping) else {}
        floor_ns = int(query.since * 1e9) if query.since is not None else None
        least = severity_rank(query.severity) if query.severity else 0
        pending = []
        for replica, path in sorted(files.items()):
            if query.replica is not None and replica != query.replica:
                continue
            lines = self._reader(path).lines(final=final)
            first = bisect.bisect_left(lines, offsets.get(replica, 0), key=lambda line: line.offset)
            pending.append(_keyed(replica, lines, first))
        chunks: list[LogChunk] = []
        more = False
        for time_ns, replica, line in heapq.merge(*pending, key=lambda item: (item[0], item[1])):
            if len(chunks) >= limit:
                more = True
                break
            offsets[replica] = line.offset + 1
            severity = line.severity
            if floor_ns is not None and time_ns < floor_ns:
                continue
            if severity_rank(severity) < least:
                continue
            chunks.append(LogChunk(replica, line.text, severity, format_ns(time_ns)))
        return LogsPage(chunks=chunks, cursor=offsets, more=more)

    def _reader(self, path: Path) -> LogReader:
        reader = self._readers.get(path)
        if reader is None:
            reader = self._readers[path] = LogReader(path)
        return reader
