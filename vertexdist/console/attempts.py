"""One attempt of a managed job, as the console shows it: a value both the job pages (`console.jobs`) and the
managed jobs' reader (`console.managed`) use."""

from __future__ import annotations

from dataclasses import dataclass

from vertexdist.console.refs import JobRef


@dataclass(frozen=True)
class Attempt:
    """One attempt of a managed job: when it ran, how it ended, and why."""

    number: int
    state: str
    start_time: str | None = None
    end_time: str | None = None
    reason: str = ""
    job: JobRef | None = None  # the job this attempt ran as, where it has a page
