"""The dry run: template -> the exact CreateTrainingPipeline body submit sends, plus its package. No SDK.

`render_request` builds the body, its `vertexdist-request` hash label included, so `render --request` and
`submit --dry-run` print the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vertexdist.packaging import build_sdist, package_uri
from vertexdist.render import REQUEST_HASH_LABEL, REQUEST_RESOURCES, render_request, request_hash
from vertexdist.spec.models import JobTemplate


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


def build_submission(template: JobTemplate, *, package_dir: Path, image_uri: str | None = None) -> Submission:
    """Package the trainer (deterministic sdist, content-addressed URI); render the request naming it."""
    if template.build is not None:
        request = render_request(template, image_uri=image_uri)
        pkg_path, uri = None, None
    else:
        pkg = build_sdist(template.trainer, Path(package_dir))
        uri = package_uri(template.staging_bucket, pkg)
        request = render_request(template, package_uri=uri)
        pkg_path = pkg.path
    resource = next(request[key] for key in REQUEST_RESOURCES if key in request)
    digest = resource["labels"][REQUEST_HASH_LABEL]
    return Submission(request=request, request_hash=digest, package_path=pkg_path, package_uri=uri)


__all__ = ["REQUEST_HASH_LABEL", "Submission", "build_submission", "request_hash"]
