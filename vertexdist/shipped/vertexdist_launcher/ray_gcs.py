"""The launcher's lines to the head: its GCS (Ray's cluster store: how many nodes are up, the driver's
outcome), and a socket the head's launcher holds open until it exits.

The only module that touches Ray's Python API, and only `ray._raylet.GcsClient`, the client Ray's own
`ray status` and `ray symmetric-run` use (Ray's pinned in the `ray` extra and the examples). A GcsClient
made for an address where nothing listens waits half a minute, so `wait_for_port` comes first.
"""

from __future__ import annotations

import importlib
import socket
import time
from collections.abc import Callable
from typing import Any

from .ray_outcome import ACK_PREFIX, NAMESPACE, OUTCOME_KEY, Outcome

RPC_TIMEOUT_S = 2.0


def port_answers(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_for_port(host: str, port: int, *, deadline: float, keep_waiting: Callable[[], bool]) -> bool:
    """Whether `host:port` answers before `deadline` (time.monotonic), while `keep_waiting()` holds."""
    while time.monotonic() < deadline and keep_waiting():
        if port_answers(host, port):
            return True
        time.sleep(0.2)
    return False


def hold_watch_socket(host: str) -> socket.socket:
    """A listening socket on `host` ("" for every address) that stays open as long as this process:
    a worker connected to it sees the connection end when the head's launcher has exited."""
    return socket.create_server((host, 0), backlog=64)


def wait_for_close(host: str, port: int, timeout: float) -> None:
    """Until the process holding `host:port` (hold_watch_socket) has exited, or `timeout` passed."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as conn:
            conn.settimeout(timeout)
            conn.recv(1)  # nobody sends: this returns (or raises) when the holder's socket closes
    except OSError:
        pass


class HeadGcs:
    """The head's GCS at `address` (host:port), which must answer already."""

    def __init__(self, address: str) -> None:
        # Compiled, and absent from Ray's stubs: reached by name.
        raylet: Any = importlib.import_module("ray._raylet")
        self.address = address
        self._client: Any = raylet.GcsClient(address=address)

    def alive_nodes(self) -> int:
        from ray.core.generated.gcs_pb2 import GcsNodeInfo

        infos = self._client.get_all_node_info(
            timeout=RPC_TIMEOUT_S, state_filter=GcsNodeInfo.GcsNodeState.ALIVE
        )
        return len(infos)

    def put_outcome(self, outcome: Outcome) -> None:
        self._client.internal_kv_put(OUTCOME_KEY, outcome.encode(), True, NAMESPACE, timeout=RPC_TIMEOUT_S)

    def acknowledge(self, node_rank: int) -> None:
        """Tell the head this worker node has read the outcome."""
        key = ACK_PREFIX + str(node_rank).encode()
        self._client.internal_kv_put(key, b"1", True, NAMESPACE, timeout=RPC_TIMEOUT_S)

    def acknowledged(self) -> int:
        """How many worker nodes have read the outcome."""
        keys = self._client.internal_kv_keys(ACK_PREFIX, NAMESPACE, timeout=RPC_TIMEOUT_S)
        return len(keys)

    def outcome(self) -> Outcome | None:
        """The driver's outcome once the head wrote it; raises when the GCS does not answer."""
        raw = self._client.internal_kv_get(OUTCOME_KEY, NAMESPACE, timeout=RPC_TIMEOUT_S)
        return None if raw is None else Outcome.decode(raw)
