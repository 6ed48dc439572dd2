"""torchrun's rendezvous store on the loopback address, when the rendezvous is on this machine.

torch's TCPStore server listens on every interface (`::`, whatever its host name says: the name is only
for clients), and it has no authentication. For a local job (MASTER_ADDR 127.0.0.1, as vertexdist's
local runs and the emulator give it) that would let any host that reaches this machine join or read the
rendezvous. torch takes no bind address, but a TCPStore server may be handed a socket already listening
(`master_listen_fd`), and torchrun's static rendezvous makes its store `multi_tenant`, which reuses a server
this process already runs on the same port. So node 0's launcher starts that server first, on a socket bound
to the loopback address, and torchrun's agent and every worker use it. A MASTER_ADDR that is not loopback (a
real Vertex job, whose nodes are other machines) is left to torch as it is.
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
from typing import Any

_held: list[Any] = []  # the store (and its server) live as long as this process


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def hold_loopback_store(master_addr: str, port: int, node_rank: int) -> str:
    """Start the rendezvous store on the loopback address where this node hosts it; what went wrong, if
    anything (then torch makes its own store, as without this)."""
    if node_rank != 0 or not _is_loopback(master_addr):
        return ""
    host = "127.0.0.1" if master_addr == "localhost" else master_addr
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(socket.SOMAXCONN)
        from torch.distributed import TCPStore

        store = TCPStore(
            host,
            port,
            None,
            True,
            datetime.timedelta(seconds=60),
            wait_for_workers=False,
            multi_tenant=True,
            master_listen_fd=sock.fileno(),
        )
    except (OSError, RuntimeError, TypeError) as exc:
        sock.close()
        return (
            f"the rendezvous store could not be held to {host}:{port} ({exc});"
            " torch listens on all interfaces"
        )
    _held.extend([sock, store])
    return ""
