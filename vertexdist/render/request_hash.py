"""The `vertexdist-request` label: a hash of a rendered request body, so the server can tell a second
submit of the very same request (a label filter) before it creates a duplicate. Pure.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

REQUEST_HASH_LABEL = "vertexdist-request"
# The resource a request body creates, by its key in the body (the one that carries the hash label).
REQUEST_RESOURCES = ("trainingPipeline", "hyperparameterTuningJob")


def request_hash(request: dict[str, Any]) -> str:
    """A label-safe hash (lowercase hex, 16 chars) of a request, ignoring its own hash label; taken of the
    rendered request, before its job folder is filled in."""
    # Copied only along the way to the labels (not deeply: `validate` renders every template it checks).
    body = dict(request)
    for key in REQUEST_RESOURCES:
        resource = body.get(key)
        if isinstance(resource, dict) and isinstance(resource.get("labels"), dict):
            labels = {k: v for k, v in resource["labels"].items() if k != REQUEST_HASH_LABEL}
            body[key] = {**resource, "labels": labels}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
