"""A cheap replica for tests: records what it saw, optionally spawns workers, sleeps, and fails on request.

Usage: standin_replica.py --record DIR [--sleep S] [--fail NAME[:CODE]] [--once MARKER] [--spawn N]
    [--ignore-sigterm] [--bind] [--hang NAME]
It writes DIR/<replica>.json with its environment and pids (its own and its workers') before sleeping.
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
    parser.add_argument("--ignore-sigterm", action="store_true")
    parser.add_argument("--bind", action="store_true", help="listen on this replica's own cluster address")
    parser.add_argument("--hang", default="", help="this replica never finishes on its own")
    parser.add_argument("--once", default="", help="fail only while this marker file does not exist")
    args = parser.parse_args()

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
    workers = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]) for _ in range(args.spawn)
    ]
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


if __name__ == "__main__":
    sys.exit(main())
