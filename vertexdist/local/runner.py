"""Starts, supervises and stops the replica processes of one local job, with Vertex's job semantics.

- Each replica runs in its own session/process group (`start_new_session`), so stopping it reaches the
  worker processes it spawned too: SIGTERM to the group, a grace period, then SIGKILL (torchx's local
  scheduler does the same).
- The job succeeds when the chief (pool 0) exits 0 and no training replica (pools 0 and 1) failed: workers
  get `settle_s` to exit after the chief, then are stopped. The first replica that fails fails the job and
  every other replica is stopped. With `restartJobOnWorkerRestart` the whole job is
  restarted instead, up to `max_restarts` times, with the same cluster (as Vertex keeps host names).
- Otherwise Vertex's restart rules (docs/reference/vertex.md §8.1): a replica whose exit is not permanent
  (`local.exits`: the platform stopped it, or it exited 75) is restarted alone, with the same name, address,
  environment and log file (a marker line between its runs), up to `replica_restarts` times; the replicas
  that failed with it because they only lost that peer are restarted with it. One more such failure
  retries the whole job, up to `job_retries` times. A permanent exit fails the job at once, as before.
- Each replica's stdout and stderr go to its one log file: stdout directly, stderr through a `LogCapture`,
  which notes which bytes are whose and when (Vertex logs stderr as ERROR; `local.log_capture`).
- Blame: a failure usually takes its peers down within milliseconds (gloo's "Connection closed by peer"),
  and their exits can be reported in any order. So each exit is timestamped where it is reaped, and once a
  failure is seen the runner waits `BLAME_WINDOW_S` (up to `CAUSE_WAIT_S` while every failure seen only
  lost its peer) for the other exits of that moment before it stops anything; the first by exit time that
  did not only lose its peer is named (`vertexdist.local.blame`).
  Replicas that exited on their own in that window keep their own state (FAILED, with their own exit
  code); only those the job ended are STOPPED.
- A supervisor that dies (SIGKILL included) takes the job down with it: a `Watchdog` process per job stops
  every process group the job registered, and every process carrying the job's token, within 10 s.
- States use Vertex's names (docs/reference/vertex.md §4.4: JobState).
- Every replica sees the job's gs:// folder (`plan.gcs_root`) at `/gcs`, as Vertex's do through Cloud Storage
  FUSE, in a mount namespace of its own (`local.gcs_mount`); where that cannot be, the job says why once, as
  it starts, and a replica's Python code that touches /gcs fails with that reason.

`LocalJob` is a library API (the emulator uses it): start, read state, cancel, wait, find log files.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Protocol

from vertexdist.backends.base import (
    JobError,
    JobEvent,
    JobResult,
    JobState,
    ReplicaState,
    ReplicaStatus,
)
from vertexdist.errors import VertexdistError
from vertexdist.health.folder import HEALTH_DIR
from vertexdist.local import gcs_mount
from vertexdist.local.blame import (
    REPLICA_RESTART_MARK,
    RESTART_MARK,
    Failure,
    first_failure,
    lost_a_peer,
    needs_cause,
)
from vertexdist.local.environment import child_environment
from vertexdist.local.exits import Exit, decide
from vertexdist.local.health_monitor import HealthConfig, HealthMonitor
from vertexdist.local.log_capture import LogCapture
from vertexdist.local.plan import TMP_DIR, LaunchPlan, ReplicaLaunch
from vertexdist.local.procs import PROC, group_members
from vertexdist.local.startup_failure import TAIL_LINES, StartupFailure, startup_failure
from vertexdist.local.watchdog import JOB_TOKEN_FILE, TOKEN_VARIABLE, Watchdog, job_processes
from vertexdist.log_files import last_lines
from vertexdist.private_files import make_private_dir, open_private, write_private_text
from vertexdist.shipped.vertexdist_launcher import health as health_watcher

DEFAULT_GRACE_S = 5.0
# After the chief succeeds, how long the other training replicas get to exit on their own before the job
# (already a success) stops them; DDP workers normally finish within a second of the chief.
DEFAULT_SETTLE_S = 10.0
# How long a replica's exit waits for the rest of its output to reach the log.
LOG_DRAIN_S = 1.0
# How long after a failure the runner waits for the other exits of the same moment before it names the
# first and stops the rest: peers that lose a connection exit within milliseconds, their reports in any order.
BLAME_WINDOW_S = 0.5
# ... and how long, at most, while every failure seen only lost its peer: the cause is still tearing down.
CAUSE_WAIT_S = 3.0


# google.rpc.Code values, as Vertex reports them in `job.error.code`.
CODE_CANCELLED = 1
CODE_INVALID_ARGUMENT = 3
CODE_DEADLINE_EXCEEDED = 4
CODE_INTERNAL = 13


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            sig = signal.Signals(-code).name
        except ValueError:
            sig = f"signal {-code}"
        return f"was killed by {sig}"
    return f"exited with a non-zero status of {code}"


class ReplicaProcess(Protocol):
    """A started replica, as the runner waits for it: a Popen, or a warm pool's forked child."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


