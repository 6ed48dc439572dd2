"""The dry run: template -> the exact CreateTrainingPipeline body submit sends, plus its package. No SDK.

The request carries a label with a hash of itself (without that label), so a second submit of the very
same request can be noticed on the server (`vertexdist-request` label filter) before it creates a duplicate.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

from vertexdist.backends.base import Submission
from vertexdist.packaging import build_sdist, package_uri
from vertexdist.render import render_request
from vertexdist.spec.models import JobTemplate

REQUEST_HASH_LABEL = "vertexdist-request"


def request_hash(request: dict[str, Any]) -> str:
    """A label-safe hash (lowercase hex, 16 chars) of a request, ignoring its own hash label."""
    body = copy.deepcopy(request)
    body.get("trainingPipeline", {}).get("labels", {}).pop(REQUEST_HASH_LABEL, None)
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


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
    digest = request_hash(request)
    request["trainingPipeline"].setdefault("labels", {})[REQUEST_HASH_LABEL] = digest
    return Submission(request=request, request_hash=digest, package_path=pkg_path, package_uri=uri)
