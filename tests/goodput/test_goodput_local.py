"""The goodput ledger of real local runs (the bundled trainer on CPU, two replicas): an undisturbed run, and a
managed run whose fault plan hangs one attempt and preempts two at known steps, checkpointing every 50."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from vertexdist.goodput.ledger import CATEGORIES

pytestmark = [pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]
EVERY = 50  # steps between checkpoints; 125 steps an epoch (4,000 samples, 16 a rank, 2 ranks), 2 epochs


def _template(tmp: Path) -> Path:
    body = {
        "display_name": "goodput-test",
        "project": "my-project",
        "location": "us-central1",
        "staging_bucket": "gs://my-bucket/staging",
        "machine_type": "n1-standard-4",
        "scheduling_strategy": "SPOT",
        "replica_count": 2,
        "trainer": {
            "args": ["--epochs=2", "--batch-size=16", "--samples=4000", "--data=synthetic", "--seed=3",
                     f"--checkpoint-every={EVERY}", "--keep-checkpoints=1000"],
            "env": {"OMP_NUM_THREADS": "1"},
        },
        "timeout": "300s",
        "health": {"hang_timeout": "4s"},
        "recovery": {"max_preemptions": 3, "max_hangs": 1},
    }  # fmt: skip
    path = tmp / "job.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def _cli(cwd: Path, *args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_GCE_CHECK": "true"}
    return subprocess.run(
        [sys.executable, "-m", "vertexdist", *args], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


def _prices(cwd: Path, template: Path) -> dict[str, float]:
    """Each pool's Spot price per replica-hour, as `estimate --format json` gives it."""
    found = json.loads(_cli(cwd, "estimate", str(template), "--format", "json").stdout)
    return {f"workerpool{p['pool']}": p["spot_usd_per_hour"] / p["replicas"] for p in found["pools"]}


def _check_sums_and_dollars(ledger: dict[str, object], prices: dict[str, float]) -> None:
    cats = ledger["categories"]
    assert isinstance(cats, dict) and set(cats) == set(CATEGORIES)
    billed = float(ledger["billed_replica_s"])  # type: ignore[arg-type]
    assert billed > 0 and abs(sum(cats.values()) - billed) <= 0.01 * billed
    assert ledger["price_per_replica_hour"] == pytest.approx(prices, rel=1e-3)
    price = prices["workerpool0"]  # both pools are the same machine
    dollars = ledger["dollars"]
    assert isinstance(dollars, dict)
    for name in CATEGORIES:
        assert dollars[name] == pytest.approx(cats[name] * price / 3600, abs=1e-4)
    assert ledger["goodput"] == pytest.approx(cats["productive"] / billed, abs=1e-3)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_ledger_of_an_undisturbed_run_and_of_a_run_hung_once_and_preempted_twice(tmp_path: Path) -> None:
    path = _template(tmp_path)
    prices = _prices(tmp_path, path)
    plain = tmp_path / "plain.yaml"
    body = yaml.safe_load(path.read_text())
    del body["recovery"]
    plain.write_text(yaml.safe_dump(body))
    undisturbed = _cli(tmp_path, "local-run", str(plain))
    assert undisturbed.returncode == 0, undisturbed.stderr[-3000:]
    assert "goodput " in undisturbed.stderr and "the ledger: vertexdist goodput" in undisturbed.stderr
    run = undisturbed.stderr.rsplit("the ledger: vertexdist goodput ", 1)[1].split()[0]
    ledger = json.loads(_cli(tmp_path, "goodput", run, "--json").stdout)
    _check_sums_and_dollars(ledger, prices)
    cats = ledger["categories"]
    assert ledger["steps"] == {"final": 250, "recomputed": 0}
    assert cats["recomputed"] == cats["hung"] == 0.0 and cats["checkpoint"] > 0
    # Goodput is what is left of the billed time after the start-up, the saves and the tail it measured.
    rest = ledger["billed_replica_s"] - cats["startup"] - cats["tail"] - cats["checkpoint"]
    assert cats["productive"] == pytest.approx(rest, abs=0.01)

    plan = tmp_path / "plan.yaml"
    # The grace is a bound, not an aim: the preempted rank is released by the SIGTERM and the trainer saves
    # at its next stop check, then exits.
    plan.write_text(
        "- kind: hang\n  replica: workerpool1-0\n  after_step: 60\n"
        "- kind: preempt\n  replica: workerpool0-0\n  after_step: 70\n  grace: 60s\n  times: 3\n"
    )
    managed = _cli(tmp_path, "local-run", str(path), "--fault-plan", str(plan))
    assert managed.returncode == 0, managed.stderr[-3000:]
    managed_id = managed.stdout.split()[1]
    ledger = json.loads(_cli(tmp_path, "goodput", managed_id, "--json").stdout)
    _check_sums_and_dollars(ledger, prices)
    # The hang met attempt 1 at its 60th step, before its preemption's 70th: it lost the 10 steps since its
    # checkpoint at 50. Attempts 2 and 3 were preempted at their 70th step; each trainer saved on the SIGTERM
    # at the step it stopped (its log says which), as on Vertex, so they lost nothing.
    attempts = ledger["attempts"]
    assert [a["reason"] for a in attempts] == ["HUNG", "PREEMPTED", "PREEMPTED", "SUCCEEDED"]
    runs = [tmp_path / ".vertexdist" / "runs" / a["job"] for a in attempts]
    chief = [(run / "logs" / "workerpool0-0.log").read_text() for run in runs]
    stopped = [int(re.findall(r"^stopping on request after step (\d+)", log, re.M)[0]) for log in chief[1:3]]
    resumed = [int(re.findall(r"^resumed from .* step (\d+)$", log, re.M)[0]) for log in chief[1:4]]
    assert resumed == [50, *stopped], (resumed, stopped)
    saved = [stop - start for stop, start in zip(stopped, resumed, strict=False)]  # the attempts' own steps
    assert all(own >= 70 for own in saved), saved
    assert [(a["steps"], a["checkpoint_step"]) for a in attempts[:3]] == [(60, 50), *((s, s) for s in saved)]
    assert [a["recomputed_steps"] for a in attempts] == [10, 0, 0, 0]
    assert ledger["steps"] == {"final": 250, "recomputed": 10}
    assert attempts[0]["categories"]["hung"] > 0
    assert all(a["categories"]["hung"] == 0 for a in attempts[1:])
    assert managed_id in managed.stderr.rsplit("goodput ", 1)[1]  # the run's last line: its ledger
    [advice] = [a for a in ledger["advice"] if a["kind"] == "checkpoint_interval"]
    assert advice["interval_s"] == pytest.approx((2 * advice["save_s"] * advice["mtbf_s"]) ** 0.5, rel=1e-3)
    (tmp_path / "ledger.txt").write_text(_cli(tmp_path, "goodput", managed_id).stdout)
