"""The `ray` mode: this replica becomes a Ray node, and the primary replica also runs the driver.

Head (workerpool0): `ray start --head` on the cluster's master port; once every training replica's node
has joined, the user's code runs here as the driver (RAY_ADDRESS set); its outcome goes into the
cluster's store, and on success the head waits for the worker nodes to leave before it stops. Worker
(every other training replica): waits for the head, joins it, and ends when the head's outcome says so:
0 after a successful driver, 1 after a failed one, or when its node or the head is lost. SIGTERM/SIGINT
stop the node and exit 128 + the signal.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import FrameType

from . import say
from .cluster import Placement
from .gpus import count_gpus
from .options import LaunchOptions
from .ray_args import (
    RAY_REQUIREMENT,
    RAY_START,
    RAY_TESTED,
    RayNode,
    driver_env,
    node_env,
    ray_node,
    ray_start_args,
)
from .ray_driver import ERROR_FILE_VARIABLE, read_error
from .ray_gcs import HeadGcs, hold_watch_socket, port_answers, wait_for_close, wait_for_port
from .ray_node import become_subreaper, log_tail, remove_link, short_temp_dir, start_node, stop_node
from .ray_outcome import ACK_WAIT_S, Outcome, driver_failure_lines, last_line, worker_verdict
from .ray_output import LINK_VARIABLE
from .timeouts import DEFAULT_RENDEZVOUS_TIMEOUT_S, rendezvous_timeout_s
from .torchrun import free_port
from .worker import PARENT_VARIABLE

JOIN_TIMEOUT_VARIABLE = "VERTEXDIST_RAY_JOIN_TIMEOUT_S"  # wins over the template's health.rendezvous_timeout
DEFAULT_JOIN_TIMEOUT_S = float(DEFAULT_RENDEZVOUS_TIMEOUT_S)  # replicas start minutes apart (image pull, pip)
WORKERS_LEAVE_S = 30.0  # after a successful driver, how long the head waits for the worker nodes to stop
HEAD_GONE_S = 15.0  # after a failed driver, how long a worker lets the head end first (it is blamed)
POLL_S = 0.5


class _Stop:
    """SIGTERM/SIGINT, noted so that the node is stopped in order (a handler cannot wait for it)."""

    signum: int | None = None

    def __init__(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._note)

    def _note(self, signum: int, _frame: FrameType | None) -> None:
        self.signum = signum

    def __bool__(self) -> bool:
        return self.signum is not None

    def exit_code(self, replica: str) -> int:
        assert self.signum is not None
        say(f"{replica} stopped by {signal.Signals(self.signum).name}; stopping its Ray node")
        return 128 + self.signum


def join_timeout(env: Mapping[str, str]) -> float:
    """How long nodes wait for the head and for each other: VERTEXDIST_RAY_JOIN_TIMEOUT_S, else the
    template's `health.rendezvous_timeout` (`timeouts`)."""
    raw = env.get(JOIN_TIMEOUT_VARIABLE, "")
    try:
        return float(raw) if raw else float(rendezvous_timeout_s(env))
    except ValueError:
        return float(rendezvous_timeout_s(env))


def ray_missing_line(replica: str) -> str:
    return (
        f"{replica} failed: `launcher: ray` needs Ray on every replica, and {sys.executable} has no `ray`:"
        f" add {RAY_TESTED} to trainer.requirements, or install {RAY_REQUIREMENT} in the image"
        " (locally: pip install 'vertexdist[ray]')"
    )


def _say_tail(replica: str, log: Path) -> None:
    for line in log_tail(log):
        say(f"{replica}: ray start: {line}", error=True)


def _node_folder(node: RayNode) -> Path | None:
    """Where this node's Ray files go: the replica's own folder where nodes share the machine."""
    if node.one_machine and node.local_share:
        return Path.cwd() / "ray"
    return None


