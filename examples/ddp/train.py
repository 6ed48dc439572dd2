"""Train a small binary classifier with DistributedDataParallel: one process per GPU (or CPU slot).

Written the way chapter 19.3 writes it, for torchrun, which starts the processes and gives each one RANK,
LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (the env:// rendezvous):

    torchrun --nproc_per_node=4 --nnodes=2 --node_rank=0 --master_addr=10.0.0.1 --master_port=29500 \\
        train.py --epochs 3

On Vertex AI, `launcher: torchrun` in job.yaml runs exactly that on every replica. NCCL on GPUs, gloo on
CPU. Rank 0 logs and saves; every rank prints one last line with a checksum of its parameters.
"""

from __future__ import annotations

import argparse
import hashlib
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class MyModel(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, 64), nn.ReLU(), nn.Linear(64, 1), nn.Sigmoid())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


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


def setup() -> torch.device:
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl")  # env:// rendezvous: torchrun set RANK, WORLD_SIZE, MASTER_*
        return torch.device(f"cuda:{local_rank}")
    dist.init_process_group("gloo")
    return torch.device("cpu")


def cleanup() -> None:
    dist.barrier()  # every rank gets here before any tears the group down
    dist.destroy_process_group()


def parameters_sha256(model: nn.Module) -> str:
    digest = hashlib.sha256()
    for tensor in model.state_dict().values():
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def train(args: argparse.Namespace) -> None:
    device = setup()
    rank, world_size = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])

    torch.manual_seed(args.seed)
    model = MyModel(args.features).to(device)
    model = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)

    # The sampler gives every process its own part of the data
    dataset = make_dataset(args.samples, args.features, args.seed)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(dataset, sampler=sampler, batch_size=args.batch_size)

    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    criterion = nn.BCELoss()

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)  # a different shuffle every epoch, the same on every rank
        for batch_features, batch_labels in loader:
            batch_features = batch_features.to(device)
            batch_labels = batch_labels.to(device)

            optimizer.zero_grad()
            outputs = model(batch_features)
            loss = criterion(outputs, batch_labels)
            loss.backward()  # gradients are averaged across all processes here
            optimizer.step()

        if rank == 0:  # only log from the main process
            print(f"Epoch {epoch}, Loss: {loss.item():.4f}", flush=True)

    # Every rank must end with the same parameters: DDP keeps the copies in step.
    checksum = parameters_sha256(model.module)
    print(
        f"rank {rank}/{world_size} (node {os.environ.get('GROUP_RANK', '0')}, local rank {local_rank}/"
        f"{os.environ.get('LOCAL_WORLD_SIZE', '1')}): done, parameters sha256 {checksum}",
        flush=True,
    )

    if rank == 0:  # save the model once, from the main process
        model_dir = local_path(args.model_dir)
        model_dir.mkdir(parents=True, exist_ok=True)
        torch.save(model.module.state_dict(), model_dir / "model.pt")
        print(f"Saved the model to {args.model_dir.rstrip('/')}/model.pt", flush=True)

    cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.001)
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    # Vertex sets AIP_MODEL_DIR (under the job's base output directory) on every replica.
    parser.add_argument("--model-dir", default=os.environ.get("AIP_MODEL_DIR", "models"))
    train(parser.parse_args())


if __name__ == "__main__":
    main()
