"""The replica process: start one worker per GPU or CPU slot, supervise them, fail fast, stop cleanly.

Workers get torchrun's variables (global RANK = node_rank * nproc + local_rank, WORLD_SIZE = nodes * nproc).
Any worker that fails takes its siblings down at once and the replica exits non-zero naming the rank and the
reason. SIGTERM/SIGINT is passed on; workers agree to stop, checkpoint and exit, and anything still alive
after a grace period is killed. Workers stay in this process's group and die with it (PR_SET_PDEATHSIG), so
neither `kill -- -PGID` nor a SIGKILL of this process leaves orphans.

Start methods (TRAINER_PKG_START_METHOD): "fork", the default on Linux, imports torch and the modules Adam
and FSDP load lazily (torch._dynamo, ~1 s) once per node and forks the workers from that, before any torch
operation has run; "exec" starts each worker as a fresh interpreter that imports everything itself. This
module imports no torch either way, so a replica that has nothing to train exits in milliseconds.
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import ipaddress
import os
import signal
import socket
import sys
import tempfile
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Literal

from trainer_pkg.cluster import ClusterInfo
from trainer_pkg.config import TrainConfig
from trainer_pkg.errors import TrainerError, is_lost_peer

StartMethod = Literal["exec", "fork"]
START_METHOD_VARIABLE = "TRAINER_PKG_START_METHOD"
EXIT_STOPPED = 143  # must match trainer_pkg.worker.EXIT_STOPPED (not imported: that module imports torch)
TERM_GRACE_S = 25.0
POLL_S = 0.01
PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent)


def cpu_slots() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def worker_env(
    base: Mapping[str, str],
    config: TrainConfig,
    cluster: ClusterInfo,
    *,
    local_rank: int,
    master_port: int,
    device: str,
    error_file: Path,
    parent_pid: int,
    listen_fd: int | None,
    cores: int,
) -> dict[str, str]:
    """The environment of one worker: torchrun's variables plus the trainer's own (pure)."""
    nproc = cluster.nproc_per_node
    world_size = cluster.world_size
    assert world_size is not None, "only training nodes start workers"
    threads = str(max(1, cores // nproc))
    env = dict(base)
    env.update(
        RANK=str(cluster.global_rank(local_rank)),
        LOCAL_RANK=str(local_rank),
        WORLD_SIZE=str(world_size),
        LOCAL_WORLD_SIZE=str(nproc),
        GROUP_RANK=str(cluster.placement.node_rank),
        MASTER_ADDR=cluster.placement.master_addr,
        MASTER_PORT=str(master_port),
        TRAINER_PKG_CONFIG=config.to_json(),
        TRAINER_PKG_DEVICE=device,
        TRAINER_PKG_THREADS=base.get("OMP_NUM_THREADS") or threads,
        TRAINER_PKG_OWN_STORE="1",
        TRAINER_PKG_ERROR_FILE=str(error_file),
        TRAINER_PKG_PARENT_PID=str(parent_pid),
        PYTHONPATH=os.pathsep.join(p for p in (PACKAGE_PARENT, base.get("PYTHONPATH")) if p),
    )
    # Without this each worker's OpenMP pool would take every core and they would fight over them.
    env.setdefault("OMP_NUM_THREADS", threads)
    if listen_fd is not None:
        env["TRAINER_PKG_LISTEN_FD"] = str(listen_fd)
    return env


@dataclass
class Running:
    local_rank: int
    rank: int
    pid: int
    error_file: Path
    status: int | None = None  # exit code, or -signal


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class ReplicaLauncher:
    def __init__(
        self, config: TrainConfig, cluster: ClusterInfo, *, device: str, start_method: StartMethod
    ) -> None:
        self.config = config
        self.cluster = cluster
        self.device = device
        self.start_method = start_method
        self.workers: list[Running] = []
        self.term_at: float | None = None

    # --- signals ----------------------------------------------------------------------------------
    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.term_at is None:
            self.term_at = time.monotonic()
            print(
                f"trainer_pkg: {signal.Signals(signum).name}: asking workers to checkpoint and stop",
                flush=True,
            )
            self._signal_all(signal.SIGTERM)
        else:
            self._signal_all(signal.SIGKILL)

    def _signal_all(self, signum: int) -> None:
        for worker in self.workers:
            if worker.status is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.pid, signum)

    # --- starting ---------------------------------------------------------------------------------
    def _start(self, env: dict[str, str], listen_fd: int | None) -> int:
        if self.start_method == "fork":
            return _fork_worker(env)
        import subprocess

        process = subprocess.Popen(
            [sys.executable, "-m", "trainer_pkg.worker"],
            env=env,
            pass_fds=(listen_fd,) if listen_fd is not None else (),
        )
        return process.pid

    def run(self) -> int:
        placement, nproc = self.cluster.placement, self.cluster.nproc_per_node
        listener: socket.socket | None = None
        master_port = placement.master_port
        if master_port is None:
            # One node and no port given: bind a free port now and hand the open socket to rank 0, so no other
            # process can take it in between.
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.bind((placement.master_addr, 0))
            listener.listen(128)
            master_port = listener.getsockname()[1]
        elif placement.node_rank == 0 and _is_loopback(placement.master_addr):
            # A local multi-node job: rank 0's TCPStore would listen on every interface (torch takes no bind
            # address), so it gets a socket bound to the loopback rendezvous address instead.
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                listener.bind((placement.master_addr, master_port))
                listener.listen(128)
            except OSError:  # taken: rank 0 binds it itself and says so (TrainerError)
                listener.close()
                listener = None
        world = self.cluster.world_size
        first = self.cluster.global_rank(0)
        print(
            f"trainer_pkg: {placement.role} node {placement.node_rank} of {placement.num_nodes}: "
            f"ranks {first}-{first + nproc - 1} of {world} on {self.device}, "
            f"rendezvous {placement.master_addr}:{master_port}",
            flush=True,
        )
        if self.start_method == "fork":
            _preload_worker(self.config.strategy)
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        with tempfile.TemporaryDirectory(prefix="trainer_pkg-") as errors:
            try:
                for local_rank in range(nproc):
                    error_file = Path(errors) / f"rank-{local_rank}.err"
                    fd = listener.fileno() if listener is not None and local_rank == 0 else None
                    env = worker_env(
                        os.environ,
                        self.config,
                        self.cluster,
                        local_rank=local_rank,
                        master_port=master_port,
                        device=self.device,
                        error_file=error_file,
                        parent_pid=os.getpid(),
                        listen_fd=fd,
                        cores=cpu_slots(),
                    )
                    pid = self._start(env, fd)
                    self.workers.append(
                        Running(local_rank, self.cluster.global_rank(local_rank), pid, error_file)
                    )
                    if self.term_at is not None:
                        break
            finally:
                if listener is not None:
                    listener.close()
            return self._supervise()

    # --- supervising ------------------------------------------------------------------------------
    def _supervise(self) -> int:
        failed: Running | None = None
        while any(w.status is None for w in self.workers):
            if self.term_at is not None and time.monotonic() - self.term_at > TERM_GRACE_S:
                self._signal_all(signal.SIGKILL)
            reaped = []
            for worker in self.workers:
                if worker.status is not None:
                    continue
                pid, status = os.waitpid(worker.pid, os.WNOHANG)
                if pid:
                    worker.status = os.waitstatus_to_exitcode(status)
                    reaped.append(worker)
            new_failures = [w for w in reaped if not self._acceptable(w.status or 0)]
            if failed is None and new_failures:
                failed = min(new_failures, key=_consequence_rank)
                # Fail fast: the others would only wait for the missing rank until a timeout.
                self._signal_all(signal.SIGKILL)
            if not reaped:
                time.sleep(POLL_S)
        if failed is not None:
            reason = _reason(failed)
            print(
                f"trainer_pkg: error: rank {failed.rank} (node {self.cluster.placement.node_rank}, "
                f"local rank {failed.local_rank}) failed: {reason}",
                file=sys.stderr,
                flush=True,
            )
            return 1
        if any(w.status != 0 for w in self.workers):
            why = "on SIGTERM" if self.term_at is not None else "because another node was asked to stop"
            print(f"trainer_pkg: stopped {why}; the next start resumes from the last checkpoint", flush=True)
            return EXIT_STOPPED
        return 0

    def _acceptable(self, code: int) -> bool:
        if code in (0, EXIT_STOPPED):
            return True
        # Workers we were asked to stop may die of the signal itself (e.g. still starting up).
        return self.term_at is not None and code in (-signal.SIGTERM, -signal.SIGKILL)


def _reason(worker: Running) -> str:
    return _read_reason(worker.error_file) or _describe_exit(worker.status or 0)


def _consequence_rank(worker: Running) -> int:
    """Among ranks that died in the same instant, name the cause: a rank killed by a signal or failing on its
    own comes before one that only lost its peer."""
    if worker.status is not None and worker.status < 0:
        return 0
    return 2 if is_lost_peer(_reason(worker)) else 1


def _read_reason(path: Path) -> str | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return text or None


def _preload_worker(strategy: str) -> None:
    """Import torch, the strategy's modules and their lazy imports once, before forking: no worker pays."""
    import torch._dynamo  # (the optimizer's constructor imports it; ~1 s)

    if strategy == "fsdp":
        import torch.distributed.checkpoint.state_dict
        import torch.distributed.fsdp  # noqa: F401
    import trainer_pkg.worker  # noqa: F401


