"""Trials as local jobs (`vertexdist.local`): what `local-run` does with a tuning template.

Each trial runs the trial's CustomJobSpec (`trials.trial_job_spec`) as a job of its own, in
`<run folder>/trials/<trial id>/`, with CLOUD_ML_TRIAL_ID, CLUSTER_SPEC `task.trial` and a metric file per
replica under `trials/<id>/hypertune/`. With GPUs on this machine the parallel trials share them out, each
taking its own (as each trial on Vertex gets its own machines).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vertexdist.backends.local.logs import keep_secrets
from vertexdist.local.environment import JobContext, hp_metric_file
from vertexdist.local.gpus import host_gpus
from vertexdist.local.launch import schedule
from vertexdist.local.request import build_request
from vertexdist.local.runner import JobState, LocalJob
from vertexdist.log_files import replica_tail
from vertexdist.private_files import make_private_dir
from vertexdist.render import secret_values
from vertexdist.tuning.driver import TrialEnd, metric_file_text
from vertexdist.tuning.study import TrialRecord
from vertexdist.tuning.trials import trial_job_spec
from vertexdist.wire.job_spec import parse_job_spec

CHIEF = "workerpool0-0"


def trial_default_output_uri(ctx: JobContext, trial_id: str) -> str | None:
    """Where a trial writes its outputs when the job names no baseOutputDirectory: its own folder under the
    run's default one, as Vertex puts each trial's under the job's (`<base>/<trial id>`)."""
    return f"{ctx.default_output_uri}/{trial_id}" if ctx.default_output_uri else None


def trial_context(job: JobContext, trial_id: str, metrics_dir: Path) -> JobContext:
    """The replicas' context of one trial: the job's (`backends.local.prepare.prepare_run`), with the
    trial's job id, CLOUD_ML_TRIAL_ID, metric files and default output folder."""
    return dataclasses.replace(
        job,
        job_id=f"{job.job_id}-{trial_id}",
        trial_id=trial_id,
        hp_metric_dir=str(metrics_dir),
        default_output_uri=trial_default_output_uri(job, trial_id),
    )


class GpuShares:
    """The host's GPUs cut into one share per parallel trial; a running trial holds one share."""

    def __init__(self, gpus: Sequence[str], parallel: int) -> None:
        per = len(gpus) // parallel if gpus else 0
        self._free = [list(gpus[i * per : (i + 1) * per]) for i in range(parallel)] if per else []
        self._lock = threading.Lock()

    def take(self) -> list[str] | None:
        """A share, or None: no GPUs here, or fewer than trials, so every trial sees them all."""
        with self._lock:
            return self._free.pop(0) if self._free else None

    def give_back(self, share: list[str] | None) -> None:
        if share is not None:
            with self._lock:
                self._free.append(share)


class LocalTrial:
    def __init__(self, job: LocalJob, metric_file: Path, run_dir: Path, release: Any) -> None:
        self.job = job
        self.custom_job: str | None = None
        self.run_dir = run_dir
        self._metric_file = metric_file
        self._release = release

    def poll(self) -> TrialEnd | None:
        state = self.job.state
        if not state.done:
            return None
        self._release()
        error = self.job.error
        if error is None:
            return TrialEnd(state is JobState.SUCCEEDED)
        message = error.message
        if state is JobState.FAILED and error.replica:
            message += replica_tail(self.job.log_paths().get(error.replica))  # its cause, as on Vertex
        return TrialEnd(False, message)

    def metrics_text(self) -> str:
        return metric_file_text(self._metric_file)

    def stop(self) -> None:
        self.job.cancel()

    def wait(self, timeout: float) -> bool:
        return self.job.wait(timeout) is not None


class LocalTrialLauncher:
    """Starts each trial of a tuning job as a local job of the same plan, like `local-run` runs a job."""

    def __init__(
        self,
        trial_job: Mapping[str, Any],
        ctx: JobContext,
        *,
        run_dir: Path,
        sdists: Mapping[str, Path],
        cache_dir: Path,
        parallel: int,
        grace_s: float = 5.0,
        timeout_s: float | None = None,
        gpus: Sequence[str] | None = None,
    ) -> None:
        self._spec = trial_job
        self._ctx = ctx
        self._run_dir = Path(run_dir)
        self._sdists = sdists
        self._cache_dir = cache_dir
        self._grace_s = grace_s
        self._timeout_s = timeout_s
        self._gpus = GpuShares(host_gpus() if gpus is None else gpus, parallel)
        self.trials: dict[str, LocalTrial] = {}

    def trial_dir(self, trial_id: str) -> Path:
        return self._run_dir / "trials" / trial_id

    def start(self, trial: TrialRecord) -> LocalTrial:
        folder = self.trial_dir(trial.id)
        metrics = folder / "hypertune"
        ctx = trial_context(self._ctx, trial.id, metrics)
        job = parse_job_spec(trial_job_spec(self._spec, trial.id, trial.args))
        share = self._gpus.take()
        try:
            request = build_request(
                job,
                ctx,
                run_dir=folder,
                sdists=self._sdists,
                cache_dir=self._cache_dir,
                gpus=share,
                display_name=f"trial {trial.id}",
            )
            make_private_dir(folder)
            keep_secrets(folder, secret_values(dict(job.raw)))  # so a trial's own logs are masked too
            local = schedule(request, grace_s=self._grace_s, timeout_s=self._timeout_s)
        except BaseException:
            self._gpus.give_back(share)
            raise
        released = threading.Event()

        def release() -> None:
            if not released.is_set():
                released.set()
                self._gpus.give_back(share)

        handle = LocalTrial(local, Path(hp_metric_file(str(metrics), CHIEF)), folder, release)
        self.trials[trial.id] = handle
        return handle
