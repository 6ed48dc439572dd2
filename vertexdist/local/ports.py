"""Free loopback ports for the replicas of a local job, one per replica (docs/reference/vertex.md §1.1).

The kernel picks each port (bind to :0), so it is free now; a claim file per port, owned by this process,
keeps a second local-run of the same user from picking it until this job ends. The claims live in the
user's own folder of the temp folder (`vertexdist.user_temp`): a folder another user made there (root's
first run, say) is never written, and nothing another user left there is read.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path

from vertexdist.loopback_server import LOOPBACK
from vertexdist.user_temp import user_temp_dir


def _claims_dir() -> Path:
    return user_temp_dir("ports")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _try_claim(port: int) -> bool:
    """Create the claim file for `port`; take over a claim whose owner is gone."""
    path = _claims_dir() / str(port)
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                owner = int(path.read_text().strip() or "0")
            except (OSError, ValueError):
                owner = 0
            if owner and _pid_alive(owner):
                return False
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            continue
        with os.fdopen(fd, "w") as handle:
            handle.write(str(os.getpid()))
        return True
    return False


def _sweep_stale_claims() -> None:
    """Remove claims whose owner died without releasing them (killed with SIGKILL, say)."""
    for path in _claims_dir().iterdir():
        try:
            owner = int(path.read_text().strip() or "0")
        except (OSError, ValueError):
            continue
        if owner and not _pid_alive(owner):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def is_bindable(port: int, host: str = LOOPBACK) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


class PortReservation:
    """Ports held for one job; `release()` (or leaving the `with` block) frees them for other jobs."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports

    def release(self) -> None:
        for port in self.ports:
            path = _claims_dir() / str(port)
            with contextlib.suppress(OSError, ValueError):
                if int(path.read_text().strip()) == os.getpid():
                    path.unlink()
        self.ports = []

    def __enter__(self) -> PortReservation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def reserve_ports(count: int, host: str = LOOPBACK) -> PortReservation:
    """`count` distinct ports that are bindable on `host` now and claimed by no other local job."""
    _sweep_stale_claims()
    ports: list[int] = []
    with contextlib.ExitStack() as stack:
        attempts = 0
        while len(ports) < count:
            attempts += 1
            if attempts > count * 50:
                raise OSError(f"could not find {count} free ports on {host}")
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))  # holding every socket open until the end keeps the ports distinct
            port = int(sock.getsockname()[1])
            if _try_claim(port):
                ports.append(port)
    return PortReservation(ports)


@contextlib.contextmanager
def reserved_ports(count: int, host: str = LOOPBACK) -> Iterator[list[int]]:
    reservation = reserve_ports(count, host)
    try:
        yield reservation.ports
    finally:
        reservation.release()
