"""A Horovod training script turned into PyTorch DDP, call by call (the `# Horovod:` comments say what each
line replaces). Horovod 0.28.1, its last release, does not build against torch >= 2.1 (its CMake compiles
the PyTorch extension as C++14; torch's headers need C++17), so on today's images this is the way to run
such a script; the docs' strategies page has the whole table.

    # Horovod: horovodrun -np 4 -H host1:2,host2:2 python train.py
    torchrun --nproc_per_node=2 --nnodes=2 --node_rank=0 --master_addr=10.0.0.1 --master_port=29500 \\
        train.py --epochs 2

On Vertex AI, `launcher: torchrun` in job.yaml runs exactly that on every replica. NCCL on GPUs, gloo on
CPU. Every rank prints its own validation loss and the average over all ranks (Horovod's
hvd.allreduce(..., op=hvd.Average)), then a checksum of its parameters.
"""

from __future__ import annotations

import argparse
import hashlib
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def local_path(uri: str) -> Path:
    """Where gs://BUCKET/path is for the script: Vertex mounts every bucket at /gcs/BUCKET (Cloud Storage
    FUSE), so gs://BUCKET/path is the file path /gcs/BUCKET/path. A plain path stays as it is."""
    return Path(uri.replace("gs://", "/gcs/", 1) if uri.startswith("gs://") else uri)


def make_dataset(samples: int, features: int, seed: int) -> TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, features, generator=generator)
    plane = torch.randn(features, generator=generator)
    return TensorDataset(x, (x @ plane > 0).float().unsqueeze(1))


def average(value: float, device: torch.device) -> float:
    """Horovod: hvd.allreduce(torch.tensor(value), op=hvd.Average). gloo has no AVG: sum, then divide."""
    tensor = torch.tensor([value], device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return float(tensor) / dist.get_world_size()


def parameters_sha256(model: nn.Module) -> str:
    digest = hashlib.sha256()
    for tensor in model.state_dict().values():
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def train(args: argparse.Namespace) -> None:
    # Horovod: hvd.init()
    local_rank = int(os.environ["LOCAL_RANK"])  # Horovod: hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)  # Horovod: torch.cuda.set_device(hvd.local_rank())
        dist.init_process_group("nccl")
        device = torch.device(f"cuda:{local_rank}")
    else:
        dist.init_process_group("gloo")
        device = torch.device("cpu")
    rank, world_size = dist.get_rank(), dist.get_world_size()  # Horovod: hvd.rank(), hvd.size()

    torch.manual_seed(args.seed)
    model = nn.Sequential(nn.Linear(args.features, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)

    train_set = make_dataset(args.samples, args.features, args.seed)
    # Horovod: DistributedSampler(train_set, num_replicas=hvd.size(), rank=hvd.rank())
    sampler = DistributedSampler(train_set, num_replicas=world_size, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)

    # Horovod: optim.SGD(model.parameters(), lr=args.lr * hvd.size()) -- the same scaling rule
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * world_size, momentum=0.9)
    # Horovod: hvd.broadcast_parameters(model.state_dict(), root_rank=0) -- DDP broadcasts rank 0's
    #          parameters and buffers when it wraps the model.
    # Horovod: optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
    #                                               compression=hvd.Compression.fp16)
    #          -- DDP all-reduces (averages) the gradients during backward; fp16 compression is a comm hook.
    ddp = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)
    ddp.register_comm_hook(state=None, hook=default_hooks.fp16_compress_hook)
    # Horovod: hvd.broadcast_optimizer_state(optimizer, root_rank=0) -- a fresh optimizer is the same on
    #          every rank; after a resume every rank loads the same checkpoint.

    criterion = nn.BCEWithLogitsLoss()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)  # Horovod: train_sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(ddp(x.to(device)), y.to(device))
            loss.backward()
            optimizer.step()
        # Every rank scores its own shard of a held-out set; the metric is the average over ranks.
        held_out = make_dataset(args.samples // 4, args.features, args.seed + 1 + rank)
        with torch.no_grad():
            mine = float(criterion(model(held_out.tensors[0].to(device)), held_out.tensors[1].to(device)))
        mean = average(mine, device)
        if rank == 0:  # Horovod: if hvd.rank() == 0: print(...)
            print(f"Epoch {epoch}, average validation loss {mean:.6f}", flush=True)

    print(
        f"rank {rank}/{world_size} (node {os.environ.get('GROUP_RANK', '0')}, local rank {local_rank}/"
        f"{os.environ.get('LOCAL_WORLD_SIZE', '1')}): done, validation loss {mine:.6f}, average {mean:.6f},"
        f" parameters sha256 {parameters_sha256(model)}",
        flush=True,
    )
    if rank == 0:  # Horovod: save checkpoints only on worker 0
        model_dir = local_path(args.model_dir)
        model_dir.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), model_dir / "model.pt")
        print(f"Saved the model to {args.model_dir.rstrip('/')}/model.pt", flush=True)
    dist.barrier()  # every rank gets here before any tears the group down
    dist.destroy_process_group()  # Horovod: hvd.shutdown() (optional there too)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--samples", type=int, default=1024)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model-dir", default=os.environ.get("AIP_MODEL_DIR", "models"))
    train(parser.parse_args())


if __name__ == "__main__":
    main()
