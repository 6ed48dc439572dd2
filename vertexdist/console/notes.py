"""A job's own lines in its page: what the job's runtime said of it from outside its replicas.

A local run's events keep them (the health monitor's notes: a silent job, a straggler, a verdict); a Vertex or
emulator job's logs have them as the lines of task `service` (the emulator's: `emulator.service_log`). Both
go into the page's timeline, and the latest line of a silent job (`vertexdist.health.silence`) stands under
the page's header while the job runs. Pure: timelines and log chunks in, timelines and a notice out.
"""

from __future__ import annotations

from collections.abc import Iterable

from vertexdist.backends.base import TERMINAL_STATES, LogChunk, StateChange
from vertexdist.health.silence import is_silence_line
from vertexdist.wire.timestamps import parse_ns

SERVICE_TASK = "service"  # the task of a job's own log lines, Vertex's and the emulator's
HANG_HEAD = "hung: "  # health.verdict.hang_verdict's lines
STRAGGLER_HEAD = "warning: straggler: "  # health.verdict.straggler_line's
MAX_NOTES = 200  # a job's own lines read for its page: the latest of them


def _ns(stamp: str) -> int:
    try:
        return parse_ns(stamp)
    except (TypeError, ValueError):
        return 0


def service_notes(chunks: Iterable[LogChunk]) -> list[StateChange]:
    """Each line of task `service` as a timeline step (its state is filled in by `merge_notes`)."""
    notes = []
    for chunk in chunks:
        if chunk.replica != SERVICE_TASK or not chunk.timestamp:
            continue
        notes += [
            StateChange(chunk.timestamp, "", SERVICE_TASK, message=line) for line in chunk.text.splitlines()
        ]
    return notes[-MAX_NOTES:]


def merge_notes(steps: list[StateChange], notes: list[StateChange]) -> list[StateChange]:
    """`steps` (the job's state changes, in time order) with `notes` among them by time, each note with
    the job's state at its time."""
    merged = sorted([*steps, *notes], key=lambda step: _ns(step.time))  # stable: a tie keeps steps first
    state, out = "PENDING", []
    for step in merged:
        if step.replica == SERVICE_TASK and not step.state:
            step = StateChange(step.time, state, step.replica, step.exit_code, step.message)
        elif step.replica is None:
            state = step.state
        out.append(step)
    return out


def note_kind(message: str) -> str:
    """What a job's own line says, for its colour in the page: `hang` (a hang verdict), `straggler` (a
    straggler's warning: no failure, so not a hang's red), `silence` (a silent job), else ""."""
    if message.startswith(HANG_HEAD):
        return "hang"
    if message.startswith(STRAGGLER_HEAD):
        return "straggler"
    if is_silence_line(message):
        return "silence"
    return ""


def silence_notice(timeline: list[StateChange], state: str) -> StateChange | None:
    """The latest silence line of a job still running (`timeline`'s, a local run's event or a `service`
    line); None for a job that ended or never fell silent."""
    if state in TERMINAL_STATES:
        return None
    for step in reversed(timeline):
        if step.replica in (None, SERVICE_TASK) and is_silence_line(step.message):
            return step
    return None
