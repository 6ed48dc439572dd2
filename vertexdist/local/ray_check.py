"""A `launcher: ray` job run here needs Ray in the replicas' Python: checked before anything starts.

The replicas run the job's interpreter (`python`, the one running vertexdist unless told otherwise), where
the launcher would only find out after the package was installed and the processes started; on Vertex the
launcher itself says it in the replica's log.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

from vertexdist.errors import VertexdistError
from vertexdist.local.environment import launcher_options
from vertexdist.shipped.vertexdist_launcher.ray_args import RAY_TESTED
from vertexdist.wire.job_spec import JobSpec

_FIND_RAY = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('ray') else 3)"


class RayNotInstalled(VertexdistError):
    """A `launcher: ray` job, and no Ray where its replicas run."""


def ray_pools(job: JobSpec) -> list[str]:
    """The pools that run the shipped launcher's ray mode."""
    return [
        pool.name for pool in job.pools if (opts := launcher_options(pool)) is not None and opts.mode == "ray"
    ]


def has_ray(python: str) -> bool:
    if python == sys.executable:
        return importlib.util.find_spec("ray") is not None
    try:
        found = subprocess.run([python, "-c", _FIND_RAY], capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return found.returncode == 0


def require_ray(job: JobSpec, python: str) -> None:
    """Raise RayNotInstalled when `job` runs the ray launcher and `python` cannot import ray."""
    pools = ray_pools(job)
    if pools and not has_ray(python):
        raise RayNotInstalled(
            f"{', '.join(pools)} run `launcher: ray`, and Ray is not installed for {python}",
            hint=f"pip install 'vertexdist[ray]' (that is {RAY_TESTED}) into the Python that runs vertexdist",
        )
