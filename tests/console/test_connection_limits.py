"""The console's connections, limited as the emulator's are (issue 41, part 7): a request head sent a byte
at a time is cut at its deadline, and a connection beyond the cap is closed as it is accepted (another
user's connection: tests/console/test_owner_only.py)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")

from vertexdist.console.app import build_app
from vertexdist.console.guarded_protocol import GuardedH11Protocol
from vertexdist.console.jobs import Console

pytestmark = [pytest.mark.integration]

GET = b"GET /api/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closed the connection without answering (EOF or reset; the timeout is a bound)."""
    try:
        return sock.recv(100) == b""
    except ConnectionResetError:
        return True


def _answered(sock: socket.socket) -> bytes:
    sock.sendall(GET)
    return sock.recv(100)


def _app(tmp_path: Path) -> Any:
    (tmp_path / "runs").mkdir(exist_ok=True)
    return build_app(Console(tmp_path / "runs", cache_dir=tmp_path / "cache"), allowed_hosts=["127.0.0.1"])


def test_a_head_sent_a_byte_at_a_time_is_cut_at_its_deadline(
    tmp_path: Path, kit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(GuardedH11Protocol, "head_deadline_s", 1.0)
    with kit.serving(_app(tmp_path)) as base:
        port = int(base.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as slow:
            slow.sendall(b"GET /api/jobs HTTP/1.1\r\n")  # and the headers never come
            assert _closed_by_server(slow)
        with socket.create_connection(("127.0.0.1", port), timeout=30) as quick:
            assert _answered(quick).startswith(b"HTTP/1.1 200")


def test_connections_beyond_the_cap_are_closed_at_accept(
    tmp_path: Path, kit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(GuardedH11Protocol, "max_connections", 2)
    monkeypatch.setattr(GuardedH11Protocol, "closed_at_accept", 0)
    with kit.serving(_app(tmp_path)) as base:
        port = int(base.rsplit(":", 1)[1])
        held = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(2)]
        try:
            for sock in held:  # answered: both are open connections of the server now (kept alive)
                assert _answered(sock).startswith(b"HTTP/1.1 200")
            with socket.create_connection(("127.0.0.1", port), timeout=30) as extra:
                assert _closed_by_server(extra)
            assert GuardedH11Protocol.closed_at_accept == 1
        finally:
            for sock in held:
                sock.close()
