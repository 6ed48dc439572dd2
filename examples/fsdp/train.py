"""Train a model sharded across every process with FSDP2 (`fully_shard`) and save a sharded checkpoint.

Each process holds 1/WORLD_SIZE of every layer's parameters, gradients and Adam state; a layer's full
weights exist only while it runs. The checkpoint (torch.distributed.checkpoint) is written the same way:
one shard file per process, plus the metadata that lets any number of processes load it again.

    torchrun --nproc_per_node=2 --nnodes=2 --node_rank=0 --master_addr=10.0.0.1 --master_port=29500 \\
        train.py --epochs 3

On Vertex AI, `launcher: torchrun` in job.yaml runs exactly that on every replica. NCCL on GPUs; on CPU,
gloo, with the device mesh on "cpu".
"""

from __future__ import annotations

import argparse
import hashlib
import os
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_model_state_dict
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

try:  # torch >= 2.6
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor
except ImportError:  # torch 2.4 and 2.5 (Vertex's newest prebuilt image has 2.4) keep them private
    from torch.distributed._composable.fsdp import fully_shard
    from torch.distributed._tensor import DTensor


def make_model(features: int, hidden: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(features, hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, 1),
        nn.Sigmoid(),
    )


def make_dataset(samples: int, features: int, seed: int) -> TensorDataset:
    """Points labelled by which side of a random plane they fall on: learnable, and the same on every rank."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, features, generator=generator)
    plane = torch.randn(features, generator=generator)
    return TensorDataset(x, (x @ plane > 0).float().unsqueeze(1))


def local_path(uri: str) -> Path:
    """Where gs://BUCKET/path is for the script: Vertex mounts every bucket at /gcs/BUCKET (Cloud Storage
    FUSE), so the model folder is the file path /gcs/BUCKET/path. A plain path stays as it is."""
    return Path(uri.replace("gs://", "/gcs/"))


def setup() -> tuple[torch.device, DeviceMesh]:
    local_rank = int(os.environ["LOCAL_RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl")  # env:// rendezvous: torchrun set RANK, WORLD_SIZE, MASTER_*
        return torch.device(f"cuda:{local_rank}"), init_device_mesh("cuda", (world_size,))
    dist.init_process_group("gloo")
    return torch.device("cpu"), init_device_mesh("cpu", (world_size,))


def shard(model: nn.Module, mesh: DeviceMesh) -> None:
    """Each Linear is its own FSDP unit (gathered just for its forward/backward), then the whole model."""
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)


def full_parameters_sha256(model: nn.Module) -> str:
    """A checksum of the whole model, gathered from the shards (every rank must call it)."""
    digest = hashlib.sha256()
    for param in model.parameters():
        full = param.full_tensor() if isinstance(param, DTensor) else param
        digest.update(full.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def train(args: argparse.Namespace) -> None:
    device, mesh = setup()
    rank, world_size = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])

    torch.manual_seed(args.seed)  # the same full model everywhere before it is sharded
    model = make_model(args.features, args.hidden).to(device)
    shard(model, mesh)

    dataset = make_dataset(args.samples, args.features, args.seed)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(dataset, sampler=sampler, batch_size=args.batch_size)

    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)  # each rank steps only its own shard
    criterion = nn.BCELoss()

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for batch_features, batch_labels in loader:
            optimizer.zero_grad()
            loss = criterion(model(batch_features.to(device)), batch_labels.to(device))
            loss.backward()  # gradients are reduce-scattered: each rank gets its shard's
            optimizer.step()
        if rank == 0:
            print(f"Epoch {epoch}, Loss: {loss.item():.4f}", flush=True)

    held = sum(p.to_local().numel() if isinstance(p, DTensor) else p.numel() for p in model.parameters())
    total = sum(p.numel() for p in model.parameters())
    checksum = full_parameters_sha256(model)
    print(
        f"rank {rank}/{world_size} (node {os.environ.get('GROUP_RANK', '0')}, local rank {local_rank}/"
        f"{os.environ.get('LOCAL_WORLD_SIZE', '1')}): done, holds {held} of {total} parameters, "
        f"full parameters sha256 {checksum}",
        flush=True,
    )

    # Every rank writes its own shard; rank 0 also writes the checkpoint's metadata.
    checkpoint = local_path(args.model_dir) / "checkpoint"
    dcp.save({"model": get_model_state_dict(model)}, checkpoint_id=str(checkpoint))
    if rank == 0:
        print(f"Saved a sharded checkpoint to {args.model_dir.rstrip('/')}/checkpoint", flush=True)

    dist.barrier()  # every rank gets here before any tears the group down
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.001)
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--features", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    # Vertex sets AIP_MODEL_DIR (under the job's base output directory) on every replica.
    parser.add_argument("--model-dir", default=os.environ.get("AIP_MODEL_DIR", "models"))
    train(parser.parse_args())


if __name__ == "__main__":
    main()
