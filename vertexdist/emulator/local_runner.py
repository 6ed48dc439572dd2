"""The emulator's runner: each CustomJob runs on the local runtime (`vertexdist.local`), as a
local-run job does.

Python-package pools are fetched from the emulated bucket and pip-installed into a digest-keyed cache
(`vertexdist.packaging.install_package`; their requirements into a job environment), then run as
`python -m <module>`; container pools run their command isolated from the host
(`vertexdist.local.isolated_container`). Replicas get local-run's environment, a metadata server of the
job's service account, and this emulator's Cloud Storage endpoint. Their ranks' health watchers run as on
Vertex: heartbeat lines in the replicas' logs (read back through the emulated Cloud Logging) and each rank's
own hang decision (`vertexdist_launcher.health.LOGS_VARIABLE`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from vertexdist.backends.base import ReplicaState
from vertexdist.emulator.execution import LaunchRequest, RunState, RunStatus
from vertexdist.emulator.service_log import SERVICE_TASK, ServiceLog
from vertexdist.local import JobContext, JobState, LocalJob, start_job
from vertexdist.local.runner import Spawner
from vertexdist.log_files import replica_tail

_STATES: dict[JobState, RunState] = {
    JobState.PENDING: "PENDING",
    JobState.RUNNING: "RUNNING",
    JobState.CANCELLING: "RUNNING",
    JobState.SUCCEEDED: "SUCCEEDED",
    JobState.FAILED: "FAILED",
    JobState.CANCELLED: "CANCELLED",
}


class _LocalRunning:
    def __init__(self, job: LocalJob, service_log: Path | None = None) -> None:
        self._job = job
        self._service_log = service_log

    def poll(self) -> RunStatus:
        state = self._job.state
        error = self._job.error
        if error is None or not state.done:
            return RunStatus(_STATES[state], "")
        message = error.message
        if state is JobState.FAILED and error.replica:
            message += replica_tail(self._job.log_paths().get(error.replica))
        return RunStatus(_STATES[state], message)

    def cancel(self) -> None:
        self._job.cancel()

    def wait(self, timeout: float) -> bool:
        return self._job.wait(timeout) is not None

    def log_files(self) -> dict[str, Path]:
        """The replicas' logs, and the job's own lines (`service`) once it has any."""
        files = self._job.log_paths()
        if self._service_log is not None and self._service_log.exists():
            files[SERVICE_TASK] = self._service_log
        return files

    def pids(self) -> list[int]:
        return sorted(r.pid for r in self._job.replicas() if r.pid is not None)

    def stopped_by_platform(self, name: str, pid: int, why: str) -> bool:
        """The platform is stopping this replica (a fault plan's maintenance or worker_restarts): the
        runner restarts it however it exits (`LocalJob.stopped_by_platform`)."""
        return self._job.stopped_by_platform(name, pid, why)

    def reached_step(self, name: str) -> bool:
        """Whether replica `name` reached a step-aimed fault's step (`LocalJob.reached_step`)."""
        return self._job.reached_step(name)

    def set_rank_faults(self, faults: list[dict[str, object]]) -> None:
        """A fault plan's hang and slow faults, for the ranks' health watchers (`LocalJob.rank_faults`)."""
        self._job.rank_faults = faults

    def set_start_delays(self, delays: dict[str, float]) -> None:
        """A fault plan's scattered_start: how late each replica starts (`LocalJob.start_delays`)."""
        self._job.start_delays = delays

    def replica_pids(self) -> dict[str, int]:
        """Replica name -> pid of its process group, for the replicas running now."""
        return {
            r.name: r.pid
            for r in self._job.replicas()
            if r.pid is not None and r.state is ReplicaState.RUNNING
        }


class LocalBackendRunner:
    """Starts jobs with the local backend; `procs_per_replica` as in `local-run --procs-per-replica`."""

    def __init__(
        self,
        *,
        package_cache: Path,
        procs_per_replica: int | None = None,
        grace_s: float = 5.0,
        replica_env: dict[str, str] | None = None,
        fetch_object: Callable[[str, Path], Path] | None = None,
    ) -> None:
        self._package_cache = Path(package_cache)
        # What replicas are pointed at besides Vertex's variables: the emulator's Cloud Storage.
        self.replica_env = dict(replica_env or {})
        # gs://B/O -> a local file: stages what a container's command reads under /gcs/.
        self.fetch_object = fetch_object
        self._procs_per_replica = procs_per_replica
        self._grace_s = grace_s
        # How replicas start: None is a cold start; `emulator start --warm N` sets its pool's spawner.
        self.spawner: Spawner | None = None

    def start(self, request: LaunchRequest) -> _LocalRunning:
        ctx = JobContext(
            job_id=request.job_id,
            project=request.project,
            region=request.region,
            gcs_root=str(request.gcs_root),
            procs_per_replica=self._procs_per_replica,
            trial_id=request.trial_id,
            hp_metric_dir=str(request.hp_metric_dir) if request.hp_metric_dir else None,
        )
        # What the runtime says of the job from outside its replicas (a silent job's note): task `service`.
        service_log = ServiceLog(request.run_dir)
        # Packages install in the job's own thread while it is PENDING, like a VM pulling its image.
        local = start_job(
            request.spec,
            ctx,
            on_event=service_log,
            run_dir=request.run_dir,
            fetch_package=request.fetch_package,
            cache_dir=self._package_cache,
            grace_s=self._grace_s,
            serve_metadata=True,
            replica_env=self.replica_env,
            fetch_object=self.fetch_object,
            spawner=self.spawner,
            health_logs=True,  # as on Vertex: heartbeat lines in the replicas' logs, each rank's own verdict
        )
        return _LocalRunning(local, service_log.path)
