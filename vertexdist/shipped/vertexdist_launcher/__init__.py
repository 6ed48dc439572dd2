"""The replica launcher vertexdist ships with every job: `python -m vertexdist_launcher MODE ... -- TARGET`.

It reads Vertex's `CLUSTER_SPEC` on the machine it runs on, counts that machine's GPUs and starts the
user's code the way MODE says (`torchrun`: torch.distributed.run, one process per GPU; `ray`: a Ray node
per replica, the user's driver on the head). Standard library only, except the modes' own parts (torchrun
imports torch, ray's GCS client imports ray, which the replica has anyway); it never imports vertexdist,
because on Vertex vertexdist is not installed.
"""

from __future__ import annotations

import sys

PREFIX = "vertexdist_launcher: "


def say(line: str, *, error: bool = False) -> None:
    """One line of the launcher's own in the replica's log, marked as the launcher's: on stdout (INFO in
    Cloud Logging) what it does, on stderr (ERROR) with `error` why a replica fails."""
    print(PREFIX + line, file=sys.stderr if error else sys.stdout, flush=True)