def run(options: LaunchOptions, place: Placement, env: Mapping[str, str]) -> int:
    if options.nproc_per_node is not None or options.max_restarts:
        say(
            f"{place.replica}: --nproc-per-node and --max-restarts are torchrun's; with the ray mode"
            " the driver decides where Ray's workers run (ScalingConfig, FailureConfig)",
            error=True,
        )
        return 2
    if importlib.util.find_spec("ray") is None:
        say(ray_missing_line(place.replica), error=True)
        return 1
    port = place.master_port if place.master_port is not None else free_port()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    node = ray_node(place, env, cpus=cpus, gpus=count_gpus(env), port=port)
    folder = _node_folder(node)
    temp_dir, link = short_temp_dir(folder / "tmp") if folder is not None else (None, None)
    log = (folder or Path(tempfile.mkdtemp(prefix="vertexdist-ray-"))) / "ray-start.log"
    argv = [sys.executable, *RAY_START, *ray_start_args(node, free_port=free_port, temp_dir=temp_dir)]
    say(
        f"{place.replica} is {node.role} (node {node.node_rank} of {node.nnodes}) at {node.head_address},"
        f" {node.num_cpus} CPU(s), {node.num_gpus} GPU(s): ray start {shlex.join(argv[len(RAY_START) + 1 :])}"
    )
    stop = _Stop()
    # Open until this process exits (not just until the head's code returns): after a failed driver the
    # workers wait for it to close, so that the head's replica ends first and the job says why.
    watch = hold_watch_socket(node.node_ip or "") if node.is_head else None
    become_subreaper()
    proc: subprocess.Popen[bytes] | None = None
    try:
        # A worker's `ray start` gives up when the head's GCS answers before the head's own node has
        # registered ("No node info found for head node in GCS"), which a loaded machine makes likely: a
        # worker starts once the head's node is alive.
        if watch is None and not _head_alive(node, stop, time.monotonic() + join_timeout(env)):
            return stop.exit_code(node.replica) if stop else _head_late(node, join_timeout(env))
        proc = start_node(argv, node_env(env), log)
        if watch is not None:
            # Paths through the link are shown as the folder, which outlives it (ray_output).
            shown = (
                {LINK_VARIABLE: f"{link}={folder / 'tmp'}"} if link is not None and folder is not None else {}
            )
            return _run_head(node, options, {**env, **shown}, proc, log, stop, watch.getsockname()[1])
        return _run_worker(node, proc, log, stop, join_timeout(env))
    finally:
        remove_link(link)  # first: a launcher SIGKILLed while it stops its node leaves none behind
        stop_node(proc)


def _run_head(
    node: RayNode,
    options: LaunchOptions,
    env: Mapping[str, str],
    proc: subprocess.Popen[bytes],
    log: Path,
    stop: _Stop,
    watch_port: int,
) -> int:
    replica = node.replica
    started = time.monotonic()
    deadline = started + join_timeout(env)
    node_up = wait_for_port(
        node.head_host, node.port, deadline=deadline, keep_waiting=lambda: proc.poll() is None
    )
    if not node_up:
        return _head_node_failed(node, proc, log, stop)
    gcs = HeadGcs(node.head_address)
    joined = 0
    while joined < node.nnodes:
        if stop:
            return stop.exit_code(replica)
        if proc.poll() is not None:
            return _head_node_failed(node, proc, log, stop)
        if time.monotonic() > deadline:
            say(
                f"{replica} failed: {joined} of {node.nnodes} Ray nodes joined within {join_timeout(env):g}s",
                error=True,
            )
            return 1
        try:
            joined = gcs.alive_nodes()
        except Exception:  # the GCS is still starting
            joined = 0
        if joined < node.nnodes:
            time.sleep(POLL_S / 2)
    command = shlex.join(["python", *options.target.argv()])
    took = time.monotonic() - started
    say(f"{replica}: all {node.nnodes} Ray node(s) joined in {took:.1f}s; the driver: {command}")
    code, pid, message = _run_driver(node, options, env, proc, stop)
    if stop:
        return stop.exit_code(replica)
    if code is None:
        return _head_node_failed(node, proc, log, stop)
    outcome = Outcome(code, message, replica, watch_port)
    try:
        gcs.put_outcome(outcome)
    except Exception as exc:
        say(
            f"{replica}: could not give the worker nodes the driver's outcome: {type(exc).__name__}: {exc}",
            error=True,
        )
    if not outcome.succeeded:
        read_by = time.monotonic() + ACK_WAIT_S
        while time.monotonic() < read_by and not stop and proc.poll() is None:
            try:
                if gcs.acknowledged() >= node.nnodes - 1:
                    break
            except Exception:
                break
            time.sleep(POLL_S / 5)
        for line in driver_failure_lines(replica, outcome, command, pid):
            say(line, error=True)
        return 1
    leave_by = time.monotonic() + WORKERS_LEAVE_S
    left = node.nnodes - 1
    while left > 0 and time.monotonic() < leave_by and not stop and proc.poll() is None:
        time.sleep(POLL_S / 2)
        try:
            left = gcs.alive_nodes() - 1
        except Exception:
            break
    if left > 0:
        say(f"{replica}: {left} worker node(s) still up {WORKERS_LEAVE_S:g}s after the driver; stopping")
    say(f"{replica}: the Ray driver succeeded; stopping the Ray head")
    return 0


