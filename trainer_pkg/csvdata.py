"""Reading a churn-like CSV: a header, numeric feature columns and one 0/1 label column (stdlib only)."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from trainer_pkg.errors import TrainerError


@dataclass(frozen=True)
class Table:
    feature_names: tuple[str, ...]
    features: list[list[float]]
    labels: list[float]


def _open_error(path: Path, exc: OSError) -> TrainerError:
    if isinstance(exc, FileNotFoundError):
        return TrainerError(f"data file {path} does not exist")
    return TrainerError(f"cannot read data file {path}: {exc.strerror or exc}")


def check_header(path: Path, label_column: str) -> tuple[str, ...]:
    """The feature column names, or a TrainerError naming the file; cheap enough to run before any worker."""
    try:
        with path.open(newline="") as handle:
            header = next(csv.reader(handle), None)
    except OSError as exc:
        raise _open_error(path, exc) from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise TrainerError(f"data file {path} is not a readable CSV: {exc}") from None
    if not header:
        raise TrainerError(f"data file {path} is empty; expected a header row")
    names = [name.strip() for name in header]
    if label_column not in names:
        raise TrainerError(
            f"data file {path} has no label column {label_column!r} (columns: {', '.join(names)}); "
            "pass --label-column NAME"
        )
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise TrainerError(f"data file {path} repeats column(s) {', '.join(duplicates)}")
    features = tuple(n for n in names if n != label_column)
    if not features:
        raise TrainerError(f"data file {path} has no feature columns besides {label_column!r}")
    return features


def read_table(path: Path, label_column: str) -> Table:
    feature_names = check_header(path, label_column)
    features: list[list[float]] = []
    labels: list[float] = []
    try:
        with path.open(newline="") as handle:
            reader = csv.reader(handle)
            header = [name.strip() for name in next(reader)]
            label_at = header.index(label_column)
            for line, row in enumerate(reader, start=2):
                if not row:
                    continue
                if len(row) != len(header):
                    raise TrainerError(
                        f"{path}:{line}: {len(row)} values, expected {len(header)} (one per column)"
                    )
                values: list[float] = []
                for name, cell in zip(header, row, strict=True):
                    try:
                        values.append(float(cell))
                    except ValueError:
                        raise TrainerError(
                            f"{path}:{line}: column {name!r}: {cell!r} is not a number"
                        ) from None
                label = values.pop(label_at)
                if label not in (0.0, 1.0):
                    raise TrainerError(
                        f"{path}:{line}: label {label_column!r} must be 0 or 1, got {row[label_at]!r}"
                    )
                features.append(values)
                labels.append(label)
    except OSError as exc:
        raise _open_error(path, exc) from None
    if not labels:
        raise TrainerError(f"data file {path} has a header but no rows")
    return Table(feature_names, features, labels)


def write_table(path: Path, table: Table, label_column: str = "churn") -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([*table.feature_names, label_column])
        for values, label in zip(table.features, table.labels, strict=True):
            writer.writerow([*(repr(v) for v in values), int(label)])
