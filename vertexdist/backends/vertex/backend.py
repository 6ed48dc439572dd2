"""The Vertex backend: the only place that talks to google-cloud-aiplatform / google-cloud-storage, lazily.

Uses the low-level GAPIC clients (`clients.Clients`) with an explicit endpoint, transport and credentials;
every call goes through one retry policy (`retry.Caller`). Calls are non-blocking; callers poll `describe`
at their own pace, not the SDK's 5 s. Logs come from Cloud Logging, or the `LogSource` it is given (`logs`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, MutableSequence, Sequence
from pathlib import Path
from typing import Any

from vertexdist.backends.base import (
    NO_OPTIONS,
    JobList,
    JobStatus,
    LogQuery,
    LogsPage,
    ReplicaInfo,
    StateChange,
    SubmitOptions,
)
from vertexdist.backends.config import Target
from vertexdist.backends.outputs import require_output_uri
from vertexdist.backends.vertex.clients import Clients
from vertexdist.backends.vertex.cloud_logging import CloudLoggingSource
from vertexdist.backends.vertex.logs import LogSource
from vertexdist.backends.vertex.outputs import GcsOutputs
from vertexdist.backends.vertex.request import REQUEST_HASH_LABEL, Submission, build_submission
from vertexdist.backends.vertex.retry import Caller, RetryPolicy
from vertexdist.backends.vertex.status import epoch, replicas_of, status_of, timeline_of
from vertexdist.backends.vertex.tuning_status import TuningStatus, tuning_status_of
from vertexdist.backends.vertex.upload import ProgressFn, upload_package
from vertexdist.errors import UsageError
from vertexdist.spec.models import JobTemplate

DEFAULT_PACKAGE_DIR = Path(".vertexdist/cache/sdist")
CALL_TIMEOUT_S = 60.0
_MESSAGES = {  # a collection's resource type in google.cloud.aiplatform_v1.types
    "trainingPipelines": "TrainingPipeline",
    "hyperparameterTuningJobs": "HyperparameterTuningJob",
    "customJobs": "CustomJob",
}


class VertexBackend:
    def __init__(
        self,
        target: Target,
        *,
        package_dir: Path = DEFAULT_PACKAGE_DIR,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clients: Clients | None = None,
        log_source: LogSource | None = None,
    ) -> None:
        self.target = target
        self._package_dir = Path(package_dir)
        self.clients = clients or Clients(target)
        self._call = Caller(target, retry, sleep)
        self.logs_source: LogSource = log_source or CloudLoggingSource(target)

    # --- submit -----------------------------------------------------------------------------------
    def dryrun(self, template: JobTemplate, options: SubmitOptions = NO_OPTIONS) -> Submission:
        """The exact request, with `options.image_uri` for a `build` template's pools; `options.resume_from`
        is the output folder (gs://) of the earlier job it continues."""
        return build_submission(
            template,
            package_dir=self._package_dir,
            image_uri=options.image_uri,
            resume_from=options.resume_from,
        )

    def recent_duplicates(self, submission: Submission, within_s: float) -> list[JobStatus]:
        """Pipelines created from the very same request in the last `within_s` seconds."""
        cutoff = time.time() - within_s
        return [s for s in self._same_request(submission) if s.create_time and epoch(s.create_time) >= cutoff]

    def _same_request(self, submission: Submission) -> list[JobStatus]:
        label_filter = f'labels.{REQUEST_HASH_LABEL}="{submission.request_hash}"'
        request = {"parent": submission.parent, "filter": label_filter}
        if submission.is_tuning:
            pager = self._call(
                "listing hyperparameter tuning jobs",
                lambda: self.clients.jobs.list_hyperparameter_tuning_jobs(
                    request=request, timeout=CALL_TIMEOUT_S
                ),
            )
        else:
            pager = self._call(
                "listing training pipelines",
                lambda: self.clients.pipelines.list_training_pipelines(
                    request=request, timeout=CALL_TIMEOUT_S
                ),
            )
        return [status_of(p, self.target) for p in pager]

    def upload(self, submission: Submission, progress: ProgressFn | None = None) -> bool:
        """Upload the sdist unless the bucket already holds it; True if uploaded."""
        return upload_package(submission, self.clients, self._call, progress)

    def schedule(self, request: Submission, options: SubmitOptions = NO_OPTIONS) -> str:
        """Create the TrainingPipeline (or HyperparameterTuningJob); a transient failure is retried without
        ever creating two.

        A request still naming the job-folder placeholder gets a fresh folder here (callers that show the
        folder fill it in first with `Submission.for_new_job`)."""
        request = request.for_new_job()
        started = time.time() - 5.0  # clock skew slack for matching a job the failed attempt may have made

        def already_created() -> str | None:
            for status in self._same_request(request):
                if status.create_time and epoch(status.create_time) >= started:
                    return status.name
            return None

        created = self._call(
            "creating the hyperparameter tuning job"
            if request.is_tuning
            else "creating the training pipeline",
            lambda: self._create(request),
            on_retry=already_created,
        )
        return created if isinstance(created, str) else str(created.name)

    def _create(self, request: Submission) -> Any:
        body = json.dumps(request.resource)
        if request.is_tuning:
            from google.cloud.aiplatform_v1.types import HyperparameterTuningJob

            return self.clients.jobs.create_hyperparameter_tuning_job(
                parent=request.parent,
                hyperparameter_tuning_job=HyperparameterTuningJob.from_json(body),
                timeout=CALL_TIMEOUT_S,
            )
        from google.cloud.aiplatform_v1.types import TrainingPipeline

        return self.clients.pipelines.create_training_pipeline(
            parent=request.parent, training_pipeline=TrainingPipeline.from_json(body), timeout=CALL_TIMEOUT_S
        )

    # --- jobs -------------------------------------------------------------------------------------
    def describe(self, name: str) -> JobStatus:
        if "/hyperparameterTuningJobs/" in name:
            return status_of(self._tuning_job(name), self.target)
        if "/customJobs/" in name:
            job = self._call(
                f"reading {name}", lambda: self.clients.jobs.get_custom_job(name=name, timeout=CALL_TIMEOUT_S)
            )
        else:
            job = self._call(
                f"reading {name}",
                lambda: self.clients.pipelines.get_training_pipeline(name=name, timeout=CALL_TIMEOUT_S),
            )
        return status_of(job, self.target)

    def _tuning_job(self, name: str) -> Any:
        return self._call(
            f"reading {name}",
            lambda: self.clients.jobs.get_hyperparameter_tuning_job(name=name, timeout=CALL_TIMEOUT_S),
        )

    def tuning(self, name: str) -> TuningStatus:
        """A tuning job's status with its study and its trials (what `vertexdist trials` shows)."""
        return tuning_status_of(self._tuning_job(name), self.target)

    def tuning_status(self, name: str) -> TuningStatus:
        """`tuning`, by the name every backend gives it (a local one's `tuning` is its tuning part)."""
        if "/hyperparameterTuningJobs/" not in name:
            raise UsageError(
                f"{name} is not a hyperparameter tuning job",
                hint="pass the name submit printed for a template with a `tuning:` section",
            )
        return self.tuning(name)

    def replicas(self, name: str) -> list[ReplicaInfo]:
        """The job's replicas from its spec, each in the job's state (Vertex reports none per replica)."""
        return replicas_of(self.describe(name))

    def timeline(self, name: str) -> list[StateChange]:
        """The job's creation, start and end, as Vertex reports them."""
        return timeline_of(self.describe(name))

    def list(self, limit: int = 50) -> list[JobStatus]:
        """TrainingPipelines, HyperparameterTuningJobs, then CustomJobs that neither owns (e.g. made with
        CustomJob.run), as a `JobList`: a job the SDK cannot read (a field out of its proto's range) is one
        problem line, and the others still list."""
        parent = self.target.parent
        found = JobList()
        request = {"parent": parent, "page_size": limit}
        pipelines = self._listed(
            "trainingPipelines",
            lambda: self.clients.pipelines.list_training_pipelines(request=request, timeout=CALL_TIMEOUT_S),
            limit,
            found.problems,
        )
        found += [status_of(p, self.target) for p in pipelines]
        owned = {s.backing_job for s in found if s.backing_job}
        tuning_jobs = self._listed(
            "hyperparameterTuningJobs",
            lambda: self.clients.jobs.list_hyperparameter_tuning_jobs(
                request=request, timeout=CALL_TIMEOUT_S
            ),
            limit,
            found.problems,
        )
        for job in tuning_jobs:
            found.append(status_of(job, self.target))
            owned |= {trial.custom_job for trial in job.trials if trial.custom_job}
        jobs = self._listed(
            "customJobs",
            lambda: self.clients.jobs.list_custom_jobs(request=request, timeout=CALL_TIMEOUT_S),
            limit,
            found.problems,
        )
        found += [status_of(j, self.target) for j in jobs if j.name not in owned]
        found.sort(key=lambda s: s.create_time or "", reverse=True)
        del found[limit:]
        return found

    def _listed(
        self, collection: str, call: Callable[[], Any], limit: int, problems: MutableSequence[str]
    ) -> Sequence[Any]:
        """Up to `limit` resources of one collection. A page the SDK cannot parse (later pages are fetched
        while iterating, so at any point) is read again one resource at a time over REST (`listing`);
        where that is not possible, it is one problem line for the collection."""
        from google.protobuf.json_format import ParseError

        items: list[Any] = []
        try:
            pager = self._call(f"listing {collection}", call)
            for _, item in zip(range(limit), pager, strict=False):
                items.append(item)
        except ParseError as exc:
            if self.target.api_transport == "rest":
                from google.cloud.aiplatform_v1 import types

                from vertexdist.backends.vertex.listing import read_one_by_one

                message = getattr(types, _MESSAGES[collection])
                try:
                    found, unreadable = read_one_by_one(
                        self.target, collection, message, limit, CALL_TIMEOUT_S
                    )
                except Exception as again:  # the raw read failed too: say so for the whole collection
                    problems.append(f"listing {collection}: an answer could not be read ({exc}; {again})")
                else:
                    problems.extend(unreadable)
                    return found
            else:
                problems.append(
                    f"listing {collection}: an answer could not be read, so some are not shown: {exc}"
                )
        return items

    def cancel(self, name: str) -> None:
        if "/hyperparameterTuningJobs/" in name:
            self._call(
                f"cancelling {name}",
                lambda: self.clients.jobs.cancel_hyperparameter_tuning_job(name=name, timeout=CALL_TIMEOUT_S),
            )
        elif "/customJobs/" in name:
            self._call(
                f"cancelling {name}",
                lambda: self.clients.jobs.cancel_custom_job(name=name, timeout=CALL_TIMEOUT_S),
            )
        else:
            self._call(
                f"cancelling {name}",
                lambda: self.clients.pipelines.cancel_training_pipeline(name=name, timeout=CALL_TIMEOUT_S),
            )

    def outputs(self, name: str) -> GcsOutputs:
        """The job's output folder in Cloud Storage (the emulator's storage for an emulator job)."""
        uri = require_output_uri(name, self.describe(name).spec)
        if self.target.is_emulator and not self.target.storage_endpoint:
            raise UsageError(
                "an emulator job's outputs are in the emulator's Cloud Storage, and STORAGE_EMULATOR_HOST"
                " is not set",
                hint="set it to what `vertexdist emulator start` printed",
            )
        return GcsOutputs(uri, self.clients.storage, self._call.for_storage())

    def logs(self, name: str, cursor: object | None = None, query: LogQuery | None = None) -> LogsPage:
        """Replica log lines after `cursor`, from Cloud Logging (or the source the backend was given)."""
        return self._call(
            f"reading the logs of {name}",
            lambda: self.logs_source.read(name, cursor, query or LogQuery(), lambda: self.describe(name)),
        )
