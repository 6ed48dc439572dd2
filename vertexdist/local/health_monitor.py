"""A local job's rank-health monitor: reads the heartbeats its workers' watchers write into the run folder
(`vertexdist_launcher.health`), warns once per straggler, and ends a hung job with the verdict as its error.

local-run and the emulator both run jobs through `LocalJob`, which starts one monitor per job. The decisions
are `vertexdist.health.verdict`'s (pure); this module only reads files, writes the verdict and acts:

- hung: the verdict goes to `verdict.json`; every watcher then prints its stacks into its log and exits
  `HUNG_EXIT` once every rank has (`vertexdist_launcher.health.Watcher.await_dumps`). The job fails with the
  verdict (`impose_failure`); nothing is stopped before every rank's dump is there (`await_dumps`, which the
  runner calls too before it stops replicas), at most `DUMP_WAIT_S`; a rank whose dump is still missing is
  named in the job's log and in the summary; ranks still alive `EXIT_WAIT_S` later are stopped.
- `ranks_decide` (the emulator, which watches as Vertex does: `vertexdist_launcher.health.LOGS_VARIABLE`):
  each rank decides a hang itself; the monitor decides nothing, it takes up the first verdict a rank left
  (its dump marker), read against every rank's heartbeat so that it names the culprit
  (`health.verdict.blamed`), and ends the job with it as above.
- at the end: `summary.json` keeps the verdict, the stragglers and the end time, for `vertexdist ranks`.
- silent: no replica printed a line (its log file unchanged) and no rank stepped for `silence` seconds: one
  line (`vertexdist.health.silence`) names where each rank's main thread is, the Ray driver's included;
  the job goes on. One line per quiet spell.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from vertexdist.backends.base import JobError
from vertexdist.health.folder import SUMMARY_FILE, read_beats
from vertexdist.health.silence import quiet_since, silence_line
from vertexdist.health.verdict import blamed, hang_verdict, straggler_line, stragglers
from vertexdist.shipped.vertexdist_launcher import health as watcher
from vertexdist.spec.health import DEFAULT_HANG_TIMEOUT_S, DEFAULT_SILENCE_S, DEFAULT_STRAGGLER_RATIO

TICK_S = 1.0
EXIT_WAIT_S = 5.0
DUMP_WAIT_S = watcher.DUMP_WAIT_S + 2.0  # the ranks' own wait, and their last look at the folder
CODE_DEADLINE_EXCEEDED = 4  # google.rpc.Code, as the job's timeout


class Supervised(Protocol):
    """What the monitor needs of a LocalJob."""

    @property
    def done(self) -> bool: ...

    def impose_failure(self, error: JobError, *, stop: bool = False) -> None: ...

    def note(self, message: str) -> None: ...


@dataclass(frozen=True)
class HealthConfig:
    hang_timeout: float | None = float(DEFAULT_HANG_TIMEOUT_S)
    straggler_ratio: float = DEFAULT_STRAGGLER_RATIO
    silence: float | None = float(DEFAULT_SILENCE_S)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> HealthConfig:
        raw = env.get(watcher.CONFIG_VARIABLE)
        if not raw:
            return cls()
        try:
            data = dict(json.loads(raw))
        except (ValueError, TypeError):
            return cls()
        timeout = data.get("hang_timeout", DEFAULT_HANG_TIMEOUT_S)
        silence = data.get("silence", DEFAULT_SILENCE_S)
        return cls(
            float(timeout) if timeout else None,
            float(data.get("straggler_ratio", DEFAULT_STRAGGLER_RATIO)),
            float(silence) if silence else None,
        )


def no_stacks_line(rank: int, beat: Mapping[str, object] | None, waited_s: float) -> str:
    """What the job's log says of a rank of a hung job that left no stacks. Pure."""
    who = f"rank {rank}"
    if beat is not None:
        who += f" ({beat.get('replica')}, local rank {beat.get('local_rank')})"
    return (
        f"{who} left no stacks within {waited_s:g}s of the verdict: its process had ended before, or its "
        "watcher could not run (a thread holding the GIL); its last heartbeat is all there is of it"
    )


