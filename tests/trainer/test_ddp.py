"""Real multi-node runs on CPU (gloo), DDP and FSDP: each node a process with a CLUSTER_SPEC, as on Vertex.

The runs that resume are made under both strategies (`--strategy ddp|fsdp`): each must end bit-for-bit where
its uninterrupted run ends, and both where one process over the same global batches does (to rounding).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from trainer_pkg.data import epoch_order, feature_scaling, steps_in_epoch, synthetic_dataset
from trainer_pkg.model import build_model
from trainer_pkg.strategies import STRATEGIES, make_optimizer

# Generous limits: each run starts 2-4 processes that import torch, on a machine that may be busy.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(420)]
WAIT_S = 120

EPOCHS, SAMPLES, BATCH, SEED, HIDDEN, LR = 4, 1002, 16, 3, (16, 8), 0.01
# 1002 samples over 4 ranks x 16: the last step of each epoch is 42 samples, split 11/11/10/10.
ARGS = [
    f"--epochs={EPOCHS}",
    f"--samples={SAMPLES}",
    f"--batch-size={BATCH}",
    f"--seed={SEED}",
    f"--hidden={','.join(map(str, HIDDEN))}",
    f"--lr={LR}",
    "--checkpoint-every=5",
    "--rdzv-timeout=20",
]


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """torch on one thread here: a thread per core (the default) spins against the jobs' processes on a busy
    machine, 26-40 s for the reference below at load average 11 instead of 1-2 s (tests/conftest.py)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def reference_weights(world_size: int) -> dict[str, torch.Tensor]:
    """One process, the same global batches: contiguous blocks of W*B of each epoch's order, mean BCE."""
    with one_torch_thread():
        return _reference_weights(world_size)


def _reference_weights(world_size: int) -> dict[str, torch.Tensor]:
    dataset = synthetic_dataset(SAMPLES, SEED)
    model = build_model(dataset.features.shape[1], HIDDEN, SEED)
    model.set_scaling(*feature_scaling(dataset))
    optimizer = make_optimizer(model, LR)
    span = world_size * BATCH
    for epoch in range(EPOCHS):
        order = epoch_order(SAMPLES, SEED, epoch)
        for step in range(steps_in_epoch(SAMPLES, 0, world_size, BATCH)):
            index = order[step * span : (step + 1) * span]
            optimizer.zero_grad()
            F.binary_cross_entropy_with_logits(
                model(dataset.features[index]), dataset.labels[index]
            ).backward()
            optimizer.step()
    return model.state_dict()


def load_model(job: Any) -> dict[str, torch.Tensor]:
    return torch.load(job.model_dir / "model.pt", weights_only=True)


def assert_bitwise_equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), f"{name} differs by {(a[name] - b[name]).abs().max():g}"


def first_checkpoint_written(job: Any) -> bool:
    return (job.checkpoint_dir / "LATEST").exists()


