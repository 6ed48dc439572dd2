"""Benchmark of trainer_pkg on CPU (gloo), each figure against a baseline run in this same script.

1. Throughput, 2 ranks: `python -m trainer_pkg.task` against the chapter's plain DDP loop (DataLoader over a
   TensorDataset with a DistributedSampler, batch 64; same model, data, optimizer, loss and threads per rank).
2. Worker start-up, replica start -> first optimizer step, 1 node x 2 processes: our replica launcher (fork,
   the default, and exec) against `torchrun --standalone` launching the same `trainer_pkg.task`.

Run: .venv/bin/python bench/bench_trainer.py [--samples N] [--epochs E] [--repeats R]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable

# The chapter's loop (section 19.3), on CPU: gloo instead of NCCL, logits + BCEWithLogits for the same model.
PLAIN_DDP = textwrap.dedent(
    """
    import json, os, sys, time, datetime
    import torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data.distributed import DistributedSampler
    from trainer_pkg.data import synthetic_dataset, feature_scaling
    from trainer_pkg.model import build_model

    def train(rank, world_size, port, samples, epochs, threads, out):
        torch.set_num_threads(threads)
        store = dist.TCPStore("127.0.0.1", port, world_size, rank == 0, datetime.timedelta(seconds=60))
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size)
        data = synthetic_dataset(samples, 0)
        model = build_model(data.features.shape[1], (64, 32), 0)
        model.set_scaling(*feature_scaling(data))
        model = DDP(model)
        dataset = TensorDataset(data.features, data.labels)
        sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank)
        loader = DataLoader(dataset, sampler=sampler, batch_size=64)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
        criterion = torch.nn.BCEWithLogitsLoss()
        rates = []
        for epoch in range(epochs):
            start = time.perf_counter()
            sampler.set_epoch(epoch)
            for features, labels in loader:
                optimizer.zero_grad()
                loss = criterion(model(features), labels)
                loss.backward()
                optimizer.step()
            dist.barrier()
            rates.append(samples / (time.perf_counter() - start))
            if rank == 0:
                print(f"Epoch {epoch}, Loss: {loss.item():.4f}")
        if rank == 0:
            with open(out, "w") as handle:
                json.dump(rates, handle)
        dist.destroy_process_group()

    if __name__ == "__main__":
        port, samples, epochs, threads = (int(a) for a in sys.argv[1:5])
        out = sys.argv[5]
        torch.multiprocessing.spawn(train, args=(2, port, samples, epochs, threads, out), nprocs=2)
    """
)


def clean_env(**extra: str) -> dict[str, str]:
    drop = ("CLUSTER_SPEC", "TF_CONFIG", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith(("AIP_", "VERTEXDIST_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def metrics(run_dir: Path) -> list[dict[str, object]]:
    lines = (run_dir / "outputs" / "model" / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    """Wall-clock start time of the command; raises if it fails."""
    start = time.time()
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise SystemExit(f"failed: {' '.join(argv)}\n{result.stdout}\n{result.stderr}")
    return start


def trainer_throughput(samples: int, epochs: int) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        args = [
            "--nproc-per-node=2",
            f"--epochs={epochs}",
            f"--samples={samples}",
            "--batch-size=64",
            "--rdzv-timeout=60",
        ]
        run([PYTHON, "-m", "trainer_pkg.task", *args], cwd, clean_env())
        return [float(m["samples_per_s"]) for m in metrics(cwd) if m["event"] == "epoch"]  # type: ignore[arg-type]


def plain_ddp_throughput(samples: int, epochs: int) -> list[float]:
    threads = max(1, len(os.sched_getaffinity(0)) // 2)  # what the trainer gives each of its 2 ranks
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        (cwd / "plain_ddp.py").write_text(PLAIN_DDP)
        out = cwd / "rates.json"
        argv = [PYTHON, "plain_ddp.py", str(free_port()), str(samples), str(epochs), str(threads), str(out)]
        run(argv, cwd, clean_env(OMP_NUM_THREADS=str(threads)))
        return [float(r) for r in json.loads(out.read_text())]


def startup(kind: str) -> float:
    """Seconds from starting the replica (or torchrun) to the first optimizer step of rank 0."""
    task = ["-m", "trainer_pkg.task", "--epochs=1", "--samples=2048", "--batch-size=64", "--rdzv-timeout=60"]
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        if kind == "torchrun":
            argv = [PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", *task]
            env = clean_env()
        else:
            argv = [PYTHON, *task, "--nproc-per-node=2"]
            env = clean_env(TRAINER_PKG_START_METHOD=kind)
        start = run(argv, cwd, env)
        first = next(m for m in metrics(cwd) if m["event"] == "first_step")
        return float(first["time"]) - start  # type: ignore[arg-type]


def rates(values: list[float]) -> str:
    return ", ".join(f"{v:,.0f}" for v in values)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=50_000)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(
        f"machine: {len(os.sched_getaffinity(0))} CPU cores, load average {os.getloadavg()[0]:.1f}; "
        f"python {sys.version.split()[0]}"
    )

    print(
        f"\n1. throughput, 2 CPU ranks, {args.samples} samples, batch 64 per rank, "
        f"{args.epochs} epochs (first is warm-up)"
    )
    trainer_rates, plain_rates = [], []
    for _ in range(args.repeats):  # interleaved, so that load from elsewhere hits both alike
        trainer_rates += trainer_throughput(args.samples, args.epochs)[1:]
        plain_rates += plain_ddp_throughput(args.samples, args.epochs)[1:]
    trainer_median, plain_median = statistics.median(trainer_rates), statistics.median(plain_rates)
    print(f"   trainer_pkg.task        median {trainer_median:>9,.0f} samples/s  ({rates(trainer_rates)})")
    print(f"   plain DDP + DataLoader  median {plain_median:>9,.0f} samples/s  ({rates(plain_rates)})")
    print(f"   ratio trainer / plain: {trainer_median / plain_median:.2f}x  (bar: >= 2.0x in every run)")

    print("\n2. worker start-up: replica start -> first step, 1 node x 2 processes")
    times: dict[str, list[float]] = {"fork": [], "exec": [], "torchrun": []}
    for _ in range(args.repeats):
        for kind in times:
            times[kind].append(startup(kind))
    medians = {kind: statistics.median(values) for kind, values in times.items()}
    for kind, values in times.items():
        label = {
            "fork": "trainer_pkg.task (fork, default)",
            "exec": "trainer_pkg.task (exec)",
            "torchrun": "torchrun --standalone",
        }[kind]
        print(f"   {label:<34} median {medians[kind]:5.2f} s  ({', '.join(f'{v:.2f}' for v in values)})")
    print(f"   ratio fork / torchrun: {medians['fork'] / medians['torchrun']:.2f}x  (bar: <= 1.0x)")
    print(f"   ratio exec / torchrun: {medians['exec'] / medians['torchrun']:.2f}x")


if __name__ == "__main__":
    main()
