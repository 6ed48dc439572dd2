"""The dry run: template -> the exact CreateTrainingPipeline body submit sends, plus its package. No SDK.

`render_request` builds the body, its `vertexdist-request` hash label included, so `render --request` and
`submit --dry-run` print the same bytes. That body names the job's own output folder by a placeholder
(`render.JOB_FOLDER`); `Submission.for_new_job` fills it in with a fresh UTC-time-and-random folder when the
job is created, and leaves the hash label as rendered (see `vertexdist.render`).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from vertexdist.packaging import build_sdist, package_uri
from vertexdist.render import (
    JOB_FOLDER,
    REQUEST_HASH_LABEL,
    REQUEST_RESOURCES,
    output_dir_of,
    render_request,
    request_hash,
    with_job_folder,
)
from vertexdist.render.health_mark import has_mark, with_mark
from vertexdist.spec.models import JobTemplate


def new_job_folder() -> str:
    """A job folder no other job has: UTC time (sorts by start) and 24 random bits."""
    return time.strftime("%Y%m%d-%H%M%S-", time.gmtime()) + secrets.token_hex(3)


@dataclass(frozen=True)
class Submission:
    """A request ready to send, with the package it refers to (None for container jobs)."""

    # The CreateTrainingPipeline body {"parent", "trainingPipeline"}, or for a tuning template the
    # CreateHyperparameterTuningJob body {"parent", "hyperparameterTuningJob"}.
    request: dict[str, Any]
    request_hash: str
    package_path: Path | None = None
    package_uri: str | None = None

    @property
    def parent(self) -> str:
        return str(self.request["parent"])

    @property
    def is_tuning(self) -> bool:
        return "hyperparameterTuningJob" in self.request

    @property
    def resource(self) -> dict[str, Any]:
        """The resource the request creates (the TrainingPipeline or the HyperparameterTuningJob)."""
        return dict(self.request["hyperparameterTuningJob" if self.is_tuning else "trainingPipeline"])

    @property
    def output_dir(self) -> str | None:
        """The job's output folder (baseOutputDirectory), `<job-folder>` until `for_new_job`."""
        return output_dir_of(self.request)

    @property
    def needs_job_folder(self) -> bool:
        return (self.output_dir or "").endswith(f"/{JOB_FOLDER}")

    def for_new_job(self, job_folder: str | None = None) -> Submission:
        """This submission with its own output folder filled in (unchanged when it resumes a folder), and the
        job's health mark in every pool's env (`render.health_mark`); a second call changes nothing."""
        request = self.request if has_mark(self.request) else with_mark(self.request, secrets.token_hex(16))
        if not self.needs_job_folder:
            return self if request is self.request else replace(self, request=request)
        return replace(self, request=with_job_folder(request, job_folder or new_job_folder()))


def build_submission(
    template: JobTemplate,
    *,
    package_dir: Path,
    image_uri: str | None = None,
    resume_from: str | None = None,
) -> Submission:
    """Package the trainer (deterministic sdist, content-addressed URI); render the request naming it."""
    if template.build is not None:
        request = render_request(template, image_uri=image_uri, resume_from=resume_from)
        pkg_path, uri = None, None
    else:
        pkg = build_sdist(template.trainer, Path(package_dir))
        uri = package_uri(template.staging_bucket, pkg)
        request = render_request(template, package_uri=uri, resume_from=resume_from)
        pkg_path = pkg.path
    resource = next(request[key] for key in REQUEST_RESOURCES if key in request)
    digest = resource["labels"][REQUEST_HASH_LABEL]
    return Submission(request=request, request_hash=digest, package_path=pkg_path, package_uri=uri)


__all__ = ["REQUEST_HASH_LABEL", "Submission", "build_submission", "new_job_folder", "request_hash"]
