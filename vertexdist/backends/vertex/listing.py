"""A list page the SDK could not parse, read again one resource at a time, so one job it cannot read is one
problem line and the others still list.

The SDK's REST transport parses a whole `List...Response` at once: one resource with a field outside its
proto's range (a `replicaCount` past int64, from an emulator folder older than its checks) fails the page
with `google.protobuf.json_format.ParseError`. Here the same pages are fetched as JSON and each resource is
parsed into its proto-plus type alone. Only for the REST transport: over gRPC the server could not have
encoded such a value at all.
"""

from __future__ import annotations

import json
from typing import Any

from vertexdist.backends.config import Target
from vertexdist.backends.vertex.clients import credentials_for


def read_one_by_one(
    target: Target, collection: str, message: Any, limit: int, timeout_s: float
) -> tuple[list[Any], list[str]]:
    """Up to `limit` resources of `collection` (e.g. "customJobs") parsed as `message` (its proto-plus type),
    and a line for each that cannot be parsed, naming it."""
    from google.auth.transport.requests import AuthorizedSession
    from google.protobuf.json_format import ParseError

    endpoint = target.endpoint
    base = endpoint if "://" in endpoint else f"https://{endpoint}"
    session = AuthorizedSession(credentials_for(target))
    items: list[Any] = []
    problems: list[str] = []
    token = ""
    while len(items) + len(problems) < limit:
        params = {"pageSize": str(limit), **({"pageToken": token} if token else {})}
        answer = session.get(f"{base}/v1/{target.parent}/{collection}", params=params, timeout=timeout_s)
        answer.raise_for_status()
        page = answer.json()
        for raw in page.get(collection) or []:
            try:
                items.append(message.from_json(json.dumps(raw), ignore_unknown_fields=True))
            except ParseError as exc:
                name = raw.get("name") if isinstance(raw, dict) else None
                problems.append(f"{name or 'a resource'} cannot be read, so it is not listed: {exc}")
        token = str(page.get("nextPageToken") or "")
        if not token:
            break
    return items[:limit], problems
