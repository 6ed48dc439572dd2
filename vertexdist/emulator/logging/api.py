"""Cloud Logging's `entries.list` for the emulator's jobs: `POST /v2/entries:list`
(https://cloud.google.com/logging/docs/reference/v2/rest/v2/entries/list), the body as google-cloud-logging's
HTTP client sends it (`logging_v2/_http.py`: `resourceNames`, `filter`, `orderBy`, `pageSize`, `pageToken`).

So the Vertex backend reads an emulator job's logs exactly as it reads a Vertex job's. Pages follow the
API: `pageSize` at most 1000 (50 if unset), `orderBy` `timestamp asc` (the default) or `timestamp desc`,
and `nextPageToken` while more entries match; a token holds the last entry's (timestamp, insertId), so new
lines written between two pages neither repeat nor push entries off a page. It is served by the Vertex API's
server, behind its guard: only its user, at its own address, with `Content-Type: application/json`
(google-cloud-logging sends that with every `entries:list`).
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from vertexdist.emulator.logging.entries import Entry, JobEntries, ReplicaLog, SortKey
from vertexdist.emulator.logging.filter import EntryFilter, FilterError, parse_filter
from vertexdist.emulator.vertex.jobs import ApiError

PATH = "/v2/entries:list"
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000
_FIELDS = {"resourceNames", "filter", "orderBy", "pageSize", "pageToken"}
_ORDERS = {"timestamp asc": False, "timestamp desc": True}


def _token(key: SortKey, request: str) -> str:
    raw = json.dumps({"after": list(key), "request": request}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _after(token: str, request: str) -> SortKey:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        time_ns, insert_id = data["after"]
        same = data["request"] == request
    except (ValueError, TypeError, KeyError):
        raise ApiError.invalid(f"pageToken {token[:40]!r} is not a token this API gave") from None
    if not same or not isinstance(time_ns, int) or not isinstance(insert_id, str):
        raise ApiError.invalid("pageToken belongs to another request (its filter or order differ)")
    return time_ns, insert_id


def _projects(names: object) -> set[str]:
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise ApiError.invalid("resourceNames: expected a non-empty list of names like projects/PROJECT")
    projects = set()
    for name in names:
        kind, _, project = name.partition("/")
        if kind != "projects" or not project or "/" in project:
            raise ApiError.invalid(f"resourceNames: the emulator reads projects/PROJECT only, not {name!r}")
        projects.add(project)
    return projects


def _page_size(value: object) -> int:
    if value is None or value == 0:
        return DEFAULT_PAGE_SIZE
    if isinstance(value, str) and value.isdigit():
        value = int(value)  # proto-JSON allows an int32 as a string
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= MAX_PAGE_SIZE:
        raise ApiError.invalid(f"pageSize: expected 1 to {MAX_PAGE_SIZE}, got {value!r}")
    return value


class LoggingApi:
    def __init__(self, entries: JobEntries) -> None:
        self._entries = entries

    def entries_list(self, body: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(body) - _FIELDS)
        if unknown:
            raise ApiError.invalid(f"Invalid JSON payload received. Unknown name {unknown[0]!r}")
        projects = _projects(body.get("resourceNames"))
        text = body.get("filter", "")
        order = str(body.get("orderBy") or "timestamp asc")
        token = body.get("pageToken") or ""
        if not isinstance(text, str) or not isinstance(token, str):
            raise ApiError.invalid("filter and pageToken: expected strings")
        if order.lower() not in _ORDERS:
            raise ApiError.invalid(f"orderBy: expected 'timestamp asc' or 'timestamp desc', got {order!r}")
        size = _page_size(body.get("pageSize"))
        try:
            where = parse_filter(text)
        except FilterError as exc:
            raise ApiError.invalid(f"filter: {exc}") from None
        request = hashlib.sha256(json.dumps([sorted(projects), text, order.lower()]).encode()).hexdigest()
        after = _after(token, request) if token else None
        descending = _ORDERS[order.lower()]
        logs = [
            log for project in sorted(projects) for log in self._entries.replica_logs(project, where.job_id)
        ]
        page, more = self._page(logs, where, after, size, descending)
        answer: dict[str, Any] = {"entries": [entry.to_json() for entry in page]}
        if more:
            answer["nextPageToken"] = _token(page[-1].key, request)
        return answer

    def _page(
        self, logs: list[ReplicaLog], where: EntryFilter, after: SortKey | None, size: int, descending: bool
    ) -> tuple[list[Entry], bool]:
        if not descending:
            found = self._entries.entries(logs, where, after)
            page = [entry for _, entry in zip(range(size + 1), found, strict=False)]
            return page[:size], len(page) > size
        # Newest first: read every match, then page backwards from `after` (rare: the backend asks asc).
        every = list(self._entries.entries(logs, where, None))
        every.reverse()
        if after is not None:
            every = [entry for entry in every if entry.key < after]
        return every[:size], len(every) > size
