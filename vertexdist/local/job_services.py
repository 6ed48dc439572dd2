"""What a local job's replicas reach besides each other, as on Vertex: the metadata server of their
service account (`metadata_server`), endpoints the runner adds (the emulator's Cloud Storage), and gs:// for
every client: the emulator's Cloud Storage, or, for a job the emulator does not run, the job's own gs://
folder served (`gcs_server`), with the variables that send google-cloud-storage, gcsfs and pyarrow there
(`gcs_server.storage_env`).

Started while the job is PENDING, after its plan is made, and stopped when it ends. With a metadata
server, the host's own Application Default Credentials are hidden from the replicas (GOOGLE_APPLICATION_
CREDENTIALS dropped, gcloud's config folder pointed at an empty one), so `google.auth.default()` finds the
job's service account there, as it would on Vertex, not the developer's account.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from vertexdist.local.gcs_server import FolderStorageServer, storage_env
from vertexdist.local.metadata_server import JobIdentity, MetadataServer
from vertexdist.local.plan import LaunchPlan

_HOST_CREDENTIALS = ("GOOGLE_APPLICATION_CREDENTIALS",)
EMULATOR_STORAGE = "STORAGE_EMULATOR_HOST"
UPLOADS_DIR = ".gcs-uploads"  # in the run folder: uploads to the job's gs:// under way


def replica_base_env(hide_host_credentials: bool) -> dict[str, str]:
    """The host environment replicas start from; without the host's own credentials when they have a
    metadata server of their own."""
    host = dict(os.environ)
    if hide_host_credentials:
        for key in _HOST_CREDENTIALS:
            host.pop(key, None)
    return host


def plan_with_env(plan: LaunchPlan, extra: Mapping[str, str]) -> LaunchPlan:
    """`plan` with `extra` in every replica's environment, over the pool's own values (pure)."""
    if not extra:
        return plan
    return replace(plan, replicas=tuple(replace(r, env={**r.env, **extra}) for r in plan.replicas))


@dataclass
class JobServices:
    identity: JobIdentity | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    _server: MetadataServer | None = field(default=None, init=False, repr=False)
    _storage: FolderStorageServer | None = field(default=None, init=False, repr=False)

    def base_env(self) -> dict[str, str]:
        return replica_base_env(self.identity is not None)

    def start(self, plan: LaunchPlan) -> LaunchPlan:
        extra = dict(self.env)
        metadata_root: str | None = None
        if self.identity is not None:
            self._server = MetadataServer(self.identity).start()
            extra.update(self._server.env())
            extra["CLOUDSDK_CONFIG"] = str(plan.run_dir / "gcloud-config")  # empty: no user ADC file
            metadata_root = self._server.address
        if self.env.get(EMULATOR_STORAGE):
            extra.update(storage_env(self.env[EMULATOR_STORAGE], metadata_root))
        elif plan.gcs_root is not None:
            identity = self.identity or JobIdentity("local", "local", plan.job_id)
            self._storage = FolderStorageServer(plan.gcs_root, plan.run_dir / UPLOADS_DIR, identity).start()
            extra.update(storage_env(self._storage.endpoint, metadata_root or self._storage.address))
        return plan_with_env(plan, extra)

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
        if self._storage is not None:
            self._storage.stop()
            self._storage = None