# How a replica is started: (argv, env, cwd, stdout, stderr fd) -> its process, in a session of its own.
Spawner = Callable[[Sequence[str], Mapping[str, str], Path, IO[bytes], int], ReplicaProcess]


def popen_spawner(
    argv: Sequence[str], env: Mapping[str, str], cwd: Path, stdout: IO[bytes], stderr: int
) -> subprocess.Popen[bytes]:
    """A cold start: a new interpreter in a session of its own."""
    return subprocess.Popen(
        list(argv),
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,
    )


@dataclass
class _Running:
    launch: ReplicaLaunch
    proc: ReplicaProcess | None
    done: bool = False
    stopped_by_job: bool = False
    exit_code: int | None = None
    pgid: int | None = None
    exited_at: float | None = None  # time.monotonic() where the exit was reaped
    stopped_by_platform: str = ""  # why the platform stopped it (`LocalJob.stopped_by_platform`), if it did

    @property
    def failed(self) -> bool:
        """Whether it ended as a failure: non-zero, or stopped by the platform (whatever its exit)."""
        return self.done and ((self.exit_code or 0) != 0 or bool(self.stopped_by_platform))

    def startup_failure(self) -> StartupFailure | None:
        """Its script's import-time failure (a missing module, a syntax error), read from its log."""
        if self.stopped_by_platform or not self.failed:
            return None
        return startup_failure(last_lines(self.launch.log_path, TAIL_LINES))

    def error(self) -> JobError:
        code = self.exit_code or 0
        how = self.stopped_by_platform or describe_exit(code)
        message = f"The replica {self.launch.name} {how}."
        failure = self.startup_failure()
        if failure is not None:  # the launcher's summary would hide it (torchrun's box)
            message = f"The replica {self.launch.name} {how} as its script was importing: {failure.text()}."
        return JobError(CODE_INVALID_ARGUMENT, message, replica=self.launch.name, exit_code=code)


@dataclass
class _Outcome:
    state: JobState
    error: JobError | None = None
    retryable: bool = False


def _group_alive(pgid: int) -> bool:
    """Whether any non-zombie process is left in the process group."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not PROC.is_dir():
        return True
    # Zombies (reparented orphans not yet reaped by init) still answer killpg(0); they hold no resources.
    return bool(group_members(pgid))


def _leader_exited(pid: int) -> bool:
    """Whether the process has exited (a zombie not yet reaped, or gone), whatever reaps it later."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].startswith(("Z", "X"))


def _signal_group(pgid: int | None, sig: signal.Signals) -> None:
    if pgid is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


STOP_COMMAND_TIMEOUT_S = 60.0