def _fork_worker(env: dict[str, str]) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    with warnings.catch_warnings():
        # Python 3.12+ warns about forking a process with threads; torch's idle import-time thread is harmless
        # here because the parent has run no torch operation yet (the same holds for DataLoader's workers).
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid:
        return pid
    # The parent's atexit handlers are the parent's: its TemporaryDirectory's finalizer would delete the
    # error files of every rank when this child ends (exit_now runs the handlers the worker itself registers).
    atexit._clear()
    code = 1
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.environ.clear()
        os.environ.update(env)
        from trainer_pkg.config import TrainConfig as Config
        from trainer_pkg.worker import run_worker, watch_parent

        watch_parent(env)
        faulthandler.register(signal.SIGUSR1)  # `kill -USR1 PID` prints where a stuck worker is
        code = run_worker(Config.from_json(env["TRAINER_PKG_CONFIG"]), env)
    except BaseException:  # never fall back into the parent's code
        import traceback

        traceback.print_exc()
    finally:
        from trainer_pkg.process_exit import exit_now

        exit_now(code)  # threads joined, atexit handlers run, stdio flushed; never the parent's code


def start_method_from_env(env: Mapping[str, str]) -> StartMethod:
    """fork where it is safe and cheap (Linux: torch is imported once per node, not per worker), else exec."""
    value = env.get(START_METHOD_VARIABLE) or ("fork" if sys.platform.startswith("linux") else "exec")
    if value not in ("fork", "exec"):
        raise TrainerError(f"{START_METHOD_VARIABLE}={value!r} is not 'fork' or 'exec'")
    return "fork" if value == "fork" else "exec"


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback and ipaddress.ip_address(host).version == 4
    except ValueError:
        return False
