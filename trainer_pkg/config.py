"""The trainer's flags, and where its outputs go (`gs://` directories are Cloud Storage FUSE paths)."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trainer_pkg.errors import TrainerError

GCS_ROOT_VARIABLE = "VERTEXDIST_GCS_ROOT"
DEFAULT_GCS_ROOT = "/gcs"  # where Vertex mounts every bucket the job can read
HP_METRICS = ("val_accuracy", "val_loss")
HEALTH_VARIABLE = "VERTEXDIST_HEALTH"  # the template's `health:` section (JSON), as render passes it
STRATEGIES = ("ddp", "fsdp")  # trainer_pkg.strategies (not imported: it imports torch)


@dataclass(frozen=True)
class TrainConfig:
    """Everything a worker needs to train, identical on every rank (it crosses process boundaries as JSON)."""

    epochs: int = 10
    batch_size: int = 64
    lr: float = 1e-3
    data: str = "synthetic"
    seed: int = 0
    samples: int = 10_000
    label_column: str = "churn"
    hidden: tuple[int, ...] = (64, 32)
    checkpoint_every: int = 0
    keep_checkpoints: int = 3
    rdzv_timeout: float = 600.0
    device: str = "auto"
    model_dir: str = "outputs/model"
    checkpoint_dir: str = "outputs/checkpoints"
    hp_metric_tag: str = ""  # report the validation metric under this tag (a tuning trial's objective)
    hp_metric: str = "val_accuracy"
    val_data: str = ""
    strategy: str = "ddp"
    tensorboard_dir: str = ""  # where rank 0 writes TensorBoard scalars ("" : none)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, raw: str) -> TrainConfig:
        fields: dict[str, Any] = json.loads(raw)
        fields["hidden"] = tuple(fields["hidden"])
        return cls(**fields)


def local_path(uri: str, env: Mapping[str, str] | None = None) -> Path:
    """`gs://B/p` -> `<VERTEXDIST_GCS_ROOT or /gcs>/B/p` (repeated slashes are one); a plain path as is.

    vertexdist's own rule is `vertexdist.wire.gcs_uri.local_gs_path`, which this package cannot import;
    tests/wire/test_gcs_uri.py holds the two to the same answers."""
    env = os.environ if env is None else env
    if uri.startswith("gs://"):
        bucket, _, name = uri[len("gs://") :].partition("/")
        if not bucket:
            raise TrainerError(f"{uri!r} names no bucket")
        parts = [part for part in name.split("/") if part]
        if any(part in (".", "..") for part in parts):
            raise TrainerError(
                f"{uri!r} has a '.' or '..' in its name: it has no folder under the gs:// root"
            )
        return Path(env.get(GCS_ROOT_VARIABLE) or DEFAULT_GCS_ROOT, bucket, *parts)
    return Path(uri)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return value


def _layer_sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated sizes like 64,32, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"layer sizes must be at least 1, got {text!r}")
    return sizes


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m trainer_pkg.task",
        description=(
            "Data-parallel training of a churn classifier (DDP or FSDP); reads its place in the job from the"
            " environment."
        ),
    )
    d = TrainConfig()
    parser.add_argument("--epochs", type=_positive_int, default=d.epochs)
    parser.add_argument("--batch-size", type=_positive_int, default=d.batch_size, help="per worker process")
    parser.add_argument("--lr", type=_positive_float, default=d.lr)
    parser.add_argument("--data", default=d.data, help="'synthetic' or a CSV path (gs:// allowed)")
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--samples", type=_positive_int, default=d.samples, help="rows of synthetic data")
    parser.add_argument("--label-column", default=d.label_column, help="the CSV's 0/1 target column")
    parser.add_argument(
        "--hidden", type=_layer_sizes, default=d.hidden, help="hidden layer sizes, e.g. 64,32"
    )
    parser.add_argument("--nproc-per-node", type=_positive_int, default=None)
    parser.add_argument(
        "--checkpoint-every",
        type=_non_negative_int,
        default=d.checkpoint_every,
        help="steps; 0: epoch ends only",
    )
    parser.add_argument("--keep-checkpoints", type=_positive_int, default=d.keep_checkpoints)
    parser.add_argument(
        "--rdzv-timeout",
        type=_positive_float,
        default=None,
        help=f"seconds; default: the template's health.rendezvous_timeout, else {d.rdzv_timeout:g}",
    )
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default=d.device)
    parser.add_argument("--model-dir", default=None, help="default: $AIP_MODEL_DIR, else outputs/model")
    parser.add_argument(
        "--checkpoint-dir", default=None, help="default: $AIP_CHECKPOINT_DIR, else outputs/checkpoints"
    )
    parser.add_argument(
        "--hp-metric-tag",
        default=d.hp_metric_tag,
        help="report the validation metric under this tag each epoch (cloudml-hypertune file), for tuning",
    )
    parser.add_argument("--hp-metric", choices=HP_METRICS, default=d.hp_metric, help="what to report")
    parser.add_argument(
        "--val-data", default=d.val_data, help="validation CSV (default: fresh synthetic rows for synthetic)"
    )
    parser.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default=d.strategy,
        help="ddp: the whole model on every rank (default); fsdp: parameters, gradients and optimizer state"
        " sharded over the ranks (FSDP2 fully_shard, ZeRO-3)",
    )
    parser.add_argument(
        "--tensorboard-dir",
        default=None,
        help="TensorBoard scalars (loss, accuracy) go here; default: $AIP_TENSORBOARD_LOG_DIR, else none",
    )
    return parser


def template_rdzv_timeout(env: Mapping[str, str]) -> float:
    """The template's `health.rendezvous_timeout` (seconds), else the trainer's default."""
    try:
        seconds = float(json.loads(env.get(HEALTH_VARIABLE) or "{}").get("rendezvous_timeout"))
    except (ValueError, TypeError, AttributeError):
        return TrainConfig.rdzv_timeout
    return seconds if seconds > 0 else TrainConfig.rdzv_timeout


def parse_config(
    argv: list[str] | None, env: Mapping[str, str] | None = None
) -> tuple[TrainConfig, int | None]:
    """The training config and the --nproc-per-node flag (None when not given)."""
    env = os.environ if env is None else env
    args = build_parser().parse_args(argv)
    config = TrainConfig(
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        data=args.data,
        seed=args.seed,
        samples=args.samples,
        label_column=args.label_column,
        hidden=args.hidden,
        checkpoint_every=args.checkpoint_every,
        keep_checkpoints=args.keep_checkpoints,
        rdzv_timeout=args.rdzv_timeout if args.rdzv_timeout is not None else template_rdzv_timeout(env),
        device=args.device,
        model_dir=args.model_dir or env.get("AIP_MODEL_DIR") or TrainConfig.model_dir,
        checkpoint_dir=args.checkpoint_dir or env.get("AIP_CHECKPOINT_DIR") or TrainConfig.checkpoint_dir,
        hp_metric_tag=args.hp_metric_tag,
        hp_metric=args.hp_metric,
        val_data=args.val_data,
        strategy=args.strategy,
        tensorboard_dir=args.tensorboard_dir or env.get("AIP_TENSORBOARD_LOG_DIR") or "",
    )
    if config.hp_metric_tag and config.data != "synthetic" and not config.val_data:
        raise TrainerError("--hp-metric-tag with CSV --data needs --val-data, the rows to score trials on")
    return config, args.nproc_per_node
