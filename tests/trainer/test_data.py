"""Sharding (every sample once per epoch, DistributedSampler's order) and reading churn CSVs."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data.distributed import DistributedSampler

from trainer_pkg.csvdata import Table, check_header, read_table, write_table
from trainer_pkg.data import (
    Dataset,
    EpochShard,
    dataset_from_table,
    epoch_order,
    steps_in_epoch,
    synthetic_dataset,
    table_from_dataset,
)
from trainer_pkg.errors import TrainerError


def indexed(n: int) -> Dataset:
    """A dataset whose single feature is the sample's index."""
    return dataset_from_table(
        Table(("index",), [[float(i)] for i in range(n)], [float(i % 2) for i in range(n)])
    )


def seen(n: int, *, epoch: int, start: int, world: int, batch: int, seed: int = 7) -> list[list[list[int]]]:
    """Sample indices per step per rank."""
    dataset = indexed(n)
    per_rank = [
        [
            [int(v) for v in b.features[:, 0].tolist()]
            for b in EpochShard.build(
                dataset, seed=seed, epoch=epoch, start=start, rank=rank, world_size=world, batch_size=batch
            ).batches()
        ]
        for rank in range(world)
    ]
    steps = {len(batches) for batches in per_rank}
    assert steps == {steps_in_epoch(n, start, world, batch)}, "every rank must take the same number of steps"
    return [list(step) for step in zip(*per_rank, strict=True)]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 300), world=st.integers(1, 6), batch=st.integers(1, 20), epoch=st.integers(0, 3))
def test_every_sample_exactly_once_per_epoch(n: int, world: int, batch: int, epoch: int) -> None:
    steps = seen(n, epoch=epoch, start=0, world=world, batch=batch)
    counts = Counter(i for step in steps for rank_batch in step for i in rank_batch)
    assert counts == Counter(range(n))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 200), world=st.integers(1, 5), batch=st.integers(1, 16), data=st.data())
def test_global_step_is_a_contiguous_block_of_the_epoch_order(
    n: int, world: int, batch: int, data: st.DataObject
) -> None:
    start = data.draw(st.integers(0, n - 1))
    order = epoch_order(n, 7, 1).tolist()
    for s, step in enumerate(seen(n, epoch=1, start=start, world=world, batch=batch)):
        block = order[start + s * world * batch : start + (s + 1) * world * batch]
        assert sorted(i for rank_batch in step for i in rank_batch) == sorted(block)


def test_resuming_mid_epoch_with_another_world_size_sees_the_rest_once() -> None:
    n, order = 101, epoch_order(101, 7, 2).tolist()
    first = seen(n, epoch=2, start=0, world=4, batch=5)[:3]  # 3 steps of 4 x 5 = 60 samples, then a crash
    rest = seen(n, epoch=2, start=60, world=3, batch=4)
    consumed = [i for steps in (first, rest) for step in steps for rank_batch in step for i in rank_batch]
    assert sorted(consumed) == list(range(n))
    assert {i for step in first for b in step for i in b} == set(order[:60])


def test_order_matches_distributed_sampler_without_its_padding() -> None:
    n, world, seed = 10, 4, 3  # 10 % 4 != 0: DistributedSampler pads two ranks with repeated samples
    dataset = indexed(n)
    for epoch in range(3):
        for rank in range(world):
            sampler = DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=True, seed=seed)
            sampler.set_epoch(epoch)
            expected = list(sampler)[: len(range(rank, n, world))]
            shard = EpochShard.build(
                dataset, seed=seed, epoch=epoch, start=0, rank=rank, world_size=world, batch_size=64
            )
            assert [int(v) for v in shard.features[:, 0].tolist()] == expected


def test_order_differs_across_epochs_and_is_reproducible() -> None:
    orders = [epoch_order(1000, 5, epoch).tolist() for epoch in range(3)]
    assert orders[0] != orders[1] != orders[2]
    assert epoch_order(1000, 5, 1).tolist() == orders[1]
    assert sorted(orders[2]) == list(range(1000))


def test_short_last_step_reports_its_global_size() -> None:
    shard = EpochShard.build(indexed(10), seed=0, epoch=0, start=0, rank=1, world_size=3, batch_size=2)
    sizes = [(len(b.labels), b.global_size, b.end) for b in shard.batches()]
    assert sizes == [(2, 6, 6), (1, 4, 10)]  # rank 1 holds positions 1, 4, 7: its last batch is one sample


def test_batches_are_views_of_the_pre_gathered_shard() -> None:
    shard = EpochShard.build(indexed(64), seed=0, epoch=0, start=0, rank=0, world_size=2, batch_size=8)
    first = next(iter(shard.batches()))
    assert first.features.data_ptr() == shard.features.data_ptr()


def test_synthetic_data_is_deterministic_and_churn_like() -> None:
    a, b = synthetic_dataset(2000, seed=11), synthetic_dataset(2000, seed=11)
    assert torch.equal(a.features, b.features) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.features, synthetic_dataset(2000, seed=12).features)
    assert 0.1 < float(a.labels.mean()) < 0.6
    assert a.feature_names[0] == "tenure_months"


def test_csv_round_trip(tmp_path: Path) -> None:
    dataset = synthetic_dataset(50, seed=1)
    path = tmp_path / "churn.csv"
    write_table(path, table_from_dataset(dataset))
    back = dataset_from_table(read_table(path, "churn"))
    assert back.feature_names == dataset.feature_names
    assert torch.equal(back.features, dataset.features) and torch.equal(back.labels, dataset.labels)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "is empty; expected a header row"),
        ("tenure,charges,label\n1,2,0\n", "has no label column 'churn' (columns: tenure, charges, label)"),
        ("churn\n1\n", "has no feature columns besides 'churn'"),
        ("a,a,churn\n1,2,0\n", "repeats column(s) a"),
        ("tenure,churn\n", "has a header but no rows"),
        ("tenure,churn\n1,0\nabc,1\n", ":3: column 'tenure': 'abc' is not a number"),
        ("tenure,churn\n1,0\n2\n", ":3: 1 values, expected 2"),
        ("tenure,churn\n1,yes\n", ":2: column 'churn': 'yes' is not a number"),
        ("tenure,churn\n1,2\n", ":2: label 'churn' must be 0 or 1, got '2'"),
    ],
)
def test_bad_csv_names_the_file(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(TrainerError) as caught:
        read_table(path, "churn")
    assert str(path) in caught.value.message
    assert message in caught.value.message


def test_missing_csv(tmp_path: Path) -> None:
    with pytest.raises(TrainerError, match="does not exist"):
        check_header(tmp_path / "nope.csv", "churn")
