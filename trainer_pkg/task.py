"""Entry point of every replica: `python -m trainer_pkg.task [flags]` (see `--help`).

On Vertex (CLUSTER_SPEC), under `vertexdist local-run` or alone, this process is the node: it starts one DDP
worker per GPU or CPU slot. Under torchrun, which has already started one process per rank, it trains itself.
"""

from __future__ import annotations

import os
import sys

from trainer_pkg.cluster import ClusterInfo, detect_cluster, visible_gpu_count
from trainer_pkg.config import TrainConfig, local_path, parse_config
from trainer_pkg.csvdata import check_header
from trainer_pkg.errors import TrainerError
from trainer_pkg.launch import ReplicaLauncher, start_method_from_env


def resolve_device(requested: str, nproc: int) -> str:
    gpus = visible_gpu_count()
    if requested == "cpu" or (requested == "auto" and gpus == 0):
        return "cpu"
    if gpus == 0:
        raise TrainerError("--device cuda but no GPU is visible (CUDA_VISIBLE_DEVICES / NVIDIA driver)")
    if nproc > gpus:
        raise TrainerError(
            f"{nproc} processes per node need {nproc} GPUs, but {gpus} are visible; lower --nproc-per-node"
        )
    return "cuda"


def check_inputs(config: TrainConfig) -> None:
    """Fail before any worker starts on what can be checked cheaply."""
    if config.data != "synthetic":
        check_header(local_path(config.data), config.label_column)


def run(config: TrainConfig, cluster: ClusterInfo) -> int:
    placement = cluster.placement
    if not placement.is_training_node:
        hook = " (no evaluator hook yet)" if placement.role == "evaluator" else ""
        print(f"trainer_pkg: this replica is a {placement.role}, not a training rank; nothing to do{hook}")
        return 0
    check_inputs(config)
    device = resolve_device(config.device, cluster.nproc_per_node)
    if placement.environment == "torchrun":
        from trainer_pkg.worker import exit_now, run_worker

        exit_now(run_worker(config, {**os.environ, "TRAINER_PKG_DEVICE": device}))
    launcher = ReplicaLauncher(config, cluster, device=device, start_method=start_method_from_env(os.environ))
    return launcher.run()


def main(argv: list[str] | None = None) -> int:
    try:
        config, nproc_flag = parse_config(argv)
        return run(config, detect_cluster(nproc_flag))
    except TrainerError as exc:
        print(f"trainer_pkg: error: {exc.message}", file=sys.stderr, flush=True)
        return exc.exit_code


if __name__ == "__main__":
    # Not sys.exit: after a stop on SIGTERM, Python's own shutdown of this process (torch loaded, its workers
    # forked from it) took 1.4 s between the last checkpoint and the replica's end, which a preempted run paid
    # before its next attempt could start (bench/bench_recovery.py). exit_now runs the atexit handlers and
    # flushes stdio first, as the workers end.
    from trainer_pkg.process_exit import exit_now

    exit_now(main())
