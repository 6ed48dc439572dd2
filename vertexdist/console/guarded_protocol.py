"""The console's HTTP connections, limited as the emulator's are (`loopback_server`; issue 41, part 7):

- a connection from a loopback socket another user owns is closed as it is accepted, before a byte of it is
  read (`peer_uid`, `request_guard.check_owner`; `app.OwnerOnly` still answers 403 to a request that got
  by, e.g. where the owner could not be told at accept);
- a connection beyond `MAX_CONNECTIONS` open at once is closed as it is accepted;
- a request's line and headers must all come within `HEAD_DEADLINE_S` of the connection's start (or, on a
  kept-alive connection, of the request's first byte): a byte now and then no longer holds a connection.

uvicorn's own h11 protocol does the HTTP; this subclass adds only the three checks (`serve.serve` passes it
as uvicorn's `http` class). A connection beyond loopback is the token's to judge (`serve.plan_serving`).
"""

from __future__ import annotations

import asyncio
import ipaddress
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from vertexdist import peer_uid, request_guard
from vertexdist.loopback_server import HEAD_DEADLINE_S, MAX_CONNECTIONS


def _loopback(address: str) -> bool:
    """A peer's address (an IP, never a name) on loopback: 127.0.0.0/8, ::1, ::ffff:127.x."""
    try:
        found = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return False
    mapped = getattr(found, "ipv4_mapped", None)
    return bool(found.is_loopback or (mapped is not None and mapped.is_loopback))


def refused_at_accept(peer: tuple[str, int] | None, local: tuple[str, int | None] | None, owner: int) -> bool:
    """Whether a new connection from `peer` to `local` is another user's (loopback only)."""
    if peer is None or local is None or local[1] is None or not _loopback(str(peer[0])):
        return False
    can_tell = peer_uid.can_tell()
    uid = peer_uid.lookup((str(peer[0]), int(peer[1])), (str(local[0]), int(local[1]))) if can_tell else None
    return request_guard.check_owner(uid, owner, can_tell=can_tell) is not None


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the console's accept checks and head deadline."""

    owner_uid = peer_uid.my_uid()
    max_connections = MAX_CONNECTIONS
    head_deadline_s = HEAD_DEADLINE_S
    closed_at_accept = 0  # how many connections were closed as they were accepted (all servers: a count)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_of: object = None  # the cycle before the request whose head is awaited

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        crowded = len(self.connections) > self.max_connections  # this one is counted already
        if crowded or refused_at_accept(self.client, self.server, self.owner_uid):
            type(self).closed_at_accept += 1
            transport.abort()  # nothing read, nothing answered: the peer sees the connection closed
            return
        self._arm_head()

    def data_received(self, data: bytes) -> None:
        if self._head_timer is None and (self.cycle is None or self.cycle.response_complete):
            self._arm_head()  # a kept-alive connection's next request: its head from its first byte
        super().data_received(data)
        if self._head_timer is not None and self.cycle is not self._head_of:
            self._disarm_head()  # the head is in (a new cycle): the body goes at the app's pace

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head()
        super().connection_lost(exc)

    def _arm_head(self) -> None:
        self._disarm_head()
        self._head_of = self.cycle
        self._head_timer = self.loop.call_later(self.head_deadline_s, self._head_late)

    def _disarm_head(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if self.cycle is self._head_of and not self.transport.is_closing():
            self.transport.close()  # the request's line and headers took too long
