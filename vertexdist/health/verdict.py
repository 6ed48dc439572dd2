"""From the ranks' heartbeats (`vertexdist_launcher.health`): the table `vertexdist ranks` prints, the
stragglers, and whether the job is hung and who is to blame. Pure: plain dicts in, plain values out.

- The hang clock starts once every rank (`world_size` of them) has made its first step: a job still
  starting, a rank that joins late, or a long first step is never hung.
- Hung: no rank has made a step for `hang_timeout` seconds. The culprit is the rank that does not wait in
  a collective (if several, the one with the fewest steps); the others are said to wait where they wait.
  Where each rank decides a hang by itself (Vertex, the emulator), `blamed` reads the first one's verdict
  against every rank's last heartbeat, so that it names the culprit, not a rank that waits for it.
  A heartbeat's `step` counts the steps made; the verdict names the step a rank is in (one more).
- A straggler: its own step time (the step less the time it waited for the others), averaged over its last
  `WINDOW_STEPS` steps, is over `ratio` times the median of the other ranks', once it has made `MIN_STEPS`
  steps (the others' median: with two ranks, a median that counts the slow one would halve its slowdown),
  and its extra own time over that window is at least `MIN_EXTRA_S`: the watcher tells waiting from
  computing by a sample every 0.1 s, so over a short window one stray sample is a large ratio of nothing
  (issue 42: a rank beside a hung one was flagged 2.5x at step 5 on one sample).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MIN_STEPS = 5
# The others' median own step time is taken as at least this: where every rank spends its whole step in
# collectives (the bundled trainer: backward and its own all-reduce) it is ~0, and noise must not flag.
MIN_OWN_STEP_S = 0.01
# The watcher's window (`vertexdist_launcher.health.WINDOW`): the steps its own step time is averaged over.
WINDOW_STEPS = 20
# A straggler's own time over its window is at least this much more than the others': 5 of the watcher's
# 0.1 s samples. A rank slowed by 0.1 s a step is flagged by its 6th step, one slowed by 0.03 s by its 18th.
MIN_EXTRA_S = 0.5
ROW_KEYS = (
    "rank",
    "replica",
    "local_rank",
    "step",
    "steps_per_s",
    "own_step_s",
    "wait_share",
    "last_progress_s",
    "state",
    "where",
    "straggler",
    "slowdown",
)

Beat = Mapping[str, Any]


@dataclass(frozen=True)
class Straggler:
    rank: int
    slowdown: float  # own step time / the ranks' median
    state: str  # what it does now (its heartbeat's): computing, loading, waiting
    where: str
    steps: int  # the steps its own step time is averaged over


def _ranks_text(ranks: Sequence[int]) -> str:
    """`rank 3`, `ranks 0-2`, `ranks 0, 2`."""
    ordered = sorted(ranks)
    if len(ordered) == 1:
        return f"rank {ordered[0]}"
    if ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"ranks {ordered[0]}-{ordered[-1]}"
    return "ranks " + ", ".join(str(r) for r in ordered)


def all_started(beats: Sequence[Beat]) -> bool:
    """Every rank has joined (a heartbeat from each) and made its first step."""
    if not beats:
        return False
    world = max(int(b.get("world_size") or 1) for b in beats)
    started = {int(b["rank"]) for b in beats if b.get("first_step_at") is not None}
    return len(started) >= world


def last_progress(beats: Sequence[Beat]) -> float | None:
    times = [float(b["last_step_at"]) for b in beats if b.get("last_step_at") is not None]
    return max(times) if times else None


def culprit(beats: Sequence[Beat]) -> Beat | None:
    """The rank the others wait for: not in a collective; the one with the fewest steps among those."""
    if not beats:
        return None
    not_waiting = [b for b in beats if b.get("state") != "waiting"]
    pool = not_waiting or list(beats)
    low = min(int(b.get("step") or 0) for b in beats)
    behind = [b for b in pool if int(b.get("step") or 0) == low] or pool
    if not not_waiting and len(behind) == len(beats):
        return None  # every rank waits at the same step: no one to name
    return min(behind, key=lambda b: int(b["rank"]))


_NAMED_RANK = re.compile(r"^hung: [^;]*; rank (\d+) ")


def named_rank(verdict: str | None) -> int | None:
    """The culprit's rank that a verdict line (`hang_verdict`'s) names, if it names one."""
    found = _NAMED_RANK.match(verdict or "")
    return int(found.group(1)) if found else None


def hang_verdict(beats: Sequence[Beat], now: float, hang_timeout: float | None) -> str | None:
    """The verdict line when the job is hung, else None."""
    if hang_timeout is None or not all_started(beats):
        return None
    last = last_progress(beats)
    if last is None or now - last < hang_timeout:
        return None
    if all(b.get("state") == "exited" for b in beats):
        return None
    return "; ".join([f"hung: no progress for {now - last:.0f}s", *_blame(beats)])


def _blame(beats: Sequence[Beat]) -> list[str]:
    """The verdict's parts after its first: the culprit where there is one, then where the others are."""
    parts: list[str] = []
    who = culprit(beats)
    others = [b for b in beats if who is None or b["rank"] != who["rank"]]
    if who is not None:
        state = who.get("state")
        doing = "exited" if state == "exited" else f"is in {who.get('where') or 'an unknown place'}"
        parts.append(
            f"{_ranks_text([int(who['rank'])])} ({who.get('replica')}, local rank"
            f" {who.get('local_rank')}) {doing} at step {int(who.get('step') or 0) + 1}"
        )
    groups: dict[str, list[int]] = {}
    for beat in others:
        if beat.get("state") == "waiting":
            key = f"wait in {beat.get('what') or 'a collective'} ({beat.get('at') or beat.get('where')})"
        else:
            key = f"are in {beat.get('where')}"
        groups.setdefault(key, []).append(int(beat["rank"]))
    for key, ranks in sorted(groups.items(), key=lambda item: min(item[1])):
        verb = key if len(ranks) > 1 else key.replace("wait in", "waits in", 1).replace("are in", "is in", 1)
        parts.append(f"{_ranks_text(ranks)} {verb}")
    return parts


