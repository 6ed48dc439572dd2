"""The `torchrun` mode: this process becomes the replica's torch.distributed.run agent.

torchrun (run in this process, so a replica is one agent as with `torchrun` by hand) starts one worker per
local rank, restarts them up to `--max-restarts` times, and on SIGTERM/SIGINT stops them, SIGKILL after its
shutdown timeout. When a local rank fails for good it ends; this then prints torchrun's failure summary and,
last, which replica and local rank failed and how, and exits 1. A rank the health watcher stops because the
job hung exits only once its peers have written their stacks (`health.Watcher.await_dumps`), so torchrun's
stopping the others never loses a dump; on Vertex the replica's ranks meet in a folder made here for it.
"""

from __future__ import annotations

import os
import shlex
import socket
import sys
import tempfile
from collections.abc import Mapping
from typing import Any

from . import say
from .cluster import LOOPBACK, Placement
from .failures import WorkerFailure, failure_lines
from .gpus import count_gpus
from .health import DIR_VARIABLE, DUMPS_VARIABLE, HUNG_EXIT, declared_hung
from .options import LaunchOptions
from .rendezvous_store import hold_loopback_store
from .timeouts import rendezvous_timeout_s
from .torchrun_args import nproc_per_node, torchrun_args
from .worker import PARENT_VARIABLE
from .worker_fork import ARRIVED_WARM, ForkServer, install

NO_ERROR_FILE = "<N/A>"  # torch's ProcessFailure.error_file when the rank wrote none


def free_port() -> int:
    """A free loopback port for a single node's rendezvous (nothing else on the machine joins it)."""
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def _failures(error: Any) -> tuple[list[WorkerFailure], WorkerFailure]:
    """torchrun's ChildFailedError as plain data: every failed rank, and the first to fail."""

    def plain(rank: int, failure: Any) -> WorkerFailure:
        message = ""
        if failure.error_file != NO_ERROR_FILE:  # else torch's message is a placeholder
            message = failure.message
            message = str(message.get("message", "") if isinstance(message, dict) else message)
        return WorkerFailure(rank, failure.local_rank, failure.pid, failure.exitcode, message)

    failures = [plain(rank, failure) for rank, failure in sorted(error.failures.items())]
    first_rank, first = error.get_first_failure()
    return failures, plain(first_rank, first)


def run(options: LaunchOptions, place: Placement, env: Mapping[str, str]) -> int:
    nproc = nproc_per_node(options, env, lambda: count_gpus(env))
    port = place.master_port if place.master_port is not None else free_port()
    args = torchrun_args(
        place, options, nproc=nproc, master_port=port, rdzv_timeout_s=rendezvous_timeout_s(env)
    )
    say(
        f"{place.replica} is node {place.node_rank} of {place.nnodes}, {nproc} process(es): "
        f"torchrun {shlex.join(args)}"
    )
    os.environ[PARENT_VARIABLE] = str(os.getpid())
    if not env.get(DIR_VARIABLE) and nproc > 1:  # Vertex: a hung rank waits for its local peers' dumps there
        os.environ.setdefault(DUMPS_VARIABLE, tempfile.mkdtemp(prefix="vertexdist-dumps-"))
    if ARRIVED_WARM:  # a warm pool's fork: its workers are forked too, before torchrun starts a thread
        install(ForkServer())
    problem = hold_loopback_store(place.master_addr, port, place.node_rank or 0)  # starts the store's thread
    if problem:
        say(problem, error=True)
    from torch.distributed.elastic.multiprocessing import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun_main

    try:
        torchrun_main(args)
    except ChildFailedError as exc:
        print(exc.format_msg(), file=sys.stderr, flush=True)
        failures, first = _failures(exc)
        for line in failure_lines(place.replica, failures, first):
            say(line, error=True)
        # A rank the health watcher stopped because the job hung: the replica exits with that code too.
        hung = any(f.exitcode == HUNG_EXIT for f in failures) or declared_hung(env)
        return HUNG_EXIT if hung else 1
    except SignalException as exc:  # torchrun has stopped its workers
        say(f"{place.replica} stopped by {exc.sigval.name}; torchrun stopped its workers")
        return 128 + int(exc.sigval)
    except Exception as exc:  # rendezvous and agent errors: no local rank to name
        say(
            f"{place.replica} failed: torchrun ended before its workers did: {type(exc).__name__}: {exc}",
            error=True,
        )
        return 1
    return 0
