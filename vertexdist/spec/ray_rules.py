"""Checks for `trainer.launcher: ray`: torchrun's options do not apply, and every replica needs Ray."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from vertexdist.shipped.vertexdist_launcher.ray_args import RAY_TESTED
from vertexdist.spec.findings import Finding

if TYPE_CHECKING:
    from vertexdist.spec.models import JobTemplate

# `ray`, `ray[train,tune]==2.60.0`, `ray>=2.40`, ... but not `rayon` or `ray-lightning`.
_RAY = re.compile(r"^\s*ray\s*(\[|[=<>!~;@ ]|$)", re.IGNORECASE)


def ray_takes_no_torchrun_options(t: JobTemplate) -> Iterator[Finding]:
    trainer = t.trainer
    if trainer.launcher != "ray":
        return
    if trainer.nproc_per_node is not None:
        yield Finding(
            "trainer.nproc_per_node",
            "nproc_per_node sets torchrun's processes per node; with `launcher: ray` the driver decides"
            " how many Ray workers run (ScalingConfig(num_workers=...)), over the GPUs every node advertises",
            "drop nproc_per_node",
        )
    if trainer.max_restarts:
        yield Finding(
            "trainer.max_restarts",
            "max_restarts sets torchrun's --max-restarts, and `launcher: ray` runs no torchrun",
            "let Ray retry failed workers (FailureConfig(max_failures=N) in the script), or set"
            " restart_job_on_worker_restart to restart the whole job",
        )


def ray_is_installed_on_the_replicas(t: JobTemplate) -> Iterator[Finding]:
    if t.trainer.launcher != "ray" or any(_RAY.match(req) for req in t.trainer.requirements):
        return
    yield Finding(
        "trainer.requirements",
        "`launcher: ray` needs Ray on every replica, and Vertex's prebuilt training images have none",
        f"add {RAY_TESTED!r} to trainer.requirements (installed with the package, or into the image by"
        " `vertexdist build`); if your own image installs Ray already, ignore this",
        "warning",
    )


RULES = (ray_takes_no_torchrun_options, ray_is_installed_on_the_replicas)
