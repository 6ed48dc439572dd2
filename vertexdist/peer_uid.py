"""Which local user owns the other end of a loopback TCP connection (Linux).

TCP has no SO_PEERCRED, but the kernel knows every socket's owner, and both ends of a loopback connection
are sockets of this host. The client's socket is the one whose local address is our peer address and whose
remote address is ours. Two ways to find it, the first that works:

1. sock_diag netlink (`NETLINK_SOCK_DIAG`, what `ss` uses): one exact lookup by the four addresses, a
   hash lookup in the kernel (about 10 µs), open to every user.
2. `/proc/net/tcp` and `/proc/net/tcp6` (a text table of every TCP socket; reading it costs milliseconds
   on a large host, as the kernel walks its whole table).

A socket that is closed already (TIME_WAIT, or orphaned) shows uid 0 and inode 0 in both: its owner can no
longer be told, and `lookup` answers None for it, never root. Elsewhere (no /proc/net/tcp: macOS, Windows)
`can_tell()` is False and the owner check is skipped: see docs/security.md.
"""

from __future__ import annotations

import functools
import os
import socket
import struct
import sys
from pathlib import Path

PROC_TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NLMSG_ERROR = 2
_NO_COOKIE = 0xFFFFFFFF
_ALL_STATES = 0xFFFFFFFF
_MSG_HEADER = struct.Struct("=IHHII")
_REQUEST = struct.Struct("=BBBBI")
_UID_INODE = struct.Struct("=II")
_UID_AT = 4 + 48 + 12  # inet_diag_msg: family/state/timer/retrans, inet_diag_sockid, expires/rqueue/wqueue

Address = tuple[str, int]


def _family(host: str) -> int:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _v4(host: str) -> str:
    """`127.0.0.1` of `::ffff:127.0.0.1`; other addresses unchanged."""
    return host[7:] if host.lower().startswith("::ffff:") and "." in host else host


def my_uid() -> int:
    """This process's effective uid (-1 where there are no uids: Windows)."""
    return os.geteuid() if hasattr(os, "geteuid") else -1


@functools.cache
def can_tell() -> bool:
    """Whether this system shows sockets' owners at all (Linux's socket tables)."""
    return PROC_TABLES[0].exists()


def lookup(peer: Address, local: Address) -> int | None:
    """The uid that owns the client socket `peer` connected to our `local`; None when no live socket of
    those addresses is found (or nothing here can tell)."""
    if not can_tell():
        return None
    peer, local = (_v4(peer[0]), peer[1]), (_v4(local[0]), local[1])
    try:
        found = _netlink(peer, local)
    except OSError:
        found = _proc(peer, local)
    if found is None:
        return None
    uid, inode = found
    return uid if inode else None


def _netlink(peer: Address, local: Address) -> tuple[int, int] | None:
    """(uid, inode) of the socket whose local side is `peer` and remote side `local`; OSError when this
    kernel offers no sock_diag."""
    family = _family(peer[0])
    if _family(local[0]) != family:
        return None
    sockid = (
        struct.pack("!HH", peer[1], local[1])
        + socket.inet_pton(family, peer[0]).ljust(16, b"\0")
        + socket.inet_pton(family, local[0]).ljust(16, b"\0")
        + struct.pack("=III", 0, _NO_COOKIE, _NO_COOKIE)
    )
    body = _REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, _ALL_STATES) + sockid
    header = _MSG_HEADER.pack(_MSG_HEADER.size + len(body), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0)
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as diag:
        diag.settimeout(1.0)
        diag.send(header + body)
        answer = diag.recv(8192)
    if len(answer) < _MSG_HEADER.size:
        raise OSError("sock_diag: a short answer")
    kind = _MSG_HEADER.unpack_from(answer)[1]
    if kind == _NLMSG_ERROR:
        (error,) = struct.unpack_from("=i", answer, _MSG_HEADER.size)
        if -error in (2, 22):  # ENOENT: no such socket; EINVAL: not one this family holds
            return None
        raise OSError(-error, "sock_diag refused the lookup")
    if kind != _SOCK_DIAG_BY_FAMILY or len(answer) < _MSG_HEADER.size + _UID_AT + _UID_INODE.size:
        raise OSError("sock_diag: an answer of another kind")
    uid, inode = _UID_INODE.unpack_from(answer, _MSG_HEADER.size + _UID_AT)
    return int(uid), int(inode)


def proc_address(host: str, port: int) -> str:
    """An address as /proc/net/tcp(6) prints it: each 32-bit word of the address in host byte order, in
    hex, then the port (`127.0.0.1:8080` -> `0100007F:1F90` on x86)."""
    raw = socket.inet_pton(_family(host), host)
    words = "".join(f"{int.from_bytes(raw[i : i + 4], sys.byteorder):08X}" for i in range(0, len(raw), 4))
    return f"{words}:{port:04X}"


def proc_row(table: str, peer: Address, local: Address) -> tuple[int, int] | None:
    """(uid, inode) of the row of `table` (the text of /proc/net/tcp or tcp6) whose local address is
    `peer` and remote address is `local` (pure)."""
    needle = f" {proc_address(*peer)} {proc_address(*local)} "
    at = table.find(needle)
    if at < 0:
        return None
    end = table.find("\n", at)
    fields = table[at : end if end >= 0 else len(table)].split()
    # local, remote, st, tx:rx, tr:when, retrnsmt, uid, timeout, inode
    return int(fields[6]), int(fields[8])


def _proc(peer: Address, local: Address) -> tuple[int, int] | None:
    tables: list[tuple[Path, Address, Address]] = []
    if _family(peer[0]) == socket.AF_INET:
        tables.append((PROC_TABLES[0], peer, local))
        mapped = ((f"::ffff:{peer[0]}", peer[1]), (f"::ffff:{local[0]}", local[1]))
        tables.append((PROC_TABLES[1], *mapped))  # an AF_INET6 client socket on a v4-mapped address
    else:
        tables.append((PROC_TABLES[1], peer, local))
    for path, theirs, ours in tables:
        try:
            text = path.read_text()
        except OSError:
            continue
        found = proc_row(text, theirs, ours)
        if found is not None:
            return found
    return None
