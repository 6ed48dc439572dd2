"""The answer to a `list` call of any collection: one page of resources and the token of the next."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from vertexdist.emulator.vertex.jobs import ApiError

Lister = Callable[[str, int, str], tuple[Sequence[Any], str]]


def list_page(
    collection: str, query: dict[str, str], lister: Lister, render: Callable[[Any], dict[str, Any]]
) -> dict[str, Any]:
    """`lister(filter, page_size, page_token)`'s page as Vertex answers it: `{collection: [...],
    "nextPageToken": ...}`, the token left out on the last page."""
    try:
        page_size = int(query.get("pageSize") or 0)
    except ValueError:
        raise ApiError.invalid(f"pageSize {query['pageSize']!r} is not a number") from None
    items, token = lister(query.get("filter", ""), page_size, query.get("pageToken", ""))
    out: dict[str, Any] = {collection: [render(item) for item in items]}
    if token:
        out["nextPageToken"] = token
    return out