def _run_stop_command(launch: ReplicaLaunch) -> None:
    """A replica's stop command; its failure is expected and silent when there is nothing left to stop
    (`docker rm -f` of a container that `--rm` already removed)."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            list(launch.stop_argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=STOP_COMMAND_TIMEOUT_S,
            check=False,
        )


def _run_stop_commands(launches: list[ReplicaLaunch]) -> None:
    """The replicas' stop commands side by side: each `docker rm -f` waits for the daemon, so a job's
    teardown takes one such wait, not one per replica."""
    threads = [threading.Thread(target=_run_stop_command, args=(launch,), daemon=True) for launch in launches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


class LocalJob:
    """One job's replica processes under Vertex's job semantics. Thread-safe reads; `start()` returns at once.

    `plan` may be a callable that prepares the plan (installing packages, reserving ports): it runs in the
    supervisor thread while the job is PENDING, and a VertexdistError from it fails the job.
    `on_event` is called from the supervisor thread on every job or replica state change.
    `on_finish` runs once when the job is done (e.g. to release its ports).
    """

    def __init__(
        self,
        plan: LaunchPlan | Callable[[], LaunchPlan],
        *,
        on_event: Callable[[JobEvent], None] | None = None,
        on_finish: Callable[[], None] | None = None,
        grace_s: float = DEFAULT_GRACE_S,
        settle_s: float = DEFAULT_SETTLE_S,
        timeout_s: float | None = None,
        base_env: dict[str, str] | None = None,
        spawner: Spawner | None = None,
        health_logs: bool = False,
    ) -> None:
        self._plan_source = plan
        # The emulator's: its ranks watch as on Vertex (heartbeat lines in the log, each rank's own hang
        # decision) beside the run folder's files, and the monitor takes up their verdict.
        self._health_logs = health_logs
        self._spawner: Spawner = spawner or popen_spawner
        self.plan: LaunchPlan | None = plan if isinstance(plan, LaunchPlan) else None
        self._on_event = on_event
        self._on_finish = on_finish
        self._grace_s = grace_s
        self._settle_s = settle_s
        self._timeout_override = timeout_s
        self._base_env = dict(os.environ) if base_env is None else base_env
        self._lock = threading.Lock()
        self._cancel = threading.Event()
        self._finished = threading.Event()
        self._state = JobState.PENDING
        self._error: JobError | None = None
        self._replicas: dict[str, ReplicaStatus] = {}
        self._restarts = 0
        self._replica_restarts: dict[str, int] = {}  # each replica's restarts on its own, all attempts
        self._platform_hit = False  # the platform stopped a replica in this attempt
        self._started_at = 0.0
        self._ended_at: float | None = None
        self._thread: threading.Thread | None = None
        self._live: dict[str, _Running] = {}  # the current attempt's processes
        self._live_events: queue.Queue[str] = queue.Queue()  # where their exits are reported
        self._watchdog: Watchdog | None = None
        self._gcs_mapped = False  # replicas start behind gcs_namespace (set once the plan is ready)
        self._gcs_problem: str | None = None  # why /gcs cannot be mapped here, if it cannot
        self._imposed: JobError | None = None  # a failure from outside the replicas (`impose_failure`)
        self._health: HealthMonitor | None = None  # reads the ranks' heartbeats (`local.health_monitor`)
        # A fault plan's hang and slow faults (for the watchers); scattered_start (seconds late, by replica)
        self.rank_faults: list[dict[str, object]] = []
        self.start_delays: dict[str, float] = {}
        if self.plan is not None:
            self._init_replicas(self.plan)

    # ----- public API -----------------------------------------------------------------------------
    def start(self) -> LocalJob:
        if self._thread is not None:
            raise RuntimeError("job already started")
        self._started_at = time.monotonic()
        self._thread = threading.Thread(target=self._supervise, name="vertexdist-local-job", daemon=True)
        self._thread.start()
        return self

    @property
    def state(self) -> JobState:
        with self._lock:
            return self._state

    @property
    def error(self) -> JobError | None:
        with self._lock:
            return self._error

    @property
    def restarts(self) -> int:
        with self._lock:
            return self._restarts

    def replicas(self) -> list[ReplicaStatus]:
        with self._lock:
            return list(self._replicas.values())

    def log_paths(self) -> dict[str, Path]:
        with self._lock:
            return {name: status.log_path for name, status in self._replicas.items()}

    def last_output_at(self) -> float | None:
        """When a replica last printed a line: the newest change of their log files (None before any)."""
        times = []
        for path in self.log_paths().values():
            with contextlib.suppress(OSError):
                times.append(path.stat().st_mtime)
        return max(times, default=None)

    def cancel(self) -> None:
        """Ask the job to stop; it becomes CANCELLING, then CANCELLED once every process is gone."""
        with self._lock:
            if self._state.done:
                return
        self._cancel.set()

    def impose_failure(self, error: JobError, *, stop: bool = False) -> None:
        """The job fails with `error`, from outside its replicas (a reclaimed Spot VM, a stockout: a fault
        plan's, `vertexdist.jobs.local_faults`): however its replicas end from now on, it ends FAILED with
        this error and is not restarted. With `stop` (or once set, on `cancel`) its replicas are stopped; a
        job not started yet starts none."""
        with self._lock:
            if self._state.done:
                return
            self._imposed = self._imposed or error
        if stop:
            self._cancel.set()

    def note(self, message: str) -> None:
        """A line for the job's log from outside its replicas (the health monitor's straggler warning)."""
        self._emit(JobEvent(time=time.time(), job_state=self.state, message=message))

    def reached_step(self, name: str) -> bool:
        """Whether replica `name` has reached the step a fault plan's step-aimed preemption waits for (its
        local rank 0's watcher marked it in the health folder: `vertexdist_launcher.health`)."""
        if self._health is None:
            return False
        return (self._health.health_dir / f"{health_watcher.REACHED_PREFIX}{name}").exists()

    def stopped_by_platform(self, name: str, pid: int, why: str) -> bool:
        """The platform is about to stop replica `name` (the process group `pid` leads): a maintenance event,
        a Spot VM reclaimed with `outcome: worker_restarts` (`emulator.preemption`, which then sends SIGTERM,
        and SIGKILL after the grace). However it exits, it is restarted as Vertex restarts it (`local.exits`);
        `why` completes "The replica NAME ..." in the job's messages. False if that process is not running."""
        with self._lock:
            run = self._live.get(name)
            if run is None or run.done or run.proc is None or run.proc.pid != pid:
                return False
            run.stopped_by_platform = why
            self._platform_hit = True
        return True

    def wait(self, timeout: float | None = None) -> JobResult | None:
        """The result once the job is done; None if `timeout` passes first."""
        if not self._finished.wait(timeout):
            return None
        return self.result()

    def result(self) -> JobResult:
        with self._lock:
            end = self._ended_at if self._ended_at is not None else time.monotonic()
            return JobResult(
                state=self._state,
                error=self._error,
                replicas=tuple(self._replicas.values()),
                restarts=self._restarts,
                elapsed_s=end - self._started_at,
            )

    @property
    def done(self) -> bool:
        return self._finished.is_set()

    # ----- state bookkeeping ----------------------------------------------------------------------
    def _init_replicas(self, plan: LaunchPlan) -> None:
        with self._lock:
            self._replicas = {
                r.name: ReplicaStatus(name=r.name, state=ReplicaState.PENDING, log_path=r.log_path)
                for r in plan.replicas
            }

    def _emit(self, event: JobEvent) -> None:
        if self._on_event is not None:
            with contextlib.suppress(Exception):  # a broken observer must not kill the supervisor
                self._on_event(event)

    def _set_job(self, state: JobState, message: str = "", error: JobError | None = None) -> None:
        with self._lock:
            self._state = state
            if error is not None:
                self._error = error
        self._emit(JobEvent(time=time.time(), job_state=state, message=message, error=error))

    def _set_replica(self, name: str, **changes: object) -> None:
        with self._lock:
            status = replace(self._replicas[name], **changes)  # type: ignore[arg-type]
            self._replicas[name] = status
            job_state = self._state
        self._emit(JobEvent(time=time.time(), job_state=job_state, replica=status))

    # ----- supervision ----------------------------------------------------------------------------
    def _supervise(self) -> None:
        try:
            self._supervise_attempts()
        except Exception as exc:  # never leave a caller waiting, or processes running, if the supervisor dies
            if self._live:
                with contextlib.suppress(Exception):
                    self._stop_all(self._live, self._live_events)
            self._set_job(JobState.FAILED, error=JobError(CODE_INTERNAL, f"local backend error: {exc}"))
        finally:
            if self._watchdog is not None:
                with contextlib.suppress(Exception):
                    self._watchdog.close()
            if self._health is not None:  # the verdict and stragglers stay for `vertexdist ranks`
                self._health.write_summary()
            if self.plan is not None:  # every process of the job is gone: its temp files go with it
                shutil.rmtree(self.plan.run_dir / TMP_DIR, ignore_errors=True)
            with self._lock:
                self._ended_at = time.monotonic()
            if self._on_finish is not None:
                with contextlib.suppress(Exception):
                    self._on_finish()
            self._finished.set()

    def _supervise_attempts(self) -> None:
        plan = self.plan
        if plan is None:
            try:
                assert callable(self._plan_source)
                plan = self._plan_source()
            except VertexdistError as exc:
                if self._cancel.is_set():  # e.g. Ctrl-C also reached the package install
                    self._set_job(JobState.CANCELLED, error=JobError(CODE_CANCELLED, "the job was cancelled"))
                    return
                message = exc.message + (f" ({exc.hint})" if exc.hint else "")
                self._set_job(JobState.FAILED, error=JobError(CODE_INVALID_ARGUMENT, message))
                return
            self.plan = plan
            self._init_replicas(plan)
        if self._cancel.is_set():
            if self._imposed is not None:
                self._set_job(JobState.FAILED, error=self._imposed)
                return
            self._set_job(JobState.CANCELLED, error=JobError(CODE_CANCELLED, "the job was cancelled"))
            return
        timeout = self._timeout_override if self._timeout_override is not None else plan.timeout_s
        deadline = self._started_at + timeout if timeout else None
        make_private_dir(plan.run_dir)
        for replica in plan.replicas:
            make_private_dir(replica.cwd)
            make_private_dir(replica.log_path.parent)
            temp = replica.env.get("TMPDIR")
            if temp and Path(temp).parent == plan.run_dir / TMP_DIR:
                make_private_dir(Path(temp).parent)
                make_private_dir(Path(temp))
        self._prepare_gcs(plan)
        self._watchdog = Watchdog.start(grace_s=self._grace_s, label=f"job {plan.job_id}")
        # The job's private token, for `vertexdist shell` to tell the job's replicas from look-alikes.
        write_private_text(plan.run_dir / JOB_TOKEN_FILE, self._watchdog.token)
        for replica in plan.replicas:
            if replica.stop_argv:
                self._watchdog.add_stop_command(replica.stop_argv)
        config = HealthConfig.from_env(plan.replicas[0].env) if plan.replicas else HealthConfig()
        self._health = HealthMonitor(
            self, plan.run_dir / HEALTH_DIR, config, ranks_decide=self._health_logs
        ).start()
        attempt = 0
        # restartJobOnWorkerRestart restarts the job on any failure; else a replica's restarts spent retry it.
        whole_job = plan.max_restarts > 0
        limit = plan.max_restarts if whole_job else plan.job_retries
        verb = "restarting" if whole_job else "retrying"
        while True:
            outcome = self._run_attempt(plan, attempt, deadline)
            if outcome.retryable and attempt < limit and not self._cancel.is_set():
                attempt += 1
                with self._lock:
                    self._restarts = attempt
                assert outcome.error is not None
                self._set_job(
                    JobState.RUNNING, message=f"{verb} the job ({attempt}/{limit}): {outcome.error.message}"
                )
                continue
            self._set_job(outcome.state, error=outcome.error)
            return

    def _prepare_gcs(self, plan: LaunchPlan) -> None:
        """Whether replicas get /gcs; if they cannot, the job says why, once, before any starts."""
        if plan.gcs_root is None:
            return
        plan.gcs_root.mkdir(parents=True, exist_ok=True)  # what /gcs is bound to must exist
        self._gcs_problem = gcs_mount.problem()
        if self._gcs_problem is None:
            make_private_dir(gcs_mount.stage_dir(plan.run_dir))
            self._gcs_mapped = True
        else:
            self._set_job(JobState.PENDING, message=f"warning: {self._gcs_problem}")

    def _replica_command(self, launch: ReplicaLaunch) -> tuple[tuple[str, ...], dict[str, str]]:
        """The replica's argv and its variables, behind the /gcs mapping (or its guard)."""
        assert self._watchdog is not None
        env = {**launch.env, TOKEN_VARIABLE: self._watchdog.token}
        if self._health is not None:  # each worker's watcher writes its heartbeats there
            env[health_watcher.DIR_VARIABLE] = str(self._health.health_dir)
            if self._health_logs:
                env[health_watcher.LOGS_VARIABLE] = "1"
        faults = [f for f in self.rank_faults if f.get("replica") == launch.name]
        if faults:
            env[health_watcher.FAULTS_VARIABLE] = json.dumps(faults)
        plan = self.plan
        if self._gcs_mapped and plan is not None and plan.gcs_root is not None:
            return gcs_mount.launch_argv(launch.argv, plan.gcs_root, plan.run_dir), env
        if self._gcs_problem is not None:
            return tuple(launch.argv), gcs_mount.guard_env(env, self._gcs_problem)
        return tuple(launch.argv), env

    def _start_replica(
        self, launch: ReplicaLaunch, attempt: int, events: queue.Queue[str], note: str = ""
    ) -> _Running:
        assert self._watchdog is not None
        argv, replica_env = self._replica_command(launch)
        delay = self.start_delays.get(launch.name, 0.0)
        if delay > 0 and attempt == 0 and not note:  # as Vertex starts each replica when its VM is ready
            argv = ("/bin/sh", "-c", 'sleep "$0" && exec "$@"', f"{delay:g}", *argv)
        env = child_environment(self._base_env, replica_env)
        with open(open_private(launch.log_path, os.O_WRONLY | os.O_APPEND), "ab") as log:
            capture = LogCapture(launch.log_path)  # stderr told apart from stdout: see local.log_capture
            if note or attempt:
                capture.note(note or f"{RESTART_MARK} {attempt} -----")
            try:
                proc = self._spawner(argv, env, launch.cwd, log, capture.stderr)
            except OSError as exc:
                capture.abandon()
                log.write(f"vertexdist: cannot start {launch.argv[0]}: {exc}\n".encode())
                running = _Running(launch, None, exit_code=127, exited_at=time.monotonic())
                events.put(launch.name)
                return running
            capture.start(launch.name)
        self._watchdog.add_group(proc.pid)
        running = _Running(launch, proc, pgid=proc.pid)

        def wait_for_exit() -> None:
            proc.wait()
            running.exited_at = time.monotonic()  # before the report: the queue orders the two
            # Its last lines (a traceback) are in the log before its exit is reported; workers it left
            # holding the pipes do not hold the report up for long.
            capture.wait(LOG_DRAIN_S)
            events.put(launch.name)

        threading.Thread(target=wait_for_exit, name=f"wait-{launch.name}", daemon=True).start()
        return running

    def _run_attempt(self, plan: LaunchPlan, attempt: int, deadline: float | None) -> _Outcome:
        events: queue.Queue[str] = queue.Queue()
        running: dict[str, _Running] = {}
        with self._lock:
            self._live, self._live_events = running, events
            self._platform_hit = False
        restarts: dict[str, int] = {}  # this attempt's restarts of each replica on its own
        if self._health is not None:
            self._health.new_attempt()
        for launch in plan.replicas:
            run = self._start_replica(launch, attempt, events)
            running[launch.name] = run
            pid = run.proc.pid if run.proc else None
            self._set_replica(
                launch.name, state=ReplicaState.RUNNING, pid=pid, exit_code=None, attempt=attempt
            )
        if attempt == 0:
            self._set_job(JobState.RUNNING)
        pending = {r.name for r in plan.replicas if r.is_training}
        settle_until: float | None = None  # set once the chief has succeeded
        outcome: _Outcome | None = None
        while outcome is None:
            if self._cancel.is_set():
                self._set_job(JobState.CANCELLING)
                outcome = _Outcome(JobState.CANCELLED, JobError(CODE_CANCELLED, "the job was cancelled"))
                break
            wait_s = 0.1
            if settle_until is not None and time.monotonic() >= settle_until:
                # Vertex ends the job with its chief; a worker that does not exit with it is not a failure.
                late = ", ".join(sorted(pending))
                self._set_job(
                    JobState.RUNNING,
                    message=f"the chief succeeded; stopping {late}, still running {self._settle_s:g}s later",
                )
                outcome = _Outcome(JobState.SUCCEEDED)
                break
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    message = f"the job ran past its timeout of {plan.timeout_s or 0:g}s"
                    if self._timeout_override is not None:
                        message = f"the job ran past its timeout of {self._timeout_override:g}s"
                    outcome = _Outcome(JobState.FAILED, JobError(CODE_DEADLINE_EXCEEDED, message))
                    break
                wait_s = min(wait_s, left)
            try:
                name = events.get(timeout=wait_s)
            except queue.Empty:
                continue
            run = running[name]
            self._record_exit(run)
            if run.failed:
                if self._health is not None and self._health.take_up_verdict():
                    # its ranks called the job hung (exit HUNG_EXIT): it fails with their verdict, no restart
                    outcome = _Outcome(JobState.FAILED, self._imposed)
                    break
                first = run if run.stopped_by_platform else self._first_failure(running, events)
                outcome = self._after_failure(plan, attempt, first, running, events, restarts)
                if outcome is not None:
                    break
            # Every success so far, those the failure's window read included.
            for done in [n for n in pending if running[n].done and not running[n].failed]:
                pending.discard(done)
                if running[done].launch.pool == 0 and settle_until is None:
                    settle_until = time.monotonic() + self._settle_s
            if not pending:
                outcome = _Outcome(JobState.SUCCEEDED)
        if self._health is not None:  # a hung job's ranks write their stacks before anything is stopped
            self._health.await_dumps()
        self._stop_all(running, events)
        self._live = {}
        if self._imposed is not None:  # whatever the replicas' exits said (impose_failure)
            return _Outcome(JobState.FAILED, self._imposed)
        return outcome

    def _after_failure(
        self,
        plan: LaunchPlan,
        attempt: int,
        first: _Running,
        running: dict[str, _Running],
        events: queue.Queue[str],
        restarts: dict[str, int],
    ) -> _Outcome | None:
        """Vertex's restart rules once `first` (the failure to name) and maybe others failed: the attempt's
        outcome, or None once every failed replica was restarted in place (docs/reference/vertex.md §8.1)."""
        if plan.max_restarts:  # restartJobOnWorkerRestart: any failure restarts every replica ...
            # ... but one at import fails the same way every time: no restart is spent on it
            retryable = first.startup_failure() is None
            return _Outcome(JobState.FAILED, first.error(), retryable=retryable)
        failed = sorted((r for r in running.values() if r.failed), key=lambda r: r.exited_at or 0.0)
        exits = [
            Exit(
                r.launch.name,
                r.exit_code or 0,
                stopped_by_platform=bool(r.stopped_by_platform),
                lost_peer=lost_a_peer(last_lines(r.launch.log_path)),
            )
            for r in failed
        ]
        decision = decide(
            exits,
            first.launch.name,
            restarts=restarts,
            limit=plan.replica_restarts,
            peer_restarted=self._platform_hit or bool(restarts),
        )
        error = running[decision.blame].error()
        if decision.action == "fail":
            return _Outcome(JobState.FAILED, error)
        if decision.action == "retry_job":
            message = f"{error.message[:-1]}, after {plan.replica_restarts} restarts."
            return _Outcome(JobState.FAILED, replace(error, message=message), retryable=True)
        for name in decision.restart:
            run = running[name]
            restarts[name] = count = restarts.get(name, 0) + 1
            what = f"{name} ({count}/{plan.replica_restarts})"
            self._set_job(JobState.RUNNING, message=f"restarting {what}: {run.error().message}")
            self._restart_in_place(run, attempt, what, events)
        return None

    def _restart_in_place(self, run: _Running, attempt: int, what: str, events: queue.Queue[str]) -> None:
        """Start one replica again as Vertex does on the same VM: what is left of its process group is
        stopped first (SIGTERM, the grace, SIGKILL; its stop command), then the same launch runs again."""
        name = run.launch.name
        self._stop_group(run)
        new = self._start_replica(run.launch, attempt, events, note=f"{REPLICA_RESTART_MARK} {what} -----")
        with self._lock:
            self._live[name] = new
            self._replica_restarts[name] = total = self._replica_restarts.get(name, 0) + 1
        pid = new.proc.pid if new.proc else None
        self._set_replica(
            name, state=ReplicaState.RUNNING, pid=pid, exit_code=None, attempt=attempt, restarts=total
        )

    def _stop_group(self, run: _Running) -> None:
        """Stop what is left of one replica's process group (its leader has exited); forget the group."""
        pgid = run.pgid
        if pgid is not None:
            _signal_group(pgid, signal.SIGTERM)
            deadline = time.monotonic() + self._grace_s
            killed = False
            while _group_alive(pgid):
                if time.monotonic() >= deadline:
                    if killed:
                        break  # unkillable (D state)
                    _signal_group(pgid, signal.SIGKILL)
                    killed, deadline = True, time.monotonic() + self._grace_s
                time.sleep(0.02)
            if self._watchdog is not None:
                self._watchdog.remove_group(pgid)
        if run.launch.stop_argv:
            _run_stop_command(run.launch)

    def _first_failure(self, running: dict[str, _Running], events: queue.Queue[str]) -> _Running:
        """Once a replica failed: the exits of that moment recorded as they were, and the one to name.

        Nothing is stopped yet, so a replica that exits in the window exited on its own. Every exit's time
        is where it was reaped, which orders them however their reports were queued; `blame.first_failure`
        names the first of them that did not only lose its peer. While every failure seen only lost its
        peer, the window stretches up to `CAUSE_WAIT_S` for the replica that caused them."""
        started = time.monotonic()
        failures: dict[str, Failure] = {}

        def seen() -> list[Failure]:
            for run in running.values():
                if run.failed and run.launch.name not in failures:
                    name = run.launch.name
                    exited = run.exited_at if run.exited_at is not None else time.monotonic()
                    failures[name] = Failure(name, exited, last_lines(run.launch.log_path))
            return list(failures.values())

        while not all(run.done for run in running.values()):
            window = CAUSE_WAIT_S if needs_cause(seen()) else BLAME_WINDOW_S
            left = started + window - time.monotonic()
            if left <= 0:
                break
            try:
                name = events.get(timeout=min(left, 0.05))
            except queue.Empty:
                continue
            self._record_exit(running[name])
        return running[first_failure(seen()).name]

    def _record_exit(self, run: _Running) -> None:
        if run.done:
            return
        if run.proc is not None:
            run.exit_code = run.proc.returncode
        run.done = True
        code = run.exit_code or 0
        if run.stopped_by_job or run.stopped_by_platform:
            state = ReplicaState.STOPPED
        else:
            state = ReplicaState.SUCCEEDED if code == 0 else ReplicaState.FAILED
        self._set_replica(run.launch.name, state=state, exit_code=run.exit_code)
        # Workers the replica spawned may outlive it; they belong to the job, not to the machine.
        _signal_group(run.pgid, signal.SIGTERM)

    def _stop_all(self, running: dict[str, _Running], events: queue.Queue[str]) -> None:
        """Stop every process group of the job, then run the replicas' stop commands (e.g. `docker rm -f`)."""
        try:
            self._stop_groups(running, events)
        finally:
            _run_stop_commands([run.launch for run in running.values() if run.launch.stop_argv])

    def _forget_groups(self, running: dict[str, _Running]) -> None:
        """Groups seen gone leave the watchdog's list: their ids may be given to other processes now."""
        if self._watchdog is not None:
            for run in running.values():
                if run.pgid is not None:
                    self._watchdog.remove_group(run.pgid)

    def _strays(self) -> list[int]:
        """Processes of the job outside its groups: they started sessions of their own (ray's daemons)."""
        return job_processes((), self._watchdog.token) if self._watchdog is not None else []

    def _stop_groups(self, running: dict[str, _Running], events: queue.Queue[str]) -> None:
        """SIGTERM every process group of the job, wait up to the grace period, then SIGKILL what is left;
        the same for processes that carry the job's token but left its groups."""
        for run in running.values():
            # A replica that already exited on its own (its report not read yet) keeps its own state.
            if not run.done and run.proc is not None and not _leader_exited(run.proc.pid):
                run.stopped_by_job = True
            _signal_group(run.pgid, signal.SIGTERM)
        deadline = time.monotonic() + self._grace_s
        killed = False
        strays_told: set[int] = set()
        while True:
            while True:
                try:
                    name = events.get_nowait()
                except queue.Empty:
                    break
                self._record_exit(running[name])
            leaders_done = all(run.done for run in running.values())
            groups_gone = leaders_done and not any(
                run.pgid is not None and _group_alive(run.pgid) for run in running.values()
            )
            strays = self._strays() if groups_gone else []
            if groups_gone and not strays:
                self._forget_groups(running)
                return
            for pid in set(strays) - strays_told:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL if killed else signal.SIGTERM)
                strays_told.add(pid)
            if time.monotonic() >= deadline and not killed:
                for run in running.values():
                    _signal_group(run.pgid, signal.SIGKILL)
                for pid in strays:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                killed = True
                deadline = time.monotonic() + self._grace_s
            elif killed and time.monotonic() >= deadline:
                return  # unkillable (D state); nothing more a launcher can do
            time.sleep(0.02)


def run_job(
    plan: LaunchPlan, *, grace_s: float = DEFAULT_GRACE_S, timeout_s: float | None = None
) -> JobResult:
    """Run a plan to the end, blocking (for scripts and tests)."""
    result = LocalJob(plan, grace_s=grace_s, timeout_s=timeout_s).start().wait()
    assert result is not None
    return result
