"""What recovering from a preemption costs with `submit --managed`, against the in-process emulator and its
fault plan (a real preempt: SIGTERM to the replica's processes, SIGKILL after the grace).

1. The controller's own cost per attempt: the managed run's wall time less the time spent inside backend
   calls (create, find, status reads, on the emulator) and less its poll sleeps: what the decision core and
   the SQLite writes add. Goal: < 1 s per attempt. Baseline in the same run: one plain `schedule` (create)
   call of the same job, the start-up any submit pays.
2. From the kill to the next attempt: the preempted job's end to the next attempt's job creation (the
   controller's reaction, including one poll interval) and to that job's first logged step.
3. Steps lost per preemption: the trainer here prints a step a line and checkpoints each one to
   AIP_CHECKPOINT_DIR after each one; the steps the second attempt does again are counted. This trainer
   does not checkpoint on SIGTERM, so the step in flight at the kill is done again (1); the bundled
   trainer's SIGTERM checkpoint is what brings that to 0.
4. Steps lost per preemption with the bundled trainer (goal 0), and what one preemption costs in wall time:
   `local-run` of a Spot template with `recovery:`, undisturbed and with a fault plan's preempt aimed at a
   step (`after_step`: a third of the way into the undisturbed run, off the checkpoint interval), in
   interleaved pairs (undisturbed, preempted, undisturbed, ...) so that the load meets both alike.
   From the trainer's logs, the step it checkpointed at on SIGTERM less the step the next attempt resumed at;
   the ratio of the preempted runs' median wall time to the undisturbed runs'; every run's model bytes equal.

   The next attempt starts warm: its replicas fork from the controller's own warm pool (torch and the trainer
   already imported; `jobs.attempt_pool`), and the trainer resumes from its SIGTERM checkpoint. Goal: the
   preempted run at most 1.1x the undisturbed one's wall time.

    .venv/bin/python bench/bench_recovery.py [--bundled-only] [--pairs N]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from trainer_pkg.resume_lines import steps_lost  # noqa: E402
from vertexdist.backends.base import JobStatus  # noqa: E402
from vertexdist.emulator import Emulator  # noqa: E402
from vertexdist.jobs.local_attempts import WARM_NOTE  # noqa: E402
from vertexdist.jobs.submit import Where  # noqa: E402
from vertexdist.managed import store as st  # noqa: E402
from vertexdist.managed.attempts import CreatedJob, VertexAttempts  # noqa: E402
from vertexdist.managed.controller import Backoff, Controller  # noqa: E402
from vertexdist.spec.fault_plan import parse_fault_plan  # noqa: E402
from vertexdist.spec.loader import load_template  # noqa: E402
from vertexdist.wire.timestamps import parse_ns  # noqa: E402

GOAL_S = 1.0
POLL_S = 0.2
T = TypeVar("T")
STEP = re.compile(r"step (\d+) at (\d+\.\d+)")

TRAIN = """\
import os, pathlib, time
folder = pathlib.Path(os.environ["AIP_CHECKPOINT_DIR"].replace("gs://", os.environ["GS_ROOT"] + "/"))
folder.mkdir(parents=True, exist_ok=True)
done = folder / "step"
start = int(done.read_text()) if done.exists() else 0
for step in range(start, 12):
    print(f"step {step} at {time.time():.3f}", flush=True)
    time.sleep(0.25)
    done.write_text(str(step + 1))
"""

TEMPLATE = """\
display_name: bench-recovery
project: bench-proj
location: us-central1
staging_bucket: gs://bench-bucket/staging
container_uri: us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest
machine_type: n1-standard-4
scheduling_strategy: SPOT
trainer:
  script: train.py
  env:
    GS_ROOT: {gs_root}
