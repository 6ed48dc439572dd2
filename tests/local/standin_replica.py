"""A cheap replica for tests: records what it saw, optionally spawns workers, sleeps, and fails on request.

Usage: standin_replica.py --record DIR [--sleep S] [--fail NAME[:CODE]] [--once MARKER] [--spawn N]
    [--spawn-session N] [--ignore-sigterm] [--bind] [--hang NAME]
It writes DIR/<replica>.json with its environment and pids (its own and its workers') before sleeping.
`--spawn-session` workers start sessions of their own, as ray's daemons do: no group signal reaches them.
`--link` plays a 2-replica job as gloo does: the chief listens on its address, the other replica's one
worker holds a connection to it. Kill that worker and the chief fails at once ("Connection closed by
peer"), while its replica exits only `--teardown` seconds later (as a launcher tearing down torch does).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--record", required=True)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--fail", default="")
    parser.add_argument("--spawn", type=int, default=0)
    parser.add_argument("--spawn-session", type=int, default=0)
    parser.add_argument("--ignore-sigterm", action="store_true")
    parser.add_argument("--bind", action="store_true", help="listen on this replica's own cluster address")
    parser.add_argument("--hang", default="", help="this replica never finishes on its own")
    parser.add_argument("--once", default="", help="fail only while this marker file does not exist")
    parser.add_argument("--link", action="store_true")
    parser.add_argument("--teardown", type=float, default=0.0)
    args = parser.parse_args()
    if args.link:
        return linked(args.record, args.teardown)

    spec = json.loads(os.environ["CLUSTER_SPEC"])
    name = f"{spec['task']['type']}-{spec['task']['index']}"
    listener = None
    if args.bind:  # as a real server on the replica would: a port clash shows up as EADDRINUSE here
        import socket

        host, port = spec["cluster"][spec["task"]["type"]][spec["task"]["index"]].rsplit(":", 1)
        listener = socket.socket()
        listener.bind((host, int(port)))
        listener.listen()
    if args.ignore_sigterm:
        import signal

        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
    workers = [subprocess.Popen(sleeper) for _ in range(args.spawn)]
    workers += [subprocess.Popen(sleeper, start_new_session=True) for _ in range(args.spawn_session)]
    record = {
        "name": name,
        "pid": os.getpid(),
        "pgid": os.getpgid(0),
        "worker_pids": [w.pid for w in workers],
        "cwd": os.getcwd(),
        "env": {k: v for k, v in os.environ.items()},
    }
    out = Path(args.record) / f"{name}.json"
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, out)
    print(f"{name} started with {len(workers)} workers", flush=True)
    fail_name, _, fail_code = args.fail.partition(":")
    if fail_name == name and not (args.once and Path(args.once).exists()):
        if args.once:
            Path(args.once).write_text("failed once")
        time.sleep(0.2)
        print(f"{name} failing on purpose", flush=True)
        return int(fail_code or 3)
    time.sleep(600 if args.hang == name else args.sleep)
    print(f"{name} done", flush=True)
    if listener is not None:
        listener.close()
    return 0


LINK_WORKER = """\
import socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
for _ in range(200):
    try:
        sock = socket.create_connection((host, port))
        break
    except OSError:
        time.sleep(0.05)
print("worker: connected to the chief", flush=True)
sock.recv(1)  # blocks until killed
"""


def linked(record_dir: str, teardown: float) -> int:
    import socket

    spec = json.loads(os.environ["CLUSTER_SPEC"])
    name = f"{spec['task']['type']}-{spec['task']['index']}"
    chief = spec["cluster"]["workerpool0"][0]
    host, port = chief.rsplit(":", 1)
    record: dict[str, object] = {"name": name, "pid": os.getpid(), "pgid": os.getpgid(0), "worker_pids": []}
    if name == "workerpool0-0":
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, int(port)))
        listener.listen()
        _write(record_dir, name, record)
        peer, _ = listener.accept()
        print("chief: worker connected", flush=True)
        peer.recv(1)
        print("chief: RuntimeError: [gloo/transport/tcp/pair.cc:534] Connection closed by peer", flush=True)
        return 1
    worker = subprocess.Popen([sys.executable, "-c", LINK_WORKER, host, port])
    record["worker_pids"] = [worker.pid]
    _write(record_dir, name, record)
    code = worker.wait()
    time.sleep(teardown)
    print(f"{name}: error: its worker was killed (exit {code})", flush=True)
    return 1


def _write(record_dir: str, name: str, record: dict[str, object]) -> None:
    out = Path(record_dir) / f"{name}.json"
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, out)


if __name__ == "__main__":
    sys.exit(main())
