"""What the controller asks of a backend for one attempt: create its job with a label, find a job by that
label (a create that reached the backend before the controller recorded it), read it, cancel it.

`VertexAttempts` runs each attempt through the submit service (`vertexdist.jobs.submit`) on the Vertex
backend: real Vertex, or an emulator at `--endpoint`/`VERTEX_API_ENDPOINT`. Each attempt's template is the
place's (a fallback may change the region), so each attempt resolves its own target.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from vertexdist.backends.base import JobStatus

if TYPE_CHECKING:
    from vertexdist.backends.config import Target
    from vertexdist.backends.vertex import VertexBackend
    from vertexdist.jobs.submit import SubmitHooks, Where
    from vertexdist.spec.models import JobTemplate

# The label every attempt's job carries: `<managed id>-a<attempt number>`.
MANAGED_LABEL = "vertexdist-managed"
FIND_LIMIT = 200


@dataclass(frozen=True)
class CreatedJob:
    name: str
    output_dir: str | None


class AttemptBackend(Protocol):
    def create(self, template: JobTemplate, label: str, resume_from: str | None) -> CreatedJob: ...

    def find(self, template: JobTemplate, label: str) -> CreatedJob | None: ...

    def describe(self, template: JobTemplate, name: str) -> JobStatus: ...

    def cancel(self, template: JobTemplate, name: str) -> None: ...


def output_dir_of(status: JobStatus) -> str | None:
    prefix = (status.spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    return prefix.rstrip("/") if isinstance(prefix, str) and prefix else None


def labelled(template: JobTemplate, label: str) -> JobTemplate:
    return template.model_copy(update={"labels": {**template.labels, MANAGED_LABEL: label}})


@dataclass
class VertexAttempts:
    """Attempts on the Vertex backend; `where` supplies the endpoint and transport, and the project, region
    and bucket where the place names none."""

    where: Where
    hooks: SubmitHooks | None = None
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    _backends: dict[tuple[str, str], VertexBackend] = field(default_factory=dict, repr=False)

    def _resolved(self, template: JobTemplate) -> tuple[JobTemplate, Target, VertexBackend]:
        """The place's template with its target (the place > flags > the environment), and its backend."""
        from vertexdist.jobs.find import vertex_backend
        from vertexdist.jobs.submit import Where, resolve_target

        where = Where(
            project=template.project or self.where.project,
            location=template.location or self.where.location,
            staging_bucket=template.staging_bucket or self.where.staging_bucket,
            endpoint=self.where.endpoint,
            transport=self.where.transport,
        )
        resolved, target = resolve_target(template, where, self.env)
        key = (target.project, target.location)
        if key not in self._backends:
            self._backends[key] = vertex_backend(target)
        return resolved, target, self._backends[key]

    def create(self, template: JobTemplate, label: str, resume_from: str | None) -> CreatedJob:
        from vertexdist.jobs.submit import SubmitHooks, SubmitRequest, SubmitSession

        resolved, target, _ = self._resolved(labelled(template, label))
        session = SubmitSession(
            resolved,
            target,
            request=SubmitRequest(resolved, allow_duplicate=True),
            hooks=self.hooks or SubmitHooks(),
            resume_from=resume_from,
            in_process=False,
        )
        submitted = session.submit()
        return CreatedJob(submitted.name, submitted.output_dir)

    def find(self, template: JobTemplate, label: str) -> CreatedJob | None:
        _, _, backend = self._resolved(template)
        for status in backend.list(limit=FIND_LIMIT):
            if status.labels.get(MANAGED_LABEL) == label:
                return CreatedJob(status.name, output_dir_of(backend.describe(status.name)))
        return None

    def describe(self, template: JobTemplate, name: str) -> JobStatus:
        _, _, backend = self._resolved(template)
        return backend.describe(name)

    def cancel(self, template: JobTemplate, name: str) -> None:
        _, _, backend = self._resolved(template)
        backend.cancel(name)
