"""The TensorBoard scalars under a folder (a job's `AIP_TENSORBOARD_LOG_DIR`), read with tensorboard's own
`EventMultiplexer`: by tag, each as (step, value) sorted by step, the last write of a step winning."""

from __future__ import annotations

import math
from pathlib import Path


def read_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar tag under `folder` ({} when there is none); tags of runs in subfolders are prefixed with
    their folder."""
    if not folder.is_dir():
        return {}
    from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

    multiplexer = EventMultiplexer(size_guidance={"scalars": 0})
    multiplexer.AddRunsFromDirectory(str(folder))
    multiplexer.Reload()
    found: dict[str, list[tuple[int, float]]] = {}
    for run, tags in sorted(multiplexer.Runs().items()):
        for tag in sorted(tags.get("scalars", [])):
            events = multiplexer.Scalars(run, tag)
            by_step = {int(e.step): float(e.value) for e in events if math.isfinite(e.value)}
            if by_step:
                found[tag if run == "." else f"{run}/{tag}"] = sorted(by_step.items())
    return found
