"""The few Compute Engine metadata-server paths google-auth reads, on loopback, for one job's replicas.

On Vertex a replica's code gets its project and its service account's token from the metadata server
(https://cloud.google.com/compute/docs/metadata/predefined-metadata-keys); google-auth finds it through
`GCE_METADATA_HOST` / `GCE_METADATA_IP` (google/auth/compute_engine/_metadata.py): a ping of `/` that must
answer 200 with `Metadata-Flavor: Google`, then `computeMetadata/v1/project/project-id`,
`instance/service-accounts/default/?recursive=true` and `.../token`. Requests without the
`Metadata-Flavor: Google` header are refused with 403, as on GCE. Tokens are dummies: nothing checks them.
Only the user who started the job is answered, at the server's own address (`loopback_server.GuardedHandler`):
another user of the host cannot take the job's token.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from vertexdist.loopback_server import GuardedHandler, LoopbackServer
from vertexdist.wire.projects import project_number

_ROOT = "/computeMetadata/v1/"
TOKEN_LIFETIME_S = 3599
DEFAULT_SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)


@dataclass(frozen=True)
class JobIdentity:
    """Who a job's code runs as: its project, region and service account."""

    project: str
    region: str
    job_id: str
    service_account: str = ""

    @property
    def email(self) -> str:
        # Vertex's default for custom training: the Custom Code Service Agent of the project.
        return self.service_account or f"service-{self.project}@gcp-sa-aiplatform-cc.iam.gserviceaccount.com"

    @property
    def project_number(self) -> str:
        """A stable 12-digit stand-in for the project number (the emulator knows projects by id)."""
        return project_number(self.project)


def metadata_answer(identity: JobIdentity, path: str, query: Mapping[str, str]) -> tuple[int, str, Any]:
    """(status, content type, body) for one metadata path (pure)."""
    if path in ("", "/"):
        return 200, "application/text", "computeMetadata/\n"
    if not path.startswith(_ROOT):
        return 404, "text/html", "Not Found"
    key = path.removeprefix(_ROOT).rstrip("/")
    accounts = {"default", identity.email}
    text: dict[str, str] = {
        "project/project-id": identity.project,
        "project/numeric-project-id": identity.project_number,
        "instance/zone": f"projects/{identity.project_number}/zones/{identity.region}-a",
        "instance/hostname": f"{identity.job_id}.{identity.region}.vertexdist.internal",
        "universe/universe-domain": "googleapis.com",
        "instance/service-accounts": "default/\n" + identity.email + "/\n",
    }
    if key in text:
        return 200, "application/text", text[key]
    parts = key.split("/")
    if len(parts) >= 3 and parts[:2] == ["instance", "service-accounts"] and parts[2] in accounts:
        info = {"aliases": ["default"], "email": identity.email, "scopes": list(DEFAULT_SCOPES)}
        leaf = "/".join(parts[3:])
        if leaf == "":
            if query.get("recursive") == "true":
                return 200, "application/json", info
            return 200, "application/text", "aliases\nemail\nidentity\nscopes\ntoken\n"
        if leaf == "email":
            return 200, "application/text", identity.email
        if leaf == "aliases":
            return 200, "application/text", "default"
        if leaf == "scopes":
            return 200, "application/text", "\n".join(DEFAULT_SCOPES)
        if leaf == "token":
            token = {
                "access_token": f"ya29.vertexdist-local-{identity.job_id}",
                "expires_in": TOKEN_LIFETIME_S,
                "token_type": "Bearer",
            }
            return 200, "application/json", token
    return 404, "text/html", f"metadata key {key!r} is not served by the local metadata server"


class _Handler(GuardedHandler):
    server: MetadataServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a replica's every credential refresh is not news

    def do_GET(self) -> None:
        split = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        if self.headers.get("Metadata-Flavor") != "Google" or self.headers.get("X-Forwarded-For"):
            status, kind, body = 403, "text/html", "Missing required header: Metadata-Flavor: Google"
        else:
            status, kind, body = metadata_answer(self.server.identity, split.path, query)
        data = (json.dumps(body) if kind == "application/json" else str(body)).encode()
        self.send_response(status)
        self.send_header("Metadata-Flavor", "Google")
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class MetadataServer(LoopbackServer):
    """One job's metadata server on 127.0.0.1 (any free port); `env()` points its replicas at it."""

    thread_name = "metadata-server"

    def __init__(self, identity: JobIdentity) -> None:
        super().__init__(0, _Handler)
        self.identity = identity

    def env(self) -> dict[str, str]:
        """google-auth's variables for this server; NO_GCE_CHECK is turned off, or it would never look."""
        return {"GCE_METADATA_HOST": self.address, "GCE_METADATA_IP": self.address, "NO_GCE_CHECK": "false"}
