"""Train a small binary classifier with Ray Train: TorchTrainer over a Ray Dataset, one Ray worker per GPU.

Written the way chapter 19.4 writes it, for a Ray cluster that is already up: `ray.init()` joins it,
`TorchTrainer` starts the workers (DDP is set up by `prepare_model`), every worker reads its shard of the
dataset and reports its loss each epoch with `train.report`, and the last report carries a checkpoint.

    ray start --head ...; ray start --address HEAD:6379 ...   # one Ray node per machine
    python train.py --epochs 3                                 # on the head

On Vertex AI, `launcher: ray` in job.yaml does exactly that: a Ray head on the primary replica, a Ray
node on every other one, this script on the head. Without GPUs the workers train on CPU (gloo).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

import ray
import torch
from ray import train
from ray.train import Checkpoint, RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer
from torch import nn


class MyModel(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, 64), nn.ReLU(), nn.Linear(64, 1), nn.Sigmoid())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def make_rows(samples: int, features: int, seed: int) -> list[dict[str, Any]]:
    """Points labelled by which side of a random plane they fall on: learnable in a few epochs."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, features, generator=generator)
    plane = torch.randn(features, generator=generator)
    y = (x @ plane > 0).float()
    return [{"x": row.numpy(), "y": label.item()} for row, label in zip(x, y, strict=True)]


def storage_path(uri: str) -> str:
    """Ray's storage_path for gs://BUCKET/path: Vertex mounts every bucket at /gcs/BUCKET (Cloud Storage
    FUSE), which every node of the cluster sees. A plain path is made absolute, for every node alike."""
    return str(Path(uri.replace("gs://", "/gcs/")).resolve())


def train_func(config: dict[str, Any]) -> None:
    """Training function run on each worker."""
    context = train.get_context()
    rank, world_size = context.get_world_rank(), context.get_world_size()
    node_id = ray.get_runtime_context().get_node_id()

    torch.manual_seed(config["seed"])
    model = MyModel(config["features"])
    model = train.torch.prepare_model(model)  # Ray handles DDP setup

    optimizer = torch.optim.Adam(model.parameters(), lr=config["lr"])
    criterion = nn.BCELoss()
    dataset = train.get_dataset_shard("train")

    for epoch in range(config["epochs"]):
        for batch in dataset.iter_torch_batches(batch_size=config["batch_size"]):
            optimizer.zero_grad()
            outputs = model(batch["x"])
            loss = criterion(outputs, batch["y"].float().unsqueeze(1))
            loss.backward()  # gradients are averaged across all workers here
            optimizer.step()

        print(
            f"worker {rank}/{world_size} on node {node_id}: epoch {epoch}, loss {loss.item():.4f}",
            flush=True,
        )
        metrics = {"loss": loss.item(), "epoch": epoch, "world_size": world_size, "node_id": node_id}
        if epoch == config["epochs"] - 1:
            # The last epoch's report carries the model: rank 0 writes it, Ray Train keeps it.
            with tempfile.TemporaryDirectory() as folder:
                checkpoint = None
                if rank == 0:
                    torch.save(
                        model.module.state_dict() if world_size > 1 else model.state_dict(),
                        Path(folder) / "model.pt",
                    )
                    checkpoint = Checkpoint.from_directory(folder)
                train.report(metrics, checkpoint=checkpoint)
        else:
            train.report(metrics)  # Report metrics to Ray Train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.001)
    parser.add_argument("--samples", type=int, default=2048)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-workers", type=int, default=0, help="default: one per GPU, else one per node")
    # Vertex sets AIP_CHECKPOINT_DIR (under the job's base output directory) on every replica.
    parser.add_argument("--storage", default=os.environ.get("AIP_CHECKPOINT_DIR", "ray_results"))
    args = parser.parse_args()

    ray.init()  # joins the running cluster (RAY_ADDRESS), as `ray.init(address="auto")` would
    nodes = sorted(node["NodeID"] for node in ray.nodes() if node["Alive"])
    gpus = int(ray.cluster_resources().get("GPU", 0))
    num_workers = args.num_workers or gpus or len(nodes)
    print(f"Ray cluster: nodes {', '.join(nodes)}; {gpus} GPUs; {num_workers} training workers", flush=True)

    # Launch distributed training, one worker per GPU (or per node on CPU); SPREAD puts the workers on
    # different machines where it can (PACK, the default, fills the head first).
    trainer = TorchTrainer(
        train_loop_per_worker=train_func,
        train_loop_config={
            "lr": args.lr,
            "epochs": args.epochs,
            "batch_size": args.batch_size,
            "features": args.features,
            "seed": args.seed,
        },
        scaling_config=ScalingConfig(num_workers=num_workers, use_gpu=gpus > 0, placement_strategy="SPREAD"),
        run_config=RunConfig(name="ray-train-example", storage_path=storage_path(args.storage)),
        datasets={"train": ray.data.from_items(make_rows(args.samples, args.features, args.seed))},
    )

    result = trainer.fit()
    print(f"Final loss: {result.metrics['loss']:.4f} (world size {result.metrics['world_size']})", flush=True)
    print(f"Best checkpoint: {result.checkpoint.path if result.checkpoint else None}", flush=True)


if __name__ == "__main__":
    main()
