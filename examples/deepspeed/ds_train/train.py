"""Train a small model with DeepSpeed ZeRO (stage 2 or 3, from its config file); resume from a checkpoint.

Written for torchrun, which starts one process per GPU and gives each RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT; `deepspeed.init_distributed` reads exactly those (the env:// rendezvous):

    torchrun --nproc_per_node=2 --nnodes=2 --node_rank=0 --master_addr=10.0.0.1 --master_port=29500 \\
        -m ds_train.train --deepspeed_config ds_zero2.json

The config (`--deepspeed_config`, a path; a bare name is looked up beside this file, where the package
ships it) says the ZeRO stage, the micro-batch per process and the optimizer. Checkpoints go to
--checkpoint-dir (default: $AIP_CHECKPOINT_DIR, which Vertex sets on every replica) with
`engine.save_checkpoint`, every rank writing its own shard of the optimizer (and with ZeRO-3 of the model);
a run that finds a checkpoint there loads it and carries on from its step. NCCL on GPUs, gloo on CPU.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn

HERE = Path(__file__).resolve().parent


def local_path(uri: str) -> Path:
    """Where gs://BUCKET/path is for the script: Vertex mounts every bucket at /gcs/BUCKET (Cloud Storage
    FUSE), so gs://BUCKET/path is the file path /gcs/BUCKET/path. A plain path stays as it is."""
    return Path(uri.replace("gs://", "/gcs/", 1) if uri.startswith("gs://") else uri)


def read_config(name: str) -> dict[str, Any]:
    """The DeepSpeed config as a dict; a file that is missing or is not JSON ends the run with one line."""
    path = Path(name)
    if not path.is_absolute() and not path.exists():
        path = HERE / path  # shipped inside the package, beside this script
    try:
        text = path.read_text()
    except OSError as exc:
        sys.exit(f"error: --deepspeed_config {name}: cannot read {path}: {exc.strerror}")
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        try:  # DeepSpeed itself reads its config as HJSON (JSON with comments and trailing commas)
            import hjson

            config = hjson.loads(text)
        except Exception:
            sys.exit(
                f"error: {path}:{exc.lineno}:{exc.colno}: the DeepSpeed config is not valid JSON: {exc.msg}"
            )
    if not isinstance(config, dict):
        sys.exit(f"error: {path}: the DeepSpeed config must be a JSON object, not {type(config).__name__}")
    return config


def say(line: str) -> None:
    """Print one line in one write: torchrun starts the ranks with `python -u`, where print() writes the
    text and its newline separately, so two ranks sharing a log could glue their lines together."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def make_model(features: int, hidden: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(features, hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, 1),
    )


def global_batch(step: int, size: int, features: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The whole job's batch of `step`, the same on every rank and in every run (so a resumed run sees
    exactly the batches an uninterrupted one would)."""
    generator = torch.Generator().manual_seed(seed * 1_000_003 + step)
    x = torch.randn(size, features, generator=generator)
    plane = torch.ones(features) / features**0.5
    return x, (x @ plane > 0).float().unsqueeze(1)


def full_parameters_sha256(model: nn.Module, stage: int) -> str:
    """A checksum of the whole model; with ZeRO-3 the partitions are gathered first (every rank calls it)."""
    import deepspeed

    params = list(model.parameters())
    digest = hashlib.sha256()
    with deepspeed.zero.GatheredParameters(params, enabled=stage == 3):
        for param in params:
            digest.update(param.detach().float().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def held_elements(model: nn.Module, engine: Any, stage: int) -> tuple[int, int, int]:
    """(parameter elements this rank holds, Adam state elements it holds, parameter elements in all)."""
    params = list(model.parameters())
    total = sum(getattr(p, "ds_numel", p.numel()) for p in params)
    held_params = sum(p.ds_tensor.numel() if stage == 3 else p.numel() for p in params)
    inner = getattr(engine.optimizer, "optimizer", engine.optimizer)  # ZeRO wraps the torch optimizer
    held_state = sum(
        value.numel()
        for state in inner.state.values()
        for key, value in state.items()
        if key == "exp_avg" and torch.is_tensor(value)
    )
    return held_params, held_state, total


def train(args: argparse.Namespace) -> None:
    config = read_config(args.deepspeed_config)
    import deepspeed  # after the config is known to parse: importing DeepSpeed takes seconds

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    deepspeed.init_distributed(dist_backend=backend)  # env:// from RANK, WORLD_SIZE, MASTER_ADDR/PORT
    rank = torch.distributed.get_rank()
    world_size = torch.distributed.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    torch.manual_seed(args.seed)  # the same initial model on every rank
    model = make_model(args.features, args.hidden)
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    stage = engine.zero_optimization_stage()
    micro = engine.train_micro_batch_size_per_gpu()

    checkpoints = local_path(args.checkpoint_dir)
    start = 0
    if (checkpoints / "latest").is_file():  # written by save_checkpoint: the newest tag
        path, client_state = engine.load_checkpoint(str(checkpoints))
        start = int((client_state or {}).get("step", 0))
        if rank == 0:
            say(f"Resumed from {path} at step {start}")

    device = engine.device
    criterion = nn.BCEWithLogitsLoss()
    loss = torch.zeros(())
    for step in range(start, args.steps):
        x, y = global_batch(step, micro * world_size, args.features, args.seed)
        mine = slice(rank * micro, (rank + 1) * micro)  # this rank's micro-batch of the global batch
        loss = criterion(engine(x[mine].to(device)), y[mine].to(device))
        engine.backward(loss)  # ZeRO reduce-scatters the gradients: each rank keeps its partition's
        engine.step()
        done = step + 1
        if done % args.checkpoint_every == 0 or done == args.steps:
            engine.save_checkpoint(str(checkpoints), tag=f"step{done}", client_state={"step": done})
    if rank == 0 and args.steps > start:
        say(f"Step {args.steps}, loss {loss.item():.4f}; checkpoint step{args.steps}")

    held_params, held_state, total = held_elements(model, engine, stage)
    checksum = full_parameters_sha256(model, stage)
    say(
        f"rank {rank}/{world_size} (node {os.environ.get('GROUP_RANK', '0')}, local rank {local_rank}/"
        f"{os.environ.get('LOCAL_WORLD_SIZE', '1')}): done, ZeRO stage {stage}, holds {held_params} of"
        f" {total} parameters and {held_state} of {total} Adam moments, full parameters sha256 {checksum}"
    )
    torch.distributed.barrier()  # every rank gets here before any tears the group down
    torch.distributed.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deepspeed_config", "--deepspeed-config", default="ds_zero2.json")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--checkpoint-every", type=int, default=4)
    parser.add_argument("--features", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint-dir", default=os.environ.get("AIP_CHECKPOINT_DIR", "checkpoints"))
    train(parser.parse_args())


if __name__ == "__main__":
    main()