@pytest.fixture(scope="module", params=STRATEGIES)
def strategy(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def args(strategy: str) -> list[str]:
    return [*ARGS, f"--strategy={strategy}"]


@pytest.fixture(scope="module")
def baseline(kit: Any, tmp_path_factory: pytest.TempPathFactory, args: list[str]) -> Iterator[Any]:
    """An uninterrupted 2 nodes x 2 processes run."""
    job = kit.Job(tmp_path_factory.mktemp("baseline"), nodes=2, nproc=2)
    try:
        codes = job.run(args, timeout=WAIT_S)
        assert codes == [0, 0], job.log(0) + job.log(1)
        yield job
    finally:
        for process in job.processes:
            if process.poll() is None:
                kit.kill_group(process)


def test_two_nodes_equal_one_process_over_the_same_global_batches(baseline: Any, strategy: str) -> None:
    done = [m for m in baseline.metrics() if m["event"] == "done"]
    # ddp: identical parameters on all 4 ranks; fsdp: each holds a quarter, so there is nothing to compare.
    spread = 0.0 if strategy == "ddp" else None
    assert done == [{**done[0], "world_size": 4, "strategy": strategy, "param_spread": spread}]
    trained, reference = load_model(baseline), reference_weights(world_size=4)
    for name in reference:
        torch.testing.assert_close(trained[name], reference[name], rtol=1e-4, atol=1e-5)
    assert not torch.equal(
        trained["layers.0.weight"], build_model(8, HIDDEN, SEED).state_dict()["layers.0.weight"]
    )


def test_rank_zero_logs_loss_and_throughput(baseline: Any) -> None:
    epochs = [m for m in baseline.metrics() if m["event"] == "epoch"]
    assert [m["epoch"] for m in epochs] == [1, 2, 3, 4]
    assert all(m["samples"] == SAMPLES and m["samples_per_s"] > 0 for m in epochs)
    assert epochs[-1]["loss"] < epochs[0]["loss"]
    log = baseline.log(0)
    assert "epoch 4/4  loss" in log and "samples/s" in log
    assert "epoch 1/4" not in baseline.log(1)  # only rank 0 reports


def test_sigkill_a_node_then_restart_both_is_bit_exact(
    baseline: Any, make_job: Any, kit: Any, args: list[str]
) -> None:
    job = make_job(nodes=2, nproc=2)
    node0, node1 = job.start_all(args)
    kit.wait_for(lambda: first_checkpoint_written(job), WAIT_S, "the first checkpoint")
    os.kill(node1.pid, signal.SIGKILL)  # the node's launcher only: its workers must not outlive it
    assert kit.group_gone(node1.pid), "workers of the killed node are still running"
    assert kit.wait(node0, WAIT_S) == 1
    assert kit.group_gone(node0.pid)
    assert "failed:" in job.log(0)
    assert not (job.model_dir / "model.pt").exists(), "the kill came too late to interrupt training"

    assert job.run(args, timeout=WAIT_S) == [0, 0], job.log(0) + job.log(1)
    assert "resumed from" in job.log(0)
    assert_bitwise_equal(load_model(job), load_model(baseline))


def test_sigterm_checkpoints_stops_cleanly_and_resumes_bit_exact(
    baseline: Any, make_job: Any, kit: Any, args: list[str]
) -> None:
    job = make_job(nodes=2, nproc=2)
    processes = job.start_all(args)
    kit.wait_for(lambda: first_checkpoint_written(job), WAIT_S, "the first checkpoint")
    for process in processes:
        os.killpg(process.pid, signal.SIGTERM)  # what a local launcher's cancel does
    assert [kit.wait(p, WAIT_S) for p in processes] == [143, 143], job.log(0) + job.log(1)
    assert all(kit.group_gone(p.pid) for p in processes)
    assert "stopping on request after step" in job.log(0)
    stopped_at = int((job.checkpoint_dir / "LATEST").read_text().strip().split("-")[1])
    assert 0 < stopped_at < EPOCHS * steps_in_epoch(SAMPLES, 0, 4, BATCH)

    assert job.run(args, timeout=WAIT_S) == [0, 0], job.log(0) + job.log(1)
    assert f"step {stopped_at}" in job.log(0)
    assert_bitwise_equal(load_model(job), load_model(baseline))


def test_a_failing_worker_ends_its_siblings_and_names_its_rank(make_job: Any, kit: Any) -> None:
    job = make_job(nodes=1, nproc=2)
    (replica,) = job.start_all([*ARGS, "--epochs=50"])
    kit.wait_for(lambda: first_checkpoint_written(job), WAIT_S, "the first checkpoint")
    workers = sorted(pid for pid in kit.group_members(replica.pid) if pid != replica.pid)
    assert len(workers) == 2
    os.kill(workers[1], signal.SIGKILL)
    assert kit.wait(replica, 30) == 1
    assert kit.group_gone(replica.pid)
    assert "error: rank 1 (node 0, local rank 1) failed: killed by SIGKILL" in job.log(0)


def test_chief_alone_times_out_naming_the_missing_ranks(make_job: Any, kit: Any) -> None:
    job = make_job(nodes=2, nproc=1)
    replica = job.start(0, [*ARGS[:-1], "--rdzv-timeout=2"])
    seen: set[str] = set()  # what the replica listens on while rank 0 serves its store
    deadline = time.monotonic() + 60
    while replica.poll() is None and time.monotonic() < deadline:
        seen.update(kit.listeners(set(kit.group_members(replica.pid))))
        time.sleep(0.05)
    assert kit.wait(replica, 5) == 1
    assert "rendezvous at 127.0.0.1:" in job.log(0)
    assert "timed out after 2 s waiting for the other 1 rank(s)" in job.log(0)
    assert "Traceback" not in job.log(0)
    # The store listens on the loopback rendezvous address, never on every interface (torch's default).
    assert f"0100007F:{job.ports['workerpool0'][0]:04X}" in seen
    assert [a for a in seen if a.split(":")[0].strip("0") == ""] == []


def test_checkpoint_from_another_model_is_refused(
    baseline: Any, make_job: Any, kit: Any, args: list[str]
) -> None:
    job = make_job(nodes=1, nproc=1)
    shutil.copytree(baseline.checkpoint_dir, job.checkpoint_dir)
    replica = job.start(0, [*args, "--hidden=12"])
    assert kit.wait(replica, WAIT_S) == 1
    log = job.log(0)
    assert f"checkpoint {job.checkpoint_dir}/step-" in log
    assert "is for a different model (ChurnMLP with 8 features, hidden [16, 8])" in log
    assert "Traceback" not in log


def test_csv_data_and_a_bad_row(make_job: Any, kit: Any, tmp_path: Path) -> None:
    from trainer_pkg.csvdata import write_table
    from trainer_pkg.data import table_from_dataset

    good = tmp_path / "churn.csv"
    write_table(good, table_from_dataset(synthetic_dataset(200, 1)))
    bad = tmp_path / "bad.csv"
    bad.write_text(good.read_text().replace("\n", "\nnot-a-number," + "0," * 7 + "1\n", 1))
    job = make_job(nodes=1, nproc=2)
    # exec: workers started as fresh interpreters instead of forked from the replica (the default on Linux)
    args = ["--data", str(good), "--epochs=1", "--rdzv-timeout=20"]
    assert kit.wait(job.start(0, args, TRAINER_PKG_START_METHOD="exec"), 60) == 0, job.log(0)
    assert "training: 200 samples, 1 epochs, world size 2" in job.log(0)
    assert kit.wait(job.start(0, ["--data", str(bad), "--epochs=1", "--rdzv-timeout=20"]), 60) == 1
    assert f"failed: {bad}:2: column 'tenure_months': 'not-a-number' is not a number" in job.log(0)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "error: data file {path} does not exist"),
        (
            "tenure,monthly\n1,2\n",
            "error: data file {path} has no label column 'churn' (columns: tenure, monthly); "
            "pass --label-column NAME",
        ),
    ],
)
def test_unusable_csv_fails_before_any_worker_starts(
    kit: Any, tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "data.csv"
    if content is not None:
        path.write_text(content)
    result = kit.run_module("trainer_pkg.task", {}, "--data", str(path), cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip() == "trainer_pkg: " + message.format(path=path)


def test_torchrun_runs_the_same_task(make_job: Any, kit: Any, tmp_path: Path) -> None:
    job = make_job(nodes=1, nproc=2)
    env = {k: v for k, v in job.env(0).items() if k != "CLUSTER_SPEC"}
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    result = subprocess.run(
        [*torchrun, "-m", "trainer_pkg.task", *ARGS[:-1], "--epochs=1"],
        env=env,
        cwd=job.root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    done = [m for m in job.metrics() if m["event"] == "done"]
    assert done and done[0]["world_size"] == 2 and done[0]["param_spread"] == 0.0


def test_resume_mid_epoch_with_another_world_size(
    baseline: Any, make_job: Any, kit: Any, args: list[str]
) -> None:
    job = make_job(nodes=1, nproc=1)
    shutil.copytree(baseline.checkpoint_dir, job.checkpoint_dir)
    (job.checkpoint_dir / "LATEST").write_text("step-00000060\n")  # 12 steps into the last epoch of 16
    assert kit.wait(job.start(0, args), WAIT_S) == 0, job.log(0)
    position = 12 * 4 * BATCH
    assert (
        f"resumed from {job.checkpoint_dir}/step-00000060/state.pt: epoch 4, {position} samples into it"
        in job.log(0)
    )
    last_epoch = [m for m in job.metrics() if m["event"] == "epoch"]
    assert [(m["epoch"], m["samples"], m["world_size"]) for m in last_epoch] == [(4, SAMPLES - position, 1)]
    assert job.metrics()[-1]["event"] == "done"


def test_a_checkpoint_resumes_under_the_other_strategy(make_job: Any, kit: Any) -> None:
    # A job out of memory under DDP continues sharded, and back: the checkpoint holds the whole state either
    # way. One job, three runs (each direction once): epochs 1-2 under ddp, 3 under fsdp, 4 under ddp, each
    # resuming from the checkpoint of its predecessor's last epoch (the only ones written here).
    job = make_job(nodes=1, nproc=2)
    for epochs, strategy in ((2, "ddp"), (3, "fsdp"), (4, "ddp")):
        args = [*ARGS, f"--epochs={epochs}", f"--strategy={strategy}", "--checkpoint-every=0"]
        run = job.start(0, args)
        assert kit.wait(run, WAIT_S) == 0, job.log(0)
    log, steps = job.log(0), steps_in_epoch(SAMPLES, 0, 2, BATCH)
    assert f"step {2 * steps} (written under ddp, continuing under fsdp)" in log
    assert f"step {3 * steps} (written under fsdp, continuing under ddp)" in log
    trained, reference = load_model(job), reference_weights(world_size=2)
    for name in reference:
        torch.testing.assert_close(trained[name], reference[name], rtol=1e-4, atol=1e-5)