"""


class Timed(VertexAttempts):
    """The Vertex attempts, with the time spent inside each backend call counted."""

    spent_s: float = 0.0

    def _time(self, call: Callable[[], T]) -> T:
        start = time.perf_counter()
        try:
            return call()
        finally:
            self.spent_s += time.perf_counter() - start

    def create(self, template: Any, label: str, resume_from: str | None) -> CreatedJob:
        return self._time(lambda: super(Timed, self).create(template, label, resume_from))

    def find(self, template: Any, label: str) -> CreatedJob | None:
        return self._time(lambda: super(Timed, self).find(template, label))

    def describe(self, template: Any, name: str) -> JobStatus:
        return self._time(lambda: super(Timed, self).describe(template, name))


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        plan = parse_fault_plan("- kind: preempt\n  replica: workerpool0-0\n  after: 1.2s\n  grace: 1s\n")
        emu = Emulator(data_dir=root / "emu", fault_plan=plan)
        emu.start()
        assert emu.data_dir is not None
        try:
            gs_root = emu.data_dir / "gcs"
            (root / "train.py").write_text(TRAIN)
            path = root / "job.yaml"
            path.write_text(TEMPLATE.format(gs_root=gs_root))
            template = load_template(path)
            store = st.Store(root / "managed.sqlite")
            managed = store.create(str(path), "vertex", {})
            backend = Timed(
                Where(endpoint=emu.vertex_endpoint, transport="rest"),
                env={"STORAGE_EMULATOR_HOST": emu.storage_endpoint},
            )
            slept = [0.0]

            def sleep(seconds: float) -> None:
                slept[0] += seconds
                time.sleep(seconds)

            ctl = Controller(
                store,
                managed.id,
                template,
                backend,
                poll_s=POLL_S,
                backoff=Backoff(first_s=0.05),
                sleep=sleep,
            )
            start = time.perf_counter()
            final = ctl.run()
            wall = time.perf_counter() - start
            attempts = store.attempts(managed.id)
            assert final.state == st.SUCCEEDED, (final, attempts)
            assert [a.reason for a in attempts] == ["PREEMPTED", "SUCCEEDED"], attempts

            first, second = (backend.describe(template, a.job or "") for a in attempts)
            own = (wall - backend.spent_s - slept[0]) / len(attempts)
            create_start = time.perf_counter()
            plain = backend.create(template, "bench-plain", None)
            create_s = time.perf_counter() - create_start
            assert plain.name

            assert first.end_time and second.create_time
            reaction_s = (parse_ns(second.create_time) - parse_ns(first.end_time)) / 1e9
            found = [
                (int(m.group(1)), float(m.group(2)))
                for f in emu.data_dir.rglob("*.log")
                for m in STEP.finditer(f.read_text())
            ]
            steps = [step for step, _ in found]
            lost = len(steps) - len(set(steps))
            ended = parse_ns(first.end_time) / 1e9
            after = [at for _, at in found if at > ended]
            to_step = f"{min(after) - ended:.2f} s" if after else "no step seen"
            print(f"attempts: {len(attempts)} ({', '.join(a.reason for a in attempts)}); wall {wall:.2f} s")
            print(f"controller's own cost per attempt: {own * 1000:.0f} ms (goal < {GOAL_S * 1000:.0f} ms)")
            print(
                f"  baseline, one plain create of the same job: {create_s * 1000:.0f} ms"
                f" (ratio own/create {own / create_s:.2f})"
            )
            print(f"preempted job's end -> next attempt's create: {reaction_s:.2f} s (poll {POLL_S} s)")
            print(f"preempted job's end -> next attempt's first step: {to_step}")
            print(f"steps logged {len(steps)}, distinct {len(set(steps))}: steps lost per preemption {lost}")
        finally:
            emu.stop()


BUNDLED = """\
display_name: bench-bundled
project: bench-proj
location: us-central1
staging_bucket: gs://bench-bucket/staging
machine_type: n1-standard-4
scheduling_strategy: SPOT
trainer:
  args: ["--epochs=2", "--batch-size=16", "--samples=40000", "--data=synthetic", "--seed=3",
         "--checkpoint-every=200", "--keep-checkpoints=1000"]
  env: {OMP_NUM_THREADS: "1"}
