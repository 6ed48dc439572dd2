"""Free ports per replica that no other local job on the machine picks while this one runs."""

from __future__ import annotations

import socket
import subprocess
import sys

from vertexdist.local import ports
from vertexdist.local.ports import is_bindable, reserve_ports


def test_ports_are_distinct_bindable_and_claimed_until_released() -> None:
    held = reserve_ports(6)
    try:
        assert len(set(held.ports)) == 6
        assert all(is_bindable(port) for port in held.ports)
        assert not any(ports._try_claim(port) for port in held.ports)
    finally:
        held.release()
    assert all(ports._try_claim(port) for port in held.ports)
    ports.PortReservation(list(held.ports)).release()


def test_a_claim_of_a_live_process_is_respected_and_a_dead_ones_is_taken_over() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    path = ports._claims_dir() / str(port)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        path.write_text(str(sleeper.pid))
        assert not ports._try_claim(port)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert ports._try_claim(port)  # its owner is gone
    ports.PortReservation([port]).release()
    assert not path.exists()


def test_a_port_in_use_is_not_bindable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        assert not is_bindable(sock.getsockname()[1])


def test_claims_of_dead_owners_are_swept() -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    path = ports._claims_dir() / "1"  # port 1 is never handed out by the kernel
    path.write_text(str(dead.pid))
    reserve_ports(1).release()
    assert not path.exists()