def _run_driver(
    node: RayNode, options: LaunchOptions, env: Mapping[str, str], proc: subprocess.Popen[bytes], stop: _Stop
) -> tuple[int | None, int, str]:
    """Run the driver to its end: (its exit status, pid, last error line); status None if the head's
    own node stopped under it (the driver is then stopped)."""
    with tempfile.TemporaryDirectory(prefix="vertexdist-driver-") as scratch:
        error_file = os.path.join(scratch, "error.json")
        extra = {PARENT_VARIABLE: str(os.getpid()), ERROR_FILE_VARIABLE: error_file}
        sys.stdout.flush()
        driver = subprocess.Popen(
            [sys.executable, "-m", "vertexdist_launcher.ray_driver", *options.target.argv()],
            env={**driver_env(env, node), **extra},
        )
        while driver.poll() is None:
            if stop or proc.poll() is not None:
                _end(driver)
                return None, driver.pid, ""
            time.sleep(POLL_S / 5)
        return driver.returncode, driver.pid, last_line(read_error(error_file))


def _end(child: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    child.terminate()
    try:
        child.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def _head_node_failed(node: RayNode, proc: subprocess.Popen[bytes], log: Path, stop: _Stop) -> int:
    if stop:
        return stop.exit_code(node.replica)
    code = proc.poll()
    _say_tail(node.replica, log)
    what = "did not start" if code is None else f"stopped (`ray start` exited with status {code})"
    say(f"{node.replica} failed: the Ray head's node {what}; see {log}", error=True)
    return 1


def _head_alive(node: RayNode, stop: _Stop, deadline: float) -> bool:
    """Whether the head's node was alive in its GCS before `deadline` (False as well when a signal came)."""
    while not stop and time.monotonic() < deadline:
        if port_answers(node.head_host, node.port):
            with contextlib.suppress(Exception):
                if HeadGcs(node.head_address).alive_nodes() >= 1:
                    return True
        time.sleep(POLL_S / 2)
    return False


def _head_late(node: RayNode, timeout_s: float) -> int:
    say(
        f"{node.replica} failed: the Ray head at {node.head_address} did not come up in {timeout_s:g}s",
        error=True,
    )
    return 1


def _join(node: RayNode, proc: subprocess.Popen[bytes], stop: _Stop, deadline: float) -> HeadGcs | None:
    """The head's GCS once it answers; None when this node stopped, a signal came or `deadline` passed."""
    while not stop and proc.poll() is None and time.monotonic() < deadline:
        # A GcsClient made before the GCS listens would wait half a minute: the port first.
        if port_answers(node.head_host, node.port):
            with contextlib.suppress(Exception):
                return HeadGcs(node.head_address)
        time.sleep(POLL_S / 2)
    return None


def _run_worker(
    node: RayNode, proc: subprocess.Popen[bytes], log: Path, stop: _Stop, timeout_s: float
) -> int:
    replica = node.replica
    gcs = _join(node, proc, stop, time.monotonic() + timeout_s)
    if gcs is None and not stop and proc.poll() is None:
        say(
            f"{replica} failed: the Ray head at {node.head_address} did not come up in {timeout_s:g}s",
            error=True,
        )
        return 1
    unreachable_since: float | None = None
    while True:
        if stop:
            return stop.exit_code(replica)
        node_exit = proc.poll()
        outcome = None
        try:
            if gcs is None:
                raise ConnectionError("this node stopped before the head answered")
            outcome = gcs.outcome()
            unreachable_since = None
        except Exception:
            unreachable_since = unreachable_since or time.monotonic()
        away = None if unreachable_since is None else time.monotonic() - unreachable_since
        verdict = worker_verdict(
            replica, node_exit=node_exit, outcome=outcome, head_unreachable_s=away, head=node.head_address
        )
        if verdict.action == "succeed":
            say(f"{verdict.line}; stopping this Ray node")
            return 0
        if verdict.action == "fail":
            if outcome is not None and gcs is not None:
                # The head fails the job with the driver's own error; let it end first.
                with contextlib.suppress(Exception):
                    gcs.acknowledge(node.node_rank)
                if outcome.watch_port:
                    wait_for_close(node.head_host, outcome.watch_port, HEAD_GONE_S)
            elif node_exit is not None:
                _say_tail(replica, log)
            say(verdict.line, error=True)
            return 1
        time.sleep(POLL_S)