def blamed(verdict: str, beats: Sequence[Beat]) -> str:
    """A rank's own verdict, naming the culprit instead where the ranks' last heartbeats show another one.

    On Vertex (and the emulator) each rank decides a hang by itself and its verdict names itself; the first
    to decide may be one that waits in a collective for the culprit. Where `culprit` finds the rank the
    verdict names, or another one while the named one was waiting, the verdict keeps its `no progress` part
    and tells the ranks as `hang_verdict` does (the culprit with its replica and the step it is in, then
    where the others wait); otherwise it stays as the rank wrote it."""
    named = named_rank(verdict)
    own = next((b for b in beats if int(b["rank"]) == named), None)
    found = culprit(beats)
    if own is None or found is None:
        return verdict
    if int(found["rank"]) != named and own.get("state") != "waiting":
        return verdict  # the rank it names does not wait for another: its own word stands
    return "; ".join([verdict.split(";", 1)[0], *_blame(beats)])


def stragglers(beats: Sequence[Beat], ratio: float) -> list[Straggler]:
    """The ranks whose own step time is over `ratio` times the median of the other ranks'."""
    timed = [b for b in beats if b.get("own_step_s") is not None and int(b.get("step") or 0) >= MIN_STEPS]
    if len(timed) < 2:
        return []
    found = []
    for beat in timed:
        others = statistics.median(float(b["own_step_s"]) for b in timed if b is not beat)
        own = float(beat["own_step_s"])
        slowdown = own / max(others, MIN_OWN_STEP_S)
        steps = window_steps(beat)
        if slowdown > ratio and (own - others) * steps >= MIN_EXTRA_S:
            found.append(
                Straggler(
                    int(beat["rank"]),
                    round(slowdown, 2),
                    str(beat.get("state")),
                    str(beat.get("where")),
                    steps,
                )
            )
    return found


def window_steps(beat: Beat) -> int:
    """The finished steps a heartbeat's own step time is averaged over (its first step has no time)."""
    return max(0, min(int(beat.get("step") or 0) - 1, WINDOW_STEPS))


def straggler_line(straggler: Straggler, beat: Beat) -> str:
    """The job log's warning when a rank is first flagged."""
    return (
        f"warning: straggler: rank {straggler.rank} ({beat.get('replica')},"
        f" local rank {beat.get('local_rank')}) at step {beat.get('step')}: its own step time (the step less"
        f" its waits in collectives) is {straggler.slowdown:g}x the other ranks' median, over its last"
        f" {straggler.steps} steps; now {straggler.state} in {straggler.where}"
    )


def rank_rows(
    beats: Sequence[Beat], now: float, ratio: float, ended_at: float | None = None
) -> list[dict[str, Any]]:
    """One row per global rank, in `ROW_KEYS` (`vertexdist ranks --json`); `ended_at` freezes the clock of a
    job that has ended."""
    flagged = {s.rank: s for s in stragglers(beats, ratio)}
    clock = ended_at if ended_at is not None else now
    rows = []
    for beat in sorted(beats, key=lambda b: int(b["rank"])):
        last = beat.get("last_step_at")
        own = beat.get("own_step_s")
        rate = beat.get("steps_per_s")
        row = {
            "rank": int(beat["rank"]),
            "replica": beat.get("replica"),
            "local_rank": beat.get("local_rank"),
            "step": int(beat.get("step") or 0),
            "steps_per_s": round(float(rate), 3) if rate is not None else None,
            "own_step_s": round(float(own), 4) if own is not None else None,
            "wait_share": beat.get("wait_share"),
            "last_progress_s": round(max(0.0, clock - float(last)), 1) if last is not None else None,
            "state": beat.get("state"),
            "where": beat.get("where") or "",
            "straggler": int(beat["rank"]) in flagged,
            "slowdown": flagged[int(beat["rank"])].slowdown if int(beat["rank"]) in flagged else None,
        }
        rows.append(row)
    return rows
