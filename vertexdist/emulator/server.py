"""The whole emulator: local Vertex REST API + local Cloud Storage + job store + local execution.

`Emulator` is a context manager (tests, `submit --emulator`); `vertexdist emulator start` runs one until
stopped. Both servers bind 127.0.0.1 only.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

from vertexdist.backends.output_files import linked_folder
from vertexdist.emulator.capacity import CapacityFaults, not_emulated
from vertexdist.emulator.execution import JobRunner
from vertexdist.emulator.faults import FaultPlan as RequestFaults
from vertexdist.emulator.folder import LOCK_FILE, Endpoints, remove_endpoints, write_endpoints
from vertexdist.emulator.http_api import VertexHTTPServer
from vertexdist.emulator.local_runner import LocalBackendRunner
from vertexdist.emulator.pipeline_runner.cache import TaskCache
from vertexdist.emulator.pipeline_runner.lineage import PipelineLineage
from vertexdist.emulator.pipeline_runner.run import Workspace
from vertexdist.emulator.pipeline_runner.task_process import EnvironmentCache
from vertexdist.emulator.routes import EmulatorRoutes
from vertexdist.emulator.storage.mirror import STATE_FILE, StorageMirror
from vertexdist.emulator.storage.output_sync import publish_outputs
from vertexdist.emulator.storage.server import StorageEmulator
from vertexdist.emulator.storage.store import StoreError
from vertexdist.emulator.store import JobStore
from vertexdist.emulator.vertex.experiment_runs import log_experiment_run
from vertexdist.emulator.vertex.experiments import ExperimentsApi
from vertexdist.emulator.vertex.jobs import EmulatorService
from vertexdist.emulator.vertex.models import ModelRegistry
from vertexdist.emulator.vertex.operations import Operations
from vertexdist.emulator.vertex.pipelines import PipelineJobs
from vertexdist.emulator.vertex.tuning import TuningService
from vertexdist.errors import VertexdistError
from vertexdist.local import gcs_mount
from vertexdist.private_files import make_private_dir
from vertexdist.spec.fault_plan import FaultPlan
from vertexdist.wire.gcs_uri import GsUriError, is_gs_uri, local_gs_path, parse_gs_uri

if TYPE_CHECKING:
    from vertexdist.local.warm_pool import OwnedPool

_log = logging.getLogger(__name__)


class DataDirInUse(VertexdistError):
    """Another emulator serves the same data folder."""


def _lock_data_dir(data_dir: Path) -> IO[str]:
    """An exclusive lock on the data folder for this emulator's life.

    Two emulators on one folder would each mark the other's running jobs FAILED on start.
    """
    handle = open(data_dir / LOCK_FILE, "a+")  # noqa: SIM115 - held open until stop()
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        owner = handle.read().strip() or "another process"
        handle.close()
        raise DataDirInUse(
            f"{data_dir} is in use by another emulator ({owner})",
            hint="stop that one, or pick another folder (--data-dir / --emulator-data-dir)",
        ) from None
    handle.truncate(0)
    handle.write(f"pid {os.getpid()}\n")
    handle.flush()
    return handle


class Emulator:
    """Start with `start()` (or `with`); `vertex_endpoint` / `storage_endpoint` say where clients connect.

    `data_dir` keeps jobs, logs and buckets across restarts; without it everything lives in a temporary
    folder removed on `stop()`. `hold_get_s` > 0 makes a Get of an unfinished job wait up to that long for
    it to finish (see EmulatorService.get). `runner` defaults to the local backend; `procs_per_replica` is
    local-run's `--procs-per-replica` (None: the machine's GPUs per replica, 1 without, as local-run).
    `warm` > 0 starts replicas from a warm pool owned by this emulator, with that many children forked
    ahead (`local.warm_pool.OwnedPool`; started in `start()`, stopped in `stop()`). `provision_delay_s` > 0
    keeps each job PENDING that long before its replicas start, as Vertex provisioning machines; a job on an
    existing persistent resource starts without it.
    """

    def __init__(
        self,
        *,
        port: int = 0,
        gcs_port: int = 0,
        data_dir: Path | None = None,
        runner: JobRunner | None = None,
        hold_get_s: float = 0.0,
        procs_per_replica: int | None = None,
        verbose: bool = False,
        fault_plan: FaultPlan | None = None,
        warm: int = 0,
        provision_delay_s: float = 0.0,
    ) -> None:
        problem = not_emulated(fault_plan) if fault_plan is not None else None
        if problem is not None:
            raise VertexdistError(problem)
        self._task_env: dict[str, str] = dict(os.environ)  # a pipeline task's process environment
        self._temp = None if data_dir else Path(tempfile.mkdtemp(prefix="vertexdist-emulator-"))
        self.data_dir = Path(data_dir).resolve() if data_dir else self._temp
        assert self.data_dir is not None
        # Jobs' specs (env values and all), logs and outputs: for the user only, like a run folder.
        make_private_dir(self.data_dir)
        self._lock = _lock_data_dir(self.data_dir)
        service: EmulatorService | None = None
        self._local_runner: LocalBackendRunner | None = None
        try:
            self.storage = StorageEmulator(port=gcs_port, data_dir=self.data_dir / "storage")
            # What every job's replicas see at /gcs: the emulated Cloud Storage's objects, kept in step.
            self.mirror = StorageMirror(self.storage, self.data_dir / "gcs", self.data_dir / STATE_FILE)
            if runner is None:
                runner = self._local_runner = LocalBackendRunner(
                    package_cache=self.data_dir / "package-cache",
                    procs_per_replica=procs_per_replica,
                    fetch_object=self.storage.download,
                )
            self.store = JobStore(self.data_dir if data_dir else None)
            service = EmulatorService(
                self.store,
                runner,
                work_dir=self.data_dir,
                fetch_package=self._fetch,
                hold_get_s=hold_get_s,
                publish_outputs=self._publish,
                stage_inputs=self.mirror.pull,
                capacity=CapacityFaults(fault_plan) if fault_plan is not None else None,
                provision_delay_s=provision_delay_s,
            )
            self.service = service
            self.tuning = TuningService(service, work_dir=self.data_dir)
            self.http = VertexHTTPServer(self.service, port, verbose=verbose, tuning=self.tuning)
            self.models = ModelRegistry(self.store, publish=self._publish_artifacts, files_at=self._files_at)
            service.on_pipeline_success = self.models.upload_for_pipeline
            self.http.routes = EmulatorRoutes(service, self.models, Operations(self.store))
            self.http.experiments = ExperimentsApi(self.data_dir if data_dir else None)
            self.http.routes.pipelines = self.pipelines = PipelineJobs(
                self.store, service, self.http.routes.operations, self._pipeline_workspace()
            )
        except BaseException:
            # E.g. the port is taken: leave no supervisor thread, data-folder lock or temporary folder behind.
            if service is not None:
                service.close()
            self._release()
            raise
        self._running = False
        # `--warm N`: the local runner's replicas forked from a pool of this emulator's (started in start()).
        self.warm = warm
        self.warm_pool: OwnedPool | None = None

    def _start_warm_pool(self) -> None:
        from vertexdist.local.warm_pool import OwnedPool

        if self.warm <= 0 or self._local_runner is None:
            return
        assert self.data_dir is not None
        self.warm_pool = OwnedPool(self.warm, log=self.data_dir / "warm-pool.log").start()
        self._local_runner.spawner = self.warm_pool.spawner()

    def _stop_warm_pool(self) -> None:
        pool, self.warm_pool = self.warm_pool, None
        if pool is not None:
            pool.stop()
        if self._local_runner is not None:
            self._local_runner.spawner = None

    def _pipeline_workspace(self) -> Workspace:
        """Where PipelineJobs' tasks run: their folders, /gcs kept in step with the emulated Cloud Storage."""
        assert self.data_dir is not None
        lock = threading.Lock()

        def locked(sync: Callable[[], object]) -> Callable[[], object]:
            def call() -> object:
                with lock:
                    return sync()

            return call

        return Workspace(
            tasks_dir=self.data_dir / "pipelines",
            gcs_folder=self.data_dir / "gcs",
            envs=EnvironmentCache(self.data_dir / "pipeline-envs"),
            env=self._task_env,
            sync_in=locked(self.mirror.pull),
            sync_out=locked(self.mirror.push),
            cache=TaskCache(self.data_dir / "pipeline-cache.json"),
            create_job=self.service.create_custom_job,
            cancel_job=self.service.cancel,
            upload_model=self.models.upload,
            lineage=PipelineLineage(self.http.experiments.metadata),
        )

    def _fetch(self, uri: str, folder: Path) -> Path:
        key = hashlib.sha256(uri.encode()).hexdigest()[:16]
        return self.storage.download(uri, folder / key / uri.rsplit("/", 1)[-1])

    def _publish(self, spec: dict[str, Any]) -> list[str]:
        """What the job wrote through /gcs, as objects: everything it changed (`mirror.push`), its output
        folder checked too."""
        assert self.data_dir is not None
        self.mirror.push()
        problems = publish_outputs(self.storage, self.data_dir / "gcs", spec)
        log_experiment_run(self.http.experiments.store, spec, self.data_dir / "gcs")
        return problems

    def _files_at(self, uri: str) -> int:
        """How many files a job wrote under gs://B/p: through /gcs (the local folder), else with a storage
        client (the storage emulator's objects under the prefix); at most a few counted."""
        if not is_gs_uri(uri):
            return 1  # not a folder of ours to judge
        assert self.data_dir is not None
        try:
            folder = local_gs_path(uri, self.data_dir / "gcs")
        except GsUriError:
            return 1
        if folder.is_dir() and any(p.is_file() for p in folder.rglob("*")):
            return 1
        found = parse_gs_uri(uri)
        prefix = found.name.rstrip("/") + "/" if found.name else ""
        try:
            objects, _, _ = self.storage.store.list(found.bucket, prefix=prefix, max_results=1)
        except StoreError:  # no such bucket: nothing there
            return 0
        return len(objects)

    def _publish_artifacts(self, uri: str) -> int:
        """What replicas wrote under gs://B/p through the local folder (VERTEXDIST_GCS_ROOT), uploaded to
        the storage emulator, where the SDK and storage clients look for a model's files."""
        if not is_gs_uri(uri):
            return 0
        assert self.data_dir is not None
        gcs_root = self.data_dir / "gcs"
        folder = local_gs_path(uri, gcs_root)
        link = linked_folder(gcs_root, folder) if folder.is_relative_to(gcs_root) else folder
        if link is not None:  # as a job's outputs: a link is the job's, what it points to is not
            _log.warning("the model at %s is not published: %s is a symbolic link", uri, link)
            return 0
        return self.storage.publish_folder(folder, uri)

    @property
    def faults(self) -> RequestFaults:
        return self.http.faults

    @property
    def vertex_endpoint(self) -> str:
        return self.http.endpoint

    @property
    def storage_endpoint(self) -> str:
        return self.storage.endpoint

    def start(self) -> Emulator:
        try:
            self.storage.start()
            self.http.storage_endpoint = self.storage.endpoint  # what it answers to folder.ENDPOINTS_PATH
            if self._local_runner is not None:
                # Code in a job that uses google-cloud-storage reaches this emulator's, as on Vertex GCS.
                self._local_runner.replica_env["STORAGE_EMULATOR_HOST"] = self.storage.endpoint
                problem = gcs_mount.problem()
                if problem is not None:  # said once, here; each job's replicas fail with it at /gcs
                    _log.warning("warning: %s", problem)
            self._task_env["STORAGE_EMULATOR_HOST"] = self.storage.endpoint
            self._start_warm_pool()
            self.http.start()
            if self._temp is None and self.data_dir is not None:
                # So `vertexdist status ID --emulator` elsewhere reaches this one (emulator.folder).
                write_endpoints(self.data_dir, Endpoints(self.http.endpoint, self.storage.endpoint))
        except BaseException:
            self.stop()
            raise
        self._running = True
        return self

    def stop(self) -> None:
        """Stop serving, stop every running job's replicas, stop the storage thread (never leave it)."""
        try:
            self.http.stop()
            self.pipelines.close()
            self.tuning.close()
            self.service.close()
        finally:
            self._stop_warm_pool()
            self.storage.stop()
            self._running = False
            self._release()

    def _release(self) -> None:
        if self._temp is None and self.data_dir is not None:
            remove_endpoints(self.data_dir)
        self._lock.close()
        if self._temp is not None:
            shutil.rmtree(self._temp, ignore_errors=True)

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
