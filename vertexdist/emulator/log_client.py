"""The client side of the emulator's replica-log route (`GET /vertexdist/v1/{name}/logs`): a `LogSource` the
Vertex backend is given when its target is an emulator, so the backend itself knows no emulator route."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from vertexdist.backends.base import JobStatus, LogChunk, LogsPage

CALL_TIMEOUT_S = 60.0


class EmulatorLogError(Exception):
    """The emulator refused the call; `code`/`message` as google.api_core exceptions carry them."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class EmulatorLogs:
    def __init__(self, endpoint: str) -> None:
        self._endpoint = endpoint.rstrip("/")

    def read(self, name: str, offsets: dict[str, int], describe: Callable[[], JobStatus]) -> LogsPage:
        params = urlencode({f"offset.{replica}": offset for replica, offset in offsets.items()})
        url = f"{self._endpoint}/vertexdist/v1/{name}/logs" + (f"?{params}" if params else "")
        try:
            with urllib.request.urlopen(url, timeout=CALL_TIMEOUT_S) as response:
                data: dict[str, Any] = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            body = json.loads(exc.read() or b"{}").get("error", {})
            raise EmulatorLogError(exc.code, body.get("message", str(exc))) from None
        chunks = [LogChunk(c["replica"], c["text"], int(c["nextOffset"])) for c in data.get("logs", [])]
        return LogsPage(chunks=chunks)
