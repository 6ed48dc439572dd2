"""A job's health folder (`<run folder>/health`), as the watchers and the local monitor leave it: each rank's
last heartbeat, its last stacks, the verdict and the summary. Reading it is all this module does, besides
asking running watchers for their stacks (a request file they look for ten times a second)."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from pathlib import Path
from typing import Any

# Held equal to vertexdist_launcher.health's names by tests/health/test_verdict.py.
BEATS_DIR = "ranks"
STACKS_DIR = "stacks"
VERDICT_FILE = "verdict.json"
REQUEST_PREFIX = "stacks-"
SUMMARY_FILE = "summary.json"
HEALTH_DIR = "health"


def _json(path: Path) -> dict[str, Any]:
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict):
            return data
    return {}


def read_beats(health_dir: Path) -> list[dict[str, Any]]:
    """Every rank's last heartbeat, each field of its type (`checked_beat`): a bad file is skipped."""
    from vertexdist.shipped.vertexdist_launcher.health import checked_beat

    beats = [checked_beat(_json(p)) for p in sorted((health_dir / BEATS_DIR).glob("rank-*.json"))]
    return [b for b in beats if b is not None]


def read_summary(health_dir: Path) -> dict[str, Any]:
    """What the monitor kept at the job's end: verdict, stragglers, ended_at ({} while it runs)."""
    return _json(health_dir / SUMMARY_FILE)


def read_verdict(health_dir: Path) -> str | None:
    verdict = _json(health_dir / VERDICT_FILE).get("verdict") or read_summary(health_dir).get("verdict")
    return str(verdict) if verdict else None


def read_stacks(health_dir: Path) -> dict[int, str]:
    """Each rank's last stacks, by global rank."""
    found = {}
    for path in (health_dir / STACKS_DIR).glob("rank-*.txt"):
        with contextlib.suppress(OSError, ValueError):
            found[int(path.stem.split("-", 1)[1])] = path.read_text(encoding="utf-8")
    return dict(sorted(found.items()))


def ask_stacks(health_dir: Path, ranks: int, timeout_s: float = 5.0) -> dict[int, str]:
    """Ask the running watchers for their stacks now; what came back within `timeout_s` (newer files)."""
    asked_at = time.time()
    request = health_dir / f"{REQUEST_PREFIX}{uuid.uuid4().hex}"
    request.write_text(str(asked_at), encoding="utf-8")
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            fresh = [
                p
                for p in (health_dir / STACKS_DIR).glob("rank-*.txt")
                if p.stat().st_mtime >= asked_at - 0.01
            ]
            if len(fresh) >= ranks:
                break
            time.sleep(0.1)
    finally:
        request.unlink(missing_ok=True)
    return read_stacks(health_dir)
