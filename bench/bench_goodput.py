"""The goodput ledger of a big managed job: 64 ranks (8 replicas of 8), three attempts (preempted, hung,
succeeded), 10,000 steps in all, its heartbeats read from Vertex-shaped log lines (one per rank every
`LOG_EVERY_S`, 1 s steps: what `vertexdist goodput` reads for a Vertex job), then the ledger computed.

The baseline is the log scan of `vertexdist ranks` over the same lines (every line, in order, for the
stacks and the verdict too); the ledger reads each rank's last heartbeat from the newest line back
(`goodput.beats.last_beats`) and computes. Budget: the ledger, its reading included, at most 1 s.

    .venv/bin/python bench/bench_goodput.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from vertexdist.goodput.beats import last_beats  # noqa: E402
from vertexdist.goodput.inputs import AttemptInput, LedgerInput, RankRecord, ReplicaSpan  # noqa: E402
from vertexdist.goodput.ledger import compute  # noqa: E402
from vertexdist.health.log_scan import LogLine, scan  # noqa: E402
from vertexdist.shipped.vertexdist_launcher.health import LOG_EVERY_S, log_line  # noqa: E402

REPLICAS, PER_REPLICA = 8, 8
STEP_S = 1.0
ATTEMPTS = (("PREEMPTED", 3_000, 2_800), ("HUNG", 4_000, 3_700), ("SUCCEEDED", 3_300, 3_300))
BUDGET_S = 1.0


def attempt_lines(start: float, steps: int, saved: int) -> list[LogLine]:
    """Every rank's heartbeat lines of one attempt, in time order."""
    lines = []
    first = start + 120.0
    for beat_at in range(0, int(steps * STEP_S) + 1, int(LOG_EVERY_S)):
        done = min(steps, int(beat_at / STEP_S) + 1)
        for rank in range(REPLICAS * PER_REPLICA):
            replica = f"workerpool{min(rank // PER_REPLICA, 1)}-{max(rank // PER_REPLICA - 1, 0)}"
            beat = {
                "rank": rank, "local_rank": rank % PER_REPLICA, "replica": replica,
                "world_size": REPLICAS * PER_REPLICA, "step": done, "first_step_at": first,
                "last_step_at": first + (done - 1) * STEP_S, "step_s": STEP_S, "own_step_s": 0.6,
                "wait_share": 0.4, "checkpoint_s": 4.0 * (done // 500), "checkpoints": done // 500,
                "checkpoint_step": min(saved, done // 500 * 500), "state": "computing",
            }  # fmt: skip
            lines.append(LogLine(replica, log_line(beat)))
    return lines


def main() -> None:
    made = []
    start = 0.0
    for number, (reason, steps, saved) in enumerate(ATTEMPTS, 1):
        made.append((number, reason, start, steps, attempt_lines(start, steps, saved)))
        start += 120.0 + steps * STEP_S + 300.0
    count = sum(len(m[4]) for m in made)

    def scans() -> list[list[dict[str, object]]]:
        return [scan(lines).beats for *_, lines in made]

    def ledger() -> float:
        attempts = []
        for number, reason, begun, steps, lines in made:
            beats = last_beats([(line.text, line.payload) for line in lines])
            names = sorted({str(b["replica"]) for b in beats})
            end = begun + 120.0 + steps * STEP_S + 60.0
            attempts.append(
                AttemptInput(
                    number, reason, begun - 30.0, tuple(ReplicaSpan(n, begun, end) for n in names),
                    tuple(RankRecord.from_beat(b) for b in beats),
                )
            )  # fmt: skip
        found = compute(LedgerInput(tuple(attempts), {0: 40.0, 1: 40.0}))
        return found.billed_s

    scan_times, all_times = [], []
    for _ in range(5):
        began = time.perf_counter()
        scans()
        scan_times.append(time.perf_counter() - began)
        began = time.perf_counter()
        ledger()
        all_times.append(time.perf_counter() - began)
    scan_s, whole_s = statistics.median(scan_times), statistics.median(all_times)
    print(f"{count:,} heartbeat lines, {REPLICAS * PER_REPLICA} ranks, {len(ATTEMPTS)} attempts")
    print(
        f"`ranks`' full scan (baseline): {scan_s:.3f} s;"
        f" the ledger: {whole_s:.3f} s ({whole_s / scan_s:.3f}x)"
    )
    print(f"budget: the ledger <= {BUDGET_S:g} s: {'ok' if whole_s <= BUDGET_S else 'OVER'}")


if __name__ == "__main__":
    main()
