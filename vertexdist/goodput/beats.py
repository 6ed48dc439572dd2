"""Each rank's last heartbeat from a job's log lines (Vertex: the watchers' structured lines), read from the
newest line back and stopping once every rank of the world has been seen: the ledger needs no earlier beat,
so a long job's lines cost what its ranks do, not what its steps do. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vertexdist.shipped.vertexdist_launcher.health import LOG_KEY, parse_log_line


def last_beats(lines: Sequence[tuple[str, Mapping[str, Any] | None]]) -> list[dict[str, Any]]:
    """`lines` in time order, each (text, the JSON payload Cloud Logging parsed or None); the latest
    heartbeat of each rank, by rank."""
    found: dict[int, dict[str, Any]] = {}
    world: int | None = None
    for text, payload in reversed(lines):
        if LOG_KEY not in text and not (payload and LOG_KEY in payload):
            continue
        beat = (parse_log_line(payload) if payload else None) or parse_log_line(text)
        if beat is None or beat["rank"] in found:
            continue
        found[beat["rank"]] = beat
        size = beat.get("world_size")
        if isinstance(size, int) and size > 0:
            world = max(world or 0, size)
        if world is not None and len(found) >= world:
            break
    return [found[rank] for rank in sorted(found)]
