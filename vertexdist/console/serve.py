"""Serving the console with uvicorn: on loopback unless another host is asked for, and then only with a
token printed at start (a console shows job specs and logs: not for whoever else can reach the port).
"""

from __future__ import annotations

import ipaddress
import secrets
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vertexdist.errors import UsageError

LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Plan:
    """Where the console listens, the URL to open, the token (None on loopback), the Host names allowed."""

    host: str
    port: int
    url: str
    token: str | None
    allowed_hosts: tuple[str, ...] | None


def url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def plan_serving(host: str, port: int, *, token: str | None = None) -> Plan:
    """The serving plan for `host:port` (port 0: a free one is picked when the socket is bound)."""
    if not host.strip():
        raise UsageError("--host is empty", hint="leave it out to serve on 127.0.0.1")
    if not 0 <= port < 65536:
        raise UsageError(f"--port {port} is not a port number", hint="use 1-65535, or 0 for any free port")
    if is_loopback(host):
        # Only requests addressed to loopback by name: a page elsewhere cannot reach it by DNS rebinding.
        names = ("127.0.0.1", "localhost", "::1", "[::1]", host)
        return Plan(host, port, f"http://{url_host(host)}:{port}/", None, tuple(dict.fromkeys(names)))
    chosen = token or secrets.token_urlsafe(24)
    return Plan(host, port, f"http://{url_host(host)}:{port}/?token={chosen}", chosen, None)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on `host:port`; UsageError when the port is taken or the host is not ours."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise UsageError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}",
            hint="pick another --port (0: any free one), or a --host of this machine",
        ) from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def server_config(app: object) -> Any:
    """uvicorn's configuration for the console: each connection checked at accept and given a deadline for
    its request's head (`guarded_protocol`)."""
    import uvicorn

    from vertexdist.console.guarded_protocol import GuardedH11Protocol

    return uvicorn.Config(
        app,  # type: ignore[arg-type]
        http=GuardedH11Protocol,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=2,
        lifespan="off",
    )


def serve(app: object, sock: socket.socket, *, on_ready: Callable[[], None] | None = None) -> None:
    """Serve `app` on the bound socket until interrupted (Ctrl-C)."""
    import uvicorn

    server = uvicorn.Server(server_config(app))
    if on_ready is not None:
        on_ready()
    server.run(sockets=[sock])
