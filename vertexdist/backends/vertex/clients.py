"""The GAPIC clients the Vertex backend talks through, made on first use (google-cloud-aiplatform is slow to
import). Against the emulator: REST on `http://127.0.0.1:P` with AnonymousCredentials; against Vertex: the
regional endpoint with application default credentials (docs/reference/sdk-offline.md §2). Tests and tools may
pass their own clients instead.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from vertexdist.backends.config import Target
from vertexdist.backends.vertex.credentials import default_credentials


def quiet_sdk_logging() -> None:
    """Keep the SDK's INFO logging off stdout (it attaches stdout handlers unless one exists on the root)."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setLevel(logging.WARNING)
        root.addHandler(handler)


def credentials_for(target: Target) -> Any:
    if target.is_emulator:
        from google.auth.credentials import AnonymousCredentials

        return AnonymousCredentials()
    return default_credentials()


class Clients:
    """PipelineService, JobService and Cloud Storage clients for one target, each made on first use."""

    def __init__(
        self, target: Target, *, pipelines: Any = None, jobs: Any = None, storage: Any = None
    ) -> None:
        self.target = target
        self._pipelines = pipelines
        self._jobs = jobs
        self._storage = storage

    def _kwargs(self) -> dict[str, Any]:
        return {
            "transport": self.target.api_transport,
            "client_options": {"api_endpoint": self.target.endpoint},
            "credentials": credentials_for(self.target),
        }

    @property
    def pipelines(self) -> Any:
        if self._pipelines is None:
            kwargs = self._kwargs()  # no credentials: said before seconds of importing the client
            quiet_sdk_logging()
            from google.cloud.aiplatform_v1.services.pipeline_service import PipelineServiceClient

            self._pipelines = PipelineServiceClient(**kwargs)
        return self._pipelines

    @property
    def jobs(self) -> Any:
        if self._jobs is None:
            kwargs = self._kwargs()
            quiet_sdk_logging()
            from google.cloud.aiplatform_v1.services.job_service import JobServiceClient

            self._jobs = JobServiceClient(**kwargs)
        return self._jobs

    @property
    def storage(self) -> Any:
        if self._storage is None:
            target = self.target
            if target.storage_endpoint:
                credentials = credentials_for(target) if target.is_emulator else None
            else:
                credentials = credentials_for(target)  # before the import, as for the other clients
            from google.cloud import storage  # type: ignore[attr-defined]

            if target.storage_endpoint:
                self._storage = storage.Client(
                    project=target.project or "emulator",
                    credentials=credentials,
                    client_options={"api_endpoint": target.storage_endpoint},
                )
            else:
                self._storage = storage.Client(project=target.project, credentials=credentials)
        return self._storage
