"""Resource Manager's `projects.get` (pure: a path in, an answer out), as clients ask it of the emulator.

google-cloud-aiplatform checks who owns a default staging bucket: the bucket's `projectNumber` against the
number Resource Manager gives for the project (`utils/gcs_utils.py` `_verify_bucket_ownership`, through
google-cloud-resource-manager's `ProjectsClient.get_project(name="projects/ID")`, v3:
https://cloud.google.com/resource-manager/reference/rest/v3/projects/get). The gcloud CLI asks v1
(https://cloud.google.com/resource-manager/reference/rest/v1/projects/get). Any project id exists here; its
number is `wire.projects.project_number`, the one the replicas' metadata server and the emulator's buckets
give. A project asked for by number is found among the ids the emulator has seen.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from vertexdist.emulator.vertex.jobs import ApiError
from vertexdist.wire.projects import project_number

_GET = re.compile(r"^/(v1|v3)/projects/([^/:]+)$")
_PROJECT_ID = re.compile(
    r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$"
)  # https://cloud.google.com/resource-manager/docs/creating-managing-projects
CREATED = "2024-01-01T00:00:00Z"


def project_answer(verb: str, path: str, known: Iterable[str]) -> dict[str, Any] | None:
    """The answer to `GET /v3/projects/P` or `GET /v1/projects/P`; None for any other path."""
    match = _GET.match(path)
    if match is None or verb != "GET":
        return None
    version, wanted = match.groups()
    project = _project_id(wanted, known)
    number = project_number(project)
    if version == "v3":
        return {
            "name": f"projects/{number}",
            "projectId": project,
            "displayName": project,
            "state": "ACTIVE",
            "createTime": CREATED,
            "etag": 'W/"emulator"',
        }
    return {
        "projectNumber": number,
        "projectId": project,
        "name": project,
        "lifecycleState": "ACTIVE",
        "createTime": CREATED,
    }


def _project_id(wanted: str, known: Iterable[str]) -> str:
    if wanted.isdigit():
        for project in known:
            if project_number(project) == wanted:
                return project
        raise ApiError(
            403,
            "PERMISSION_DENIED",
            f"projects/{wanted}: the emulator knows no project of that number; ask by project id",
        )
    if not _PROJECT_ID.match(wanted):
        raise ApiError(
            400,
            "INVALID_ARGUMENT",
            f"{wanted[:80]!r} is not a project id (6-30 lowercase letters, digits and hyphens, "
            "starting with a letter)",
        )
    return wanted