timeout: 300s
recovery: {max_preemptions: 3}
"""


def _local_run(cwd: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_GCE_CHECK": "true"}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "vertexdist", *args], cwd=cwd, env=env, capture_output=True, text=True
    )
    if done.returncode != 0 and args[0] == "local-run":
        raise SystemExit(done.stderr[-3000:])
    return done, time.perf_counter() - start


def _outputs(err: str) -> Path:
    (outputs,) = re.findall(r"^outputs: (.+)$", err, re.M)
    return Path(outputs)


def _model(outputs: Path) -> bytes:
    return hashlib.sha256((outputs / "model" / "model.pt").read_bytes()).digest()


def _aim(outputs: Path) -> int:
    """A step a third of the way into the undisturbed run (its chief's last heartbeat's step count, the
    count `after_step` is aimed by), off the checkpoint interval: only the SIGTERM checkpoint can save it."""
    run_dir = Path(str(outputs).split("/gcs/", 1)[0])
    steps = int(json.loads((run_dir / "health" / "ranks" / "rank-0.json").read_text())["step"])
    return max(1, steps // 3 // 200 * 200 + 37)


def _preempted(root: Path, path: Path, plan: Path) -> tuple[float, Path, str, list[int], int, int]:
    """One managed run preempted once: wall, outputs, attempts' reasons, steps lost, attempts forked warm."""
    hit, hit_s = _local_run(root, "local-run", str(path), "--fault-plan", str(plan))
    shown = json.loads(_local_run(root, "managed", "status", hit.stdout.split()[1], "--json")[0].stdout)
    folders = [root / ".vertexdist" / "runs" / a["job"] for a in shown["attempts"]]
    lost = steps_lost([next((f / "logs").glob("*.log")).read_text() for f in folders])
    warm = sum(WARM_NOTE in (f / "events.jsonl").read_text() for f in folders)
    reasons = ", ".join(a["reason"] for a in shown["attempts"])
    return hit_s, _outputs(hit.stderr), reasons, lost, warm, len(folders)


def bundled_trainer(pairs: int) -> None:
    """Part 4: undisturbed and preempted runs of the same template, interleaved (undisturbed, preempted,
    undisturbed, ...) so that the machine's load meets both alike; the ratio of their median wall times."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = root / "job.yaml"
        path.write_text(BUNDLED)
        plan = root / "plan.yaml"
        plain_s: list[float] = []
        hit_s: list[float] = []
        models: set[bytes] = set()
        lost: list[int] = []
        for index in range(pairs):
            load = os.getloadavg()[0]
            plain, took = _local_run(root, "local-run", str(path))
            plain_s.append(took)
            outputs = _outputs(plain.stderr)
            models.add(_model(outputs))
            if index == 0:
                after_step = _aim(outputs)
                plan.write_text(f"- kind: preempt\n  after_step: {after_step}\n  grace: 10s\n")
            took, hit_out, reasons, pair_lost, warm, attempts = _preempted(root, path, plan)
            hit_s.append(took)
            models.add(_model(hit_out))
            lost += pair_lost
            print(
                f"pair {index + 1} (load {load:.1f} at its start): undisturbed {plain_s[-1]:.1f} s,"
                f" preempted at step {after_step} {took:.1f} s (ratio {took / plain_s[-1]:.2f});"
                f" attempts {reasons}, {warm} of {attempts} forked warm, steps lost {pair_lost}"
            )
        ratio = statistics.median(hit_s) / statistics.median(plain_s)
        # Each pair's runs met about the same load; the pairs may not (a shared machine's load swings).
        paired = statistics.median(h / p for h, p in zip(hit_s, plain_s, strict=True))
        print(f"bundled trainer, local-run with recovery, {pairs} interleaved pairs:")
        print(f"  median of the pairs' ratios: {paired:.2f} (goal <= 1.10)")
        print(
            f"  wall: preempted median {statistics.median(hit_s):.1f} s, undisturbed median"
            f" {statistics.median(plain_s):.1f} s: ratio {ratio:.2f} (goal <= 1.10)"
        )
        figure = f"{sum(lost) / len(lost):.1f}" if lost else "n/a (the preemption missed training)"
        print(
            f"  steps lost per preemption (goal 0): {figure};"
            f" same model bytes in all runs: {len(models) == 1}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="What recovering from a preemption costs.")
    parser.add_argument("--bundled-only", action="store_true", help="part 4 alone (the bundled trainer)")
    parser.add_argument(
        "--pairs", type=int, default=2, help="part 4's undisturbed/preempted pairs (default 2)"
    )
    options = parser.parse_args()
    if not options.bundled_only:
        main()
    bundled_trainer(options.pairs)
