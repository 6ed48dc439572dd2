"""How long a rank waits for the others to join, from the template's `health.rendezvous_timeout`; stdlib.

Render passes the `health:` section as `VERTEXDIST_HEALTH` (JSON); the launcher hands its `rendezvous_timeout`
to torchrun (`--rdzv-conf timeout=N`, the static rendezvous's join timeout) and to Ray workers waiting for the
head; the bundled trainer reads it for its `init_process_group`. Vertex starts each replica as soon as its VM
is ready (image pull, package install), so ranks can join minutes apart: the default is 10 minutes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

HEALTH_VARIABLE = "VERTEXDIST_HEALTH"  # as vertexdist_launcher.health.CONFIG_VARIABLE
DEFAULT_RENDEZVOUS_TIMEOUT_S = 600  # held equal to vertexdist.spec.health's by a test


def rendezvous_timeout_s(env: Mapping[str, str]) -> int:
    """The template's rendezvous timeout in whole seconds; the default where it is absent or unreadable."""
    try:
        value = json.loads(env.get(HEALTH_VARIABLE) or "{}").get("rendezvous_timeout")
        seconds = int(value)
    except (ValueError, TypeError, AttributeError):
        return DEFAULT_RENDEZVOUS_TIMEOUT_S
    return seconds if seconds > 0 else DEFAULT_RENDEZVOUS_TIMEOUT_S
