"""Holds a reduction server's place in a local job's cluster: listens on its address (so the port stays
taken, as the real server's would be) and ends cleanly when the job stops it.

    python reduction_standin.py HOST PORT NAME

A script, not `python -c`, so that a warm pool forks it as it forks the job's other replicas (a cold start of
its own would reach its port after the forked trainers, or not before they end); standard library only: under
--docker its text runs inside the job's image (`local.plan.STANDIN_CODE`).
"""

from __future__ import annotations

import signal
import socket
import sys


def main(argv: list[str]) -> None:
    host, port, name = argv[1], int(argv[2]), argv[3]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen()
    print(f"{name}: reduction-server stand-in holding {host}:{port} until the job ends", flush=True)
    signal.pause()


if __name__ == "__main__":
    main(sys.argv)
