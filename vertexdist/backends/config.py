"""Where submit and the job commands send requests: project, location, bucket, endpoints. Pure.

Precedence, highest first:
- project, location, staging bucket: flags (--project, --location, --staging-bucket), then the template, then
  environment (GOOGLE_CLOUD_PROJECT, GOOGLE_CLOUD_REGION) as a fallback. The template beats the environment
  because GOOGLE_CLOUD_PROJECT is often ambient (Cloud Shell sets it), and a template that names its project
  must not be sent elsewhere silently; a flag is an explicit choice, so it wins.
- endpoints and transport: flags (--endpoint, --transport), then environment (VERTEX_API_ENDPOINT,
  STORAGE_EMULATOR_HOST, VERTEXDIST_API_TRANSPORT); templates do not name endpoints.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from vertexdist.backends.base import LOCAL_PROJECT
from vertexdist.errors import UsageError

__all__ = ["LOCAL_PROJECT", "NO_PROJECT_HINT", "Target", "resolve_target"]

Transport = Literal["grpc", "rest"]
TRANSPORTS: tuple[Transport, ...] = ("grpc", "rest")
_NAME = re.compile(
    r"^projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/(?P<collection>trainingPipelines|customJobs|hyperparameterTuningJobs)/(?P<id>[^/]+)$"
)
# Printed by more than one command (submit, managed resume, ...): an option it names goes with its command.
NO_PROJECT_HINT = (
    "set GOOGLE_CLOUD_PROJECT or put `project:` in the template (`vertexdist submit --project PROJECT` names"
    " one too; `vertexdist submit --emulator` needs none)"
)


@dataclass(frozen=True)
class Target:
    project: str
    location: str
    staging_bucket: str | None = None
    api_endpoint: str | None = None  # None: Vertex's regional endpoint
    api_transport: Transport = "grpc"
    storage_endpoint: str | None = None

    @property
    def is_emulator(self) -> bool:
        """A plain-http loopback endpoint is the vertexdist emulator (Vertex itself is https only)."""
        return bool(self.api_endpoint and self.api_endpoint.startswith("http://"))

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.location}"

    @property
    def endpoint(self) -> str:
        return self.api_endpoint or f"{self.location}-aiplatform.googleapis.com"


def _first(*values: str | None) -> str | None:
    return next((v for v in values if v), None)


def resolve_target(
    *,
    env: Mapping[str, str],
    template_project: str | None = None,
    template_location: str | None = None,
    template_bucket: str | None = None,
    project: str | None = None,
    location: str | None = None,
    staging_bucket: str | None = None,
    api_endpoint: str | None = None,
    transport: str | None = None,
    require_project: bool = True,
    default_project: str | None = None,
    no_project_hint: str = NO_PROJECT_HINT,
) -> Target:
    """Combine flags, template and environment into one Target; UsageError when nothing names a project
    (and there is no `default_project`, as for an emulator)."""
    chosen_project = _first(project, template_project, env.get("GOOGLE_CLOUD_PROJECT"), default_project)
    if not chosen_project and require_project:
        raise UsageError("no Google Cloud project given", hint=no_project_hint)
    endpoint = _first(api_endpoint, env.get("VERTEX_API_ENDPOINT"))
    if endpoint:
        endpoint = check_endpoint(endpoint)
    chosen_transport = _first(transport, env.get("VERTEXDIST_API_TRANSPORT"))
    if chosen_transport is None:
        # The emulator speaks REST only; Vertex takes both, and gRPC is the SDK's default.
        chosen_transport = "rest" if endpoint and endpoint.startswith("http://") else "grpc"
    if chosen_transport not in TRANSPORTS:
        raise UsageError(f"unknown API transport {chosen_transport!r}", hint="use --transport grpc or rest")
    if chosen_transport == "grpc" and endpoint and endpoint.startswith("http://"):
        raise UsageError(
            f"{endpoint} is a plain-http endpoint, which only REST can use", hint="use --transport rest"
        )
    return Target(
        project=chosen_project or "",
        location=_first(location, template_location, env.get("GOOGLE_CLOUD_REGION")) or "us-central1",
        staging_bucket=_first(staging_bucket, template_bucket),
        api_endpoint=endpoint,
        api_transport=chosen_transport,
        storage_endpoint=env.get("STORAGE_EMULATOR_HOST") or None,
    )


def check_endpoint(endpoint: str) -> str:
    """The endpoint without surrounding space or a trailing slash; UsageError for one no client can use."""
    scheme, sep, rest = endpoint.strip().rpartition("://")
    rest = rest.rstrip("/")
    host, _, port = rest.rpartition(":") if ":" in rest and not rest.endswith("]") else (rest, "", "")
    problem = None
    if sep and scheme not in ("http", "https"):
        problem = f"scheme {scheme!r} is not http or https"
    elif not host or "/" in rest:
        problem = "expected [http://|https://]HOST[:PORT]"
    elif port and not (port.isdigit() and 0 < int(port) < 65536):
        problem = f"port {port!r} is not a port number"
    if problem:
        raise UsageError(
            f"API endpoint {endpoint!r} is not usable: {problem}",
            hint="use http://127.0.0.1:PORT for the emulator (what `vertexdist emulator start` prints),"
            " or unset VERTEX_API_ENDPOINT / drop --endpoint for Vertex AI",
        )
    return f"{scheme}{sep}{rest}"


def parse_job_name(name: str) -> dict[str, str] | None:
    """The parts of `projects/P/locations/L/{trainingPipelines|customJobs|hyperparameterTuningJobs}/ID`, or
    None for other text."""
    match = _NAME.match(name.strip())
    return match.groupdict() if match else None


def check_job_ref(ref: str) -> None:
    """UsageError unless `ref` is a full job name or a numeric id."""
    if not (parse_job_name(ref) or re.fullmatch(r"\d+", ref.strip())):
        raise UsageError(
            f"{ref!r} is not a job",
            hint="use the name submit printed (projects/P/locations/L/trainingPipelines/ID) or its ID",
        )


def job_name(ref: str, target: Target) -> str:
    """A full resource name from a full name or a bare id (taken as a TrainingPipeline, as submit makes)."""
    check_job_ref(ref)
    if parse_job_name(ref):
        return ref.strip()
    return f"{target.parent}/trainingPipelines/{ref.strip()}"
