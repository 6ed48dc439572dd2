"""Search learning rate and width of a small classifier with Ray Tune: ASHA stops the weak trials early.

Written the way chapter 19.4 writes it: a search space of `tune.loguniform` and `tune.randint`, a
trainable that reports its validation accuracy after every epoch with `tune.report`, and an
`ASHAScheduler` that ends the trials falling behind at each rung, so the cluster's CPUs go to the
promising ones. The trials run on every node of the Ray cluster the script joins (`ray.init()`).

On Vertex AI, `launcher: ray` in job.yaml starts that cluster over the job's replicas and runs this
script on the head.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import ray
import torch
from ray import tune
from ray.tune.schedulers import ASHAScheduler
from torch import nn


def make_split(samples: int, features: int, seed: int) -> tuple[torch.Tensor, ...]:
    """Points on either side of a random plane, with 10% of the labels flipped: train and validation."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, features, generator=generator)
    plane = torch.randn(features, generator=generator)
    y = (x @ plane > 0).float()
    flip = torch.rand(samples, generator=generator) < 0.1
    y = torch.where(flip, 1 - y, y).unsqueeze(1)
    cut = samples * 4 // 5
    return x[:cut], y[:cut], x[cut:], y[cut:]


def storage_path(uri: str) -> str:
    """Ray's storage_path: a gs:// URI as it is, as the chapter writes it (Ray reaches it through pyarrow's
    GcsFileSystem: on Vertex that is Cloud Storage; in a local run or an emulator job, the job's own storage).
    A plain path is made absolute, for every node alike."""
    return uri if uri.startswith("gs://") else str(Path(uri).resolve())


def train_with_config(config: dict[str, Any]) -> None:
    """One trial: a one-hidden-layer network, trained an epoch at a time, reporting validation accuracy."""
    torch.manual_seed(0)
    x_train, y_train, x_val, y_val = make_split(config["samples"], config["features"], seed=0)
    model = nn.Sequential(
        nn.Linear(config["features"], config["hidden"]), nn.ReLU(), nn.Linear(config["hidden"], 1)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    criterion = nn.BCEWithLogitsLoss()
    for epoch in range(config["max_epochs"]):
        for start in range(0, len(x_train), 64):
            optimizer.zero_grad()
            loss = criterion(model(x_train[start : start + 64]), y_train[start : start + 64])
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            accuracy = ((model(x_val) > 0).float() == y_val).float().mean().item()
        node = ray.get_runtime_context().get_node_id()
        tune.report({"accuracy": accuracy, "epoch": epoch + 1, "node_id": node})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-samples", type=int, default=8)
    parser.add_argument("--max-epochs", type=int, default=10)
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--features", type=int, default=20)
    # Vertex sets AIP_MODEL_DIR (under the job's base output directory) on every replica.
    parser.add_argument("--storage", default=os.environ.get("AIP_MODEL_DIR", "ray_results"))
    args = parser.parse_args()

    ray.init()  # joins the running cluster (RAY_ADDRESS)
    print(
        f"Ray cluster: {len(ray.nodes())} nodes, {ray.cluster_resources().get('CPU', 0):g} CPUs", flush=True
    )

    tuner = tune.Tuner(
        train_with_config,
        param_space={
            "lr": tune.loguniform(1e-4, 0.3),
            "hidden": tune.randint(4, 64),
            "samples": args.samples,
            "features": args.features,
            "max_epochs": args.max_epochs,
        },
        tune_config=tune.TuneConfig(
            metric="accuracy",
            mode="max",
            num_samples=args.num_samples,  # trials run in parallel, one CPU each, over every node
            scheduler=ASHAScheduler(max_t=args.max_epochs, grace_period=1, time_attr="epoch"),
            reuse_actors=True,
        ),
        run_config=tune.RunConfig(name="ray-tune-example", storage_path=storage_path(args.storage)),
    )

    results = tuner.fit()
    for result in results:
        print(
            f"trial {result.metrics['trial_id']}: lr {result.config['lr']:.5f},"
            f" hidden {result.config['hidden']}, {result.metrics['epoch']} epoch(s),"
            f" accuracy {result.metrics['accuracy']:.4f}, node {result.metrics['node_id']}",
            flush=True,
        )
    best = results.get_best_result("accuracy", "max")
    print(f"Best accuracy: {best.metrics['accuracy']:.4f}")
    print(f"Best config: lr {best.config['lr']:.5f}, hidden {best.config['hidden']}")


if __name__ == "__main__":
    main()
