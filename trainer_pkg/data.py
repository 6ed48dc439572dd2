"""The training data as two tensors, and each rank's share of an epoch as pre-gathered tensors.

The order of an epoch is DistributedSampler's (`randperm` seeded with seed + epoch), but without its padding:
rank r of W takes positions start+r, start+r+W, ... so that every sample is seen exactly once per epoch, and
global step s covers the contiguous block [start + s*W*B, start + (s+1)*W*B) of that order. A resumed run can
therefore start mid-epoch at any position, with any world size.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from trainer_pkg.config import TrainConfig, local_path
from trainer_pkg.csvdata import Table, read_table

SYNTHETIC_COLUMNS = (
    "tenure_months",
    "monthly_charges",
    "total_charges",
    "support_calls",
    "contract_months",
    "num_services",
    "paperless_billing",
    "senior_citizen",
)


@dataclass(frozen=True)
class Dataset:
    features: torch.Tensor  # float32 [n, f]
    labels: torch.Tensor  # float32 [n]
    feature_names: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.labels.shape[0])


def synthetic_dataset(samples: int, seed: int) -> Dataset:
    """Churn-like rows drawn from a fixed generator, so every rank (and every rerun) builds the same data."""
    g = torch.Generator().manual_seed(seed)
    n = samples
    tenure = torch.randint(0, 73, (n,), generator=g).float()
    monthly = 20 + 100 * torch.rand(n, generator=g)
    total = tenure * monthly * (0.9 + 0.2 * torch.rand(n, generator=g))
    calls = torch.poisson(torch.full((n,), 1.5), generator=g)
    contract = torch.tensor([1.0, 12.0, 24.0])[torch.randint(0, 3, (n,), generator=g)]
    services = torch.randint(1, 9, (n,), generator=g).float()
    paperless = (torch.rand(n, generator=g) < 0.6).float()
    senior = (torch.rand(n, generator=g) < 0.16).float()
    features = torch.stack([tenure, monthly, total, calls, contract, services, paperless, senior], dim=1)
    logit = (
        -0.05 * (tenure - 30)
        + 0.03 * (monthly - 70)
        + 0.6 * (calls - 1.5)
        - 0.08 * (contract - 12)
        - 0.15 * (services - 4.5)
        + 0.4 * paperless
        + 0.5 * senior
        - 0.5
    )
    labels = (torch.rand(n, generator=g) < torch.sigmoid(logit)).float()
    return Dataset(features.contiguous(), labels, SYNTHETIC_COLUMNS)


def dataset_from_table(table: Table) -> Dataset:
    return Dataset(
        torch.tensor(table.features, dtype=torch.float32),
        torch.tensor(table.labels, dtype=torch.float32),
        table.feature_names,
    )


def table_from_dataset(dataset: Dataset) -> Table:
    return Table(dataset.feature_names, dataset.features.tolist(), dataset.labels.tolist())


def load_dataset(config: TrainConfig) -> Dataset:
    if config.data == "synthetic":
        return synthetic_dataset(config.samples, config.seed)
    return dataset_from_table(read_table(local_path(config.data), config.label_column))


# Validation rows for synthetic data come from the same generator under another seed: unseen, same law.
VALIDATION_SEED_OFFSET = 1_000_003


def load_validation(config: TrainConfig) -> Dataset:
    """The rows a tuning trial is scored on: `--val-data`, or fresh synthetic rows (a fifth as many)."""
    if config.val_data:
        return dataset_from_table(read_table(local_path(config.val_data), config.label_column))
    return synthetic_dataset(max(1, config.samples // 5), config.seed + VALIDATION_SEED_OFFSET)


def feature_scaling(dataset: Dataset) -> tuple[torch.Tensor, torch.Tensor]:
    x = dataset.features.double()
    return x.mean(dim=0).float(), x.std(dim=0, unbiased=False).float()


def epoch_order(n: int, seed: int, epoch: int) -> torch.Tensor:
    """The same permutation as `DistributedSampler(shuffle=True, seed=seed)` after `set_epoch(epoch)`."""
    g = torch.Generator().manual_seed(seed + epoch)
    return torch.randperm(n, generator=g)


def steps_in_epoch(n: int, start: int, world_size: int, batch_size: int) -> int:
    return math.ceil((n - start) / (world_size * batch_size))


@dataclass(frozen=True)
class Batch:
    features: torch.Tensor
    labels: torch.Tensor
    global_size: int  # samples in this step across all ranks (the last step of an epoch may be short)
    end: int  # position in the epoch's order after this step


@dataclass(frozen=True)
class EpochShard:
    """One rank's remaining samples of one epoch, gathered once so that each step is a slice (a view)."""

    features: torch.Tensor
    labels: torch.Tensor
    n: int
    start: int
    world_size: int
    batch_size: int

    @classmethod
    def build(
        cls,
        dataset: Dataset,
        *,
        seed: int,
        epoch: int,
        start: int,
        rank: int,
        world_size: int,
        batch_size: int,
    ) -> EpochShard:
        mine = epoch_order(len(dataset), seed, epoch)[start + rank :: world_size]
        return cls(dataset.features[mine], dataset.labels[mine], len(dataset), start, world_size, batch_size)

    def __len__(self) -> int:
        return steps_in_epoch(self.n, self.start, self.world_size, self.batch_size)

    def batches(self) -> Iterator[Batch]:
        b, step_span = self.batch_size, self.world_size * self.batch_size
        for step in range(len(self)):
            begin = self.start + step * step_span
            end = min(self.n, begin + step_span)
            yield Batch(
                self.features[step * b : (step + 1) * b],
                self.labels[step * b : (step + 1) * b],
                global_size=end - begin,
                end=end,
            )
