"""A job that says nothing: its replicas printed no line and its ranks made no step for `silence` seconds.
Then the job gets one status line naming where each rank's main thread is, and goes on; a new line comes only
after the job spoke or stepped again and fell silent once more. Pure: heartbeats in, a line out.

Before the first step the hang clock (`verdict`) has not started, so a rank stuck in its first data read, or a
Ray driver waiting on pyarrow's Cloud Storage client, ends no job: this line is what tells the user where it
waits. The Ray driver reports as a rank of its own (role "ray driver").
"""

from __future__ import annotations

from collections.abc import Sequence

from vertexdist.health.verdict import Beat, last_progress

SILENCE_HEAD = "no output and no step for "


def quiet_since(beats: Sequence[Beat], last_output: float | None, started: float) -> float:
    """When the job last showed life: its last printed line, its last step, or its start."""
    return max(t for t in (last_output, last_progress(beats), started) if t is not None)


def duration_text(seconds: float) -> str:
    """`2m0s`, `45s`, `1h2m`."""
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


def _rank_text(beat: Beat) -> str:
    who = f"rank {beat.get('rank')} ({beat.get('replica')}"
    who += f", {beat['role']})" if beat.get("role") else ")"
    where = beat.get("top") or beat.get("where") or "an unknown place"
    state = beat.get("state") or ""
    step = int(beat.get("step") or 0)
    doing = f"{state}, " if state and state not in ("starting", "exited") else ""
    return f"{who} is in {where} ({doing}{'before its first step' if not step else f'at step {step}'})"


def silence_line(beats: Sequence[Beat], quiet_s: float) -> str:
    """The job log's line for a job quiet for `quiet_s` seconds: every rank that reported, where it is."""
    head = f"{SILENCE_HEAD}{duration_text(quiet_s)}; the job goes on"
    alive = sorted((b for b in beats if b.get("state") != "exited"), key=lambda b: int(b.get("rank") or 0))
    if not alive:
        return f"{head}: no rank has said where it is yet (no health watcher reported)"
    return f"{head}: " + "; ".join(_rank_text(b) for b in alive)


def is_silence_line(text: str) -> bool:
    """Whether a job's line (its events' message, a `service` log line) is `silence_line`'s."""
    return text.startswith(SILENCE_HEAD)