@dataclass
class HealthMonitor:
    job: Supervised
    health_dir: Path
    config: HealthConfig = field(default_factory=HealthConfig)
    clock: Callable[[], float] = time.time
    verdict: str | None = None
    flagged: dict[int, float] = field(default_factory=dict)
    started_at: float | None = None
    silence_told: float | None = None  # the quiet spell (its start) the last silence line was about
    no_stacks: list[int] | None = None  # once the dumps were waited for: the ranks that left none
    ranks_decide: bool = False  # each rank decides a hang itself; the first one's verdict is taken up
    _dumps_lock: threading.Lock = field(default_factory=threading.Lock)
    _verdict_lock: threading.Lock = field(default_factory=threading.Lock)

    def new_attempt(self) -> None:
        """A new attempt's ranks start afresh: the last attempt's heartbeats and verdict go."""
        self.started_at = self.clock()
        for name in (watcher.BEATS_DIR, watcher.STACKS_DIR):
            shutil.rmtree(self.health_dir / name, ignore_errors=True)
        (self.health_dir / watcher.VERDICT_FILE).unlink(missing_ok=True)
        for reached in self.health_dir.glob(f"{watcher.REACHED_PREFIX}*"):
            reached.unlink(missing_ok=True)
        self.health_dir.mkdir(parents=True, exist_ok=True)

    def check(self) -> str | None:
        """One look at the heartbeats: warn about new stragglers; the verdict if the job is hung."""
        beats = read_beats(self.health_dir)
        by_rank = {int(b["rank"]): b for b in beats}
        for found in stragglers(beats, self.config.straggler_ratio):
            if found.rank not in self.flagged:
                self.job.note(straggler_line(found, by_rank[found.rank]))
            self.flagged[found.rank] = max(found.slowdown, self.flagged.get(found.rank, 0.0))
        if self.verdict is None:
            if self.ranks_decide:
                if self.take_up_verdict():
                    self._after_verdict()
                return self.verdict
            self.verdict = hang_verdict(beats, self.clock(), self.config.hang_timeout)
            if self.verdict is not None:
                self._end_hung(self.verdict)
        return self.verdict

    def ranks_verdict(self) -> str | None:
        """`ranks_decide`: the verdict of the first rank that called the job hung (its dump marker holds
        it), naming the culprit where the heartbeats show another one; None while no rank has."""
        markers = []
        for path in (self.health_dir / watcher.STACKS_DIR).glob(f"rank-*{watcher.DUMPED_SUFFIX}"):
            with contextlib.suppress(OSError, UnicodeDecodeError):
                markers.append((path.stat().st_mtime, path.read_text(encoding="utf-8").strip()))
        first = next((text for _at, text in sorted(markers) if text), None)
        return None if first is None else blamed(first, read_beats(self.health_dir))

    def take_up_verdict(self) -> bool:
        """`ranks_decide`: whether a rank has called the job hung. The first time, the job fails with that
        verdict (`impose_failure`) and `verdict.json` tells the ranks that have not decided yet and their
        launchers. Never waits: the runner asks it as a replica fails, before it restarts anything."""
        if not self.ranks_decide:
            return False
        with self._verdict_lock:
            if self.verdict is None:
                found = self.ranks_verdict()
                if found is None:
                    return False
                self._call_hung(found)
        return True

    def check_silence(self, last_output_at: Callable[[], float | None]) -> str | None:
        """One look for silence (`last_output_at()`: when a replica last printed, LocalJob's): the line,
        once per quiet spell that has lasted `silence` seconds."""
        if self.config.silence is None or self.verdict is not None:
            return None
        now = self.clock()
        if self.started_at is None:
            self.started_at = now
        beats = read_beats(self.health_dir)
        since = quiet_since(beats, last_output_at(), self.started_at)
        if now - since < self.config.silence or self.silence_told == since:
            return None
        self.silence_told = since
        line = silence_line(beats, now - since)
        self.job.note(line)
        return line

    def _end_hung(self, verdict: str) -> None:
        """The job fails with `verdict`; its ranks print their stacks and exit `HUNG_EXIT` themselves (their
        replicas then exit with it); what is left `EXIT_WAIT_S` later is stopped."""
        self._call_hung(verdict)
        self._after_verdict()

    def _call_hung(self, verdict: str) -> None:
        self.verdict = verdict
        self.job.impose_failure(JobError(CODE_DEADLINE_EXCEEDED, verdict))
        self.job.note(verdict)
        path = self.health_dir / watcher.VERDICT_FILE
        path.write_text(json.dumps({"verdict": verdict, "at": self.clock()}), encoding="utf-8")

    def _after_verdict(self) -> None:
        """Every rank's dump waited for, then what is left `EXIT_WAIT_S` later stopped."""
        assert self.verdict is not None
        self.await_dumps()
        deadline = time.monotonic() + EXIT_WAIT_S
        while time.monotonic() < deadline and not self.job.done:
            time.sleep(0.1)
        self.job.impose_failure(JobError(CODE_DEADLINE_EXCEEDED, self.verdict), stop=True)

    def await_dumps(self, bound_s: float = DUMP_WAIT_S) -> list[int]:
        """Once the job is called hung: wait until every rank has left its dump, at most `bound_s`; each rank
        still without one is named in the job's log (once). The ranks without one; [] for a job not hung."""
        if self.verdict is None:
            return []
        with self._dumps_lock:
            if self.no_stacks is None:
                beats = read_beats(self.health_dir)
                size = max([int(b.get("world_size") or 0) for b in beats] + [len(beats)])
                ranks = [str(r) for r in range(size)]
                folder = str(self.health_dir / watcher.STACKS_DIR)
                missing = watcher.wait_for_dumps(folder, ranks, bound_s)
                self.no_stacks = [int(r) for r in missing]
                by_rank = {int(b["rank"]): b for b in beats}
                for rank in self.no_stacks:
                    self.job.note(no_stacks_line(rank, by_rank.get(rank), bound_s))
            return self.no_stacks

    def write_summary(self) -> None:
        summary = {
            "verdict": self.verdict,
            "no_stacks": self.no_stacks or [],
            "stragglers": [{"rank": r, "slowdown": s} for r, s in sorted(self.flagged.items())],
            "ended_at": self.clock(),
        }
        with contextlib.suppress(OSError):
            (self.health_dir / SUMMARY_FILE).write_text(json.dumps(summary), encoding="utf-8")

    def run(self) -> None:
        while not self.job.done:
            with contextlib.suppress(Exception):  # a broken heartbeat never takes the job down
                self.check()
            heard = getattr(self.job, "last_output_at", None)
            if callable(heard):
                with contextlib.suppress(Exception):
                    self.check_silence(heard)
            time.sleep(TICK_S)
        self.write_summary()

    def start(self) -> HealthMonitor:
        self.health_dir.mkdir(parents=True, exist_ok=True)
        threading.Thread(target=self.run, name="vertexdist-health-monitor", daemon=True).start()
        return self
