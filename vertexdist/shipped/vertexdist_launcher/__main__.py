"""`python -m vertexdist_launcher MODE [OPTIONS] -- (-m MODULE | SCRIPT) [ARGS]` on every replica.

Replicas that are not training nodes (reduction or parameter servers in pool 2, evaluators in pool 3) never
start a mode's processes: they run the user's code once, as `python -m MODULE` (Vertex's own launcher)
would, so an evaluator can still tell from CLUSTER_SPEC what it is. Exit 2: the launcher's command line
is wrong; 1: CLUSTER_SPEC is wrong, or the job failed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence

from . import ray_mode, say, torchrun
from .cluster import ClusterSpecError, Placement, placement
from .options import USAGE, LauncherUsageError, LaunchOptions, parse_launch_args

Runner = Callable[[LaunchOptions, Placement, Mapping[str, str]], int]
# One entry per mode (options.MODES names them): a mode is a runner for training nodes.
RUNNERS: dict[str, Runner] = {"torchrun": torchrun.run, "ray": ray_mode.run}


def run_once(options: LaunchOptions, place: Placement) -> int:
    """A replica that is not a training node: the user's code, once, as this process (exec)."""
    say(
        f"{place.replica} is a {place.role}, not a training node: running "
        f"`python {' '.join(options.target.argv())}` once, without {options.mode}"
    )
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, *options.target.argv()])
    return 1  # not reached: execv replaces this process


def main(argv: Sequence[str] | None = None) -> int:
    try:
        options = parse_launch_args(sys.argv[1:] if argv is None else argv, tuple(RUNNERS))
    except LauncherUsageError as exc:
        print(f"vertexdist_launcher: {exc}\n{USAGE}", file=sys.stderr)
        return 2
    try:
        place = placement(os.environ)
    except ClusterSpecError as exc:
        say(str(exc), error=True)
        return 1
    if not place.is_training:
        return run_once(options, place)
    return RUNNERS[options.mode](options, place, os.environ)


if __name__ == "__main__":
    sys.exit(main())
