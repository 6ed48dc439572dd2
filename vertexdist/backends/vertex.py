"""The Vertex backend: the only module that imports google-cloud-aiplatform / google-cloud-storage, lazily.

Uses the low-level GAPIC clients (`aiplatform_v1.PipelineServiceClient`, `JobServiceClient`) with an explicit
endpoint, transport and credentials (reference/sdk-offline.md): against the emulator, REST on
`http://127.0.0.1:P` with AnonymousCredentials; against Vertex, the regional endpoint with application
default credentials. Calls are non-blocking; callers poll `describe` at their own pace, not the SDK's 5 s.
"""

from __future__ import annotations

import json
import logging
import random
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from vertexdist.backends.base import JobStatus, LogChunk, LogsPage, Submission
from vertexdist.backends.config import Target, parse_job_name
from vertexdist.backends.errors import ApiCallError, api_error, is_refused, is_transient, status_of
from vertexdist.backends.submission import REQUEST_HASH_LABEL, build_submission
from vertexdist.render import MASK, is_secret_name, mask_secrets
from vertexdist.spec.models import JobTemplate

DEFAULT_PACKAGE_DIR = Path(".vertexdist/cache/sdist")
CALL_TIMEOUT_S = 60.0
UPLOAD_CHUNK = 4 * 1024 * 1024  # resumable-upload chunk (a multiple of 256 KiB); gives the bar its steps
ProgressFn = Callable[[int, int], None]


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter (https://cloud.google.com/storage/docs/retry-strategy)."""

    attempts: int = 6
    initial_s: float = 0.5
    max_s: float = 16.0
    multiplier: float = 2.0

    def delays(self) -> list[float]:
        return [
            random.uniform(0.5, 1.0) * min(self.max_s, self.initial_s * self.multiplier**n)
            for n in range(self.attempts - 1)
        ]


def quiet_sdk_logging() -> None:
    """Keep the SDK's INFO logging off stdout (it attaches stdout handlers unless one exists on the root)."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setLevel(logging.WARNING)
        root.addHandler(handler)


def _short_state(state: str) -> str:
    return state.removeprefix("PIPELINE_STATE_").removeprefix("JOB_STATE_")


def _camel_spec(inputs: Any) -> dict[str, Any]:
    """TrainingPipeline inputs as a CustomJobSpec dict (the SDK writes snake_case keys, floats for ints)."""
    from vertexdist.emulator.wire import normalize_job_spec

    if not isinstance(inputs, dict):
        return {}
    try:
        return normalize_job_spec(inputs)
    except ValueError:
        return inputs


class VertexBackend:
    def __init__(
        self,
        target: Target,
        *,
        package_dir: Path = DEFAULT_PACKAGE_DIR,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.target = target
        self._package_dir = Path(package_dir)
        self._retry = retry or RetryPolicy()
        self._sleep = sleep
        self._pipelines: Any = None
        self._jobs: Any = None

    # --- clients ----------------------------------------------------------------------------------
    def _credentials(self) -> Any:
        if self.target.is_emulator:
            from google.auth.credentials import AnonymousCredentials

            return AnonymousCredentials()
        import google.auth
        import google.auth.exceptions

        try:
            credentials, _ = google.auth.default()
        except google.auth.exceptions.DefaultCredentialsError:
            raise ApiCallError(
                "no Google Cloud credentials found",
                "sign in with `gcloud auth application-default login`, or try it offline with --emulator",
                401,
            ) from None
        return credentials

    def _client_kwargs(self) -> dict[str, Any]:
        return {
            "transport": self.target.api_transport,
            "client_options": {"api_endpoint": self.target.endpoint},
            "credentials": self._credentials(),
        }

    @property
    def pipelines(self) -> Any:
        if self._pipelines is None:
            quiet_sdk_logging()
            from google.cloud.aiplatform_v1.services.pipeline_service import PipelineServiceClient

            self._pipelines = PipelineServiceClient(**self._client_kwargs())
        return self._pipelines

    @property
    def jobs(self) -> Any:
        if self._jobs is None:
            quiet_sdk_logging()
            from google.cloud.aiplatform_v1.services.job_service import JobServiceClient

            self._jobs = JobServiceClient(**self._client_kwargs())
        return self._jobs

    def _call(self, what: str, fn: Callable[[], Any], *, on_retry: Callable[[], Any] | None = None) -> Any:
        """Run one API call; retry transient failures with backoff; turn failures into ApiCallError.

        `on_retry` runs before each retry and may return a result instead (create uses it to find a job
        that the failed attempt created after all).
        """
        delays = self._retry.delays()
        for attempt in range(len(delays) + 1):
            try:
                return fn()
            except ApiCallError:
                raise
            except Exception as exc:
                if type(exc).__module__.startswith("google.auth"):
                    hint = "sign in again: gcloud auth application-default login"
                    raise ApiCallError(f"{what} failed: credentials: {exc}", hint, 401) from exc
                if status_of(exc) is None and not isinstance(exc, OSError):
                    raise  # not an answer from the service: a bug, shown as one
                # A local emulator that refuses connections is not running; backing off will not start it.
                emulator_down = self.target.is_emulator and is_refused(exc)
                if not is_transient(exc) or emulator_down or attempt == len(delays):
                    raise api_error(
                        exc, what, self.target.project, self.target.location, endpoint=self.target.endpoint
                    ) from exc
                self._sleep(delays[attempt])
                if on_retry is not None:
                    found = on_retry()
                    if found is not None:
                        return found
        raise AssertionError("unreachable")

    # --- submit -----------------------------------------------------------------------------------
    def dryrun(self, template: JobTemplate, *, image_uri: str | None = None) -> Submission:
        return build_submission(template, package_dir=self._package_dir, image_uri=image_uri)

    def recent_duplicates(self, submission: Submission, within_s: float) -> list[JobStatus]:
        """Pipelines created from the very same request in the last `within_s` seconds."""
        cutoff = time.time() - within_s
        return [
            s for s in self._same_request(submission) if s.create_time and _epoch(s.create_time) >= cutoff
        ]

    def _same_request(self, submission: Submission) -> list[JobStatus]:
        label_filter = f'labels.{REQUEST_HASH_LABEL}="{submission.request_hash}"'
        pager = self._call(
            "listing training pipelines",
            lambda: self.pipelines.list_training_pipelines(
                request={"parent": submission.parent, "filter": label_filter}, timeout=CALL_TIMEOUT_S
            ),
        )
        return [self._status(p) for p in pager]

    def upload(self, submission: Submission, progress: ProgressFn | None = None) -> bool:
        """Upload the sdist unless the bucket already holds it (same digest, same URI); True if uploaded."""
        if submission.package_path is None or submission.package_uri is None:
            return False
        bucket_name, _, blob_name = submission.package_uri.removeprefix("gs://").partition("/")
        client = self._storage_client()
        bucket = client.bucket(bucket_name)
        blob = bucket.blob(blob_name)
        what = f"uploading {submission.package_uri}"
        try:
            if self._call(f"checking {submission.package_uri}", blob.exists):
                return False
            if self.target.is_emulator and not self._call("checking the bucket", bucket.exists):
                self._call("creating the emulated bucket", lambda: client.create_bucket(bucket_name))
            size = submission.package_path.stat().st_size
            if size > UPLOAD_CHUNK:
                blob.chunk_size = UPLOAD_CHUNK
            with open(submission.package_path, "rb") as handle:
                reader = _ProgressReader(handle, size, progress)
                self._call(what, lambda: blob.upload_from_file(reader, size=size, rewind=True))
        except ApiCallError as exc:
            if exc.status != 404:
                raise
            create = f"gcloud storage buckets create gs://{bucket_name} --location={self.target.location}"
            raise ApiCallError(
                f"bucket gs://{bucket_name} does not exist", f"create it: {create}", 404
            ) from None
        return True

    def _storage_client(self) -> Any:
        from google.cloud import storage  # type: ignore[attr-defined]

        if self.target.storage_endpoint:
            return storage.Client(
                project=self.target.project or "emulator",
                credentials=self._credentials() if self.target.is_emulator else None,
                client_options={"api_endpoint": self.target.storage_endpoint},
            )
        return storage.Client(project=self.target.project, credentials=self._credentials())

    def schedule(self, submission: Submission) -> str:
        """Create the TrainingPipeline; a transient failure is retried without ever creating two."""
        from google.cloud.aiplatform_v1.types import TrainingPipeline

        body = TrainingPipeline.from_json(json.dumps(submission.request["trainingPipeline"]))
        started = time.time() - 5.0  # clock skew slack for matching a job the failed attempt may have made

        def already_created() -> str | None:
            for status in self._same_request(submission):
                if status.create_time and _epoch(status.create_time) >= started:
                    return status.name
            return None

        created = self._call(
            "creating the training pipeline",
            lambda: self.pipelines.create_training_pipeline(
                parent=submission.parent, training_pipeline=body, timeout=CALL_TIMEOUT_S
            ),
            on_retry=already_created,
        )
        return created if isinstance(created, str) else str(created.name)

    # --- jobs -------------------------------------------------------------------------------------
    def describe(self, name: str) -> JobStatus:
        if "/customJobs/" in name:
            job = self._call(
                f"reading {name}", lambda: self.jobs.get_custom_job(name=name, timeout=CALL_TIMEOUT_S)
            )
        else:
            job = self._call(
                f"reading {name}",
                lambda: self.pipelines.get_training_pipeline(name=name, timeout=CALL_TIMEOUT_S),
            )
        return self._status(job)

    def list(self, limit: int = 50) -> list[JobStatus]:
        """TrainingPipelines, then CustomJobs that no listed pipeline owns (e.g. made with CustomJob.run)."""
        parent = self.target.parent
        pipelines = self._call(
            "listing training pipelines",
            lambda: self.pipelines.list_training_pipelines(
                request={"parent": parent, "page_size": limit}, timeout=CALL_TIMEOUT_S
            ),
        )
        found = [self._status(p) for _, p in zip(range(limit), pipelines, strict=False)]
        owned = {s.backing_job for s in found if s.backing_job}
        jobs = self._call(
            "listing custom jobs",
            lambda: self.jobs.list_custom_jobs(
                request={"parent": parent, "page_size": limit}, timeout=CALL_TIMEOUT_S
            ),
        )
        found += [self._status(j) for _, j in zip(range(limit), jobs, strict=False) if j.name not in owned]
        found.sort(key=lambda s: s.create_time or "", reverse=True)
        return found[:limit]

    def cancel(self, name: str) -> None:
        if "/customJobs/" in name:
            self._call(
                f"cancelling {name}", lambda: self.jobs.cancel_custom_job(name=name, timeout=CALL_TIMEOUT_S)
            )
        else:
            self._call(
                f"cancelling {name}",
                lambda: self.pipelines.cancel_training_pipeline(name=name, timeout=CALL_TIMEOUT_S),
            )

    def logs(self, name: str, offsets: dict[str, int] | None = None) -> LogsPage:
        """Replica logs from the emulator; for Vertex, where Cloud Logging shows them."""
        if self.target.is_emulator:
            return self._emulator_logs(name, offsets or {})
        status = self.describe(name)
        job = status.backing_job or (name if "/customJobs/" in name else None)
        if job is None:
            return LogsPage(chunks=[], links=[status.console_url or ""])
        parts = parse_job_name(job) or {}
        query = quote(f'resource.type="ml_job"\nresource.labels.job_id="{parts.get("id", "")}"', safe="")
        link = f"https://console.cloud.google.com/logs/query;query={query}?project={parts.get('project', '')}"
        return LogsPage(chunks=[], links=[link])

    def _emulator_logs(self, name: str, offsets: dict[str, int]) -> LogsPage:
        params = urlencode({f"offset.{replica}": offset for replica, offset in offsets.items()})
        url = f"{self.target.endpoint}/vertexdist/v1/{name}/logs" + (f"?{params}" if params else "")

        def fetch() -> dict[str, Any]:
            try:
                with urllib.request.urlopen(url, timeout=CALL_TIMEOUT_S) as response:
                    return dict(json.loads(response.read()))
            except urllib.error.HTTPError as exc:
                body = json.loads(exc.read() or b"{}").get("error", {})
                raise _HttpError(exc.code, body.get("message", str(exc))) from None

        data = self._call(f"reading the logs of {name}", fetch)
        chunks = [LogChunk(c["replica"], c["text"], int(c["nextOffset"])) for c in data.get("logs", [])]
        return LogsPage(chunks=chunks)

    # --- conversion -------------------------------------------------------------------------------
    def _status(self, resource: Any) -> JobStatus:
        from google.protobuf import json_format

        data: dict[str, Any] = json_format.MessageToDict(type(resource).pb(resource))
        name = str(data.get("name", ""))
        parts = parse_job_name(name) or {}
        if "trainingTaskInputs" in data:
            spec = _camel_spec(data["trainingTaskInputs"])
        else:
            spec = data.get("jobSpec", {})
        error = data.get("error") or {}
        console = None
        if not self.target.is_emulator and parts:
            kind = "training" if parts["collection"] == "trainingPipelines" else "training/custom-jobs"
            console = (
                f"https://console.cloud.google.com/vertex-ai/locations/{parts['location']}/{kind}/"
                f"{parts['id']}?project={parts['project']}"
            )
        secrets = _secret_values(spec)
        # Vertex (and the emulator) put the failing replica's last log lines in the message.
        message = mask_text(str(error["message"]), secrets) if error.get("message") else None
        return JobStatus(
            name=name,
            display_name=str(data.get("displayName", "")),
            state=_short_state(str(data.get("state", "STATE_UNSPECIFIED"))),
            create_time=data.get("createTime"),
            start_time=data.get("startTime"),
            end_time=data.get("endTime"),
            error=message,
            backing_job=(data.get("trainingTaskMetadata") or {}).get("backingCustomJob"),
            labels=dict(data.get("labels") or {}),
            console_url=console,
            spec=mask_secrets(spec),
            secret_values=secrets,
        )


class _HttpError(Exception):
    """An emulator extension call failed; `code`/`message` as google.api_core exceptions carry them."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _ProgressReader:
    """A file wrapper that reports bytes read, for the upload bar."""

    def __init__(self, handle: Any, size: int, progress: ProgressFn | None) -> None:
        self._handle = handle
        self._size = size
        self._progress = progress

    def read(self, n: int = -1) -> bytes:
        data: bytes = self._handle.read(n)
        if self._progress is not None:
            self._progress(self._handle.tell(), self._size)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(self._handle.seek(offset, whence))

    def tell(self) -> int:
        return int(self._handle.tell())


def _secret_values(spec: dict[str, Any]) -> tuple[str, ...]:
    values = []
    for pool in spec.get("workerPoolSpecs") or []:
        code = (pool or {}).get("pythonPackageSpec") or (pool or {}).get("containerSpec") or {}
        for entry in code.get("env") or []:
            if is_secret_name(str(entry.get("name", ""))) and entry.get("value"):
                values.append(str(entry["value"]))
    return tuple(dict.fromkeys(values))


def mask_text(text: str, secrets: tuple[str, ...]) -> str:
    """Log text with every secret value replaced (longest first, so overlapping values stay hidden)."""
    for value in sorted(secrets, key=len, reverse=True):
        text = text.replace(value, MASK)
    return text


def _epoch(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
