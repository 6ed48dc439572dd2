"""A test-only fault plan: make the next N matching requests fail with a given status, before any work.

Lets the reliability tests drive the real SDK and storage clients into 503/429/403 answers and check that
vertexdist retries (creating exactly one job) or stops with the server's message.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from typing import Any

STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ALREADY_EXISTS",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


@dataclass
class Fault:
    """Fail `times` requests whose method (create/get/list/cancel) and collection match; '*' matches all.

    With `after`, the request is carried out first and the error is returned anyway: a lost answer, the
    case where a blind retry of a create would make a second job.
    """

    method: str
    status: int
    message: str = "injected fault"
    collection: str = "*"
    times: int = 1
    after: bool = False

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> Fault:
        """A fault from its JSON form; ValueError naming what is missing or of the wrong type."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(body) - set(fields))
        if unknown:
            raise ValueError(
                f"unknown fault field(s) {', '.join(map(repr, unknown))}; known: {', '.join(fields)}"
            )
        for name in ("method", "status"):
            if name not in body:
                raise ValueError(f"a fault needs {name!r}")
        for name, value in body.items():
            wanted = _FIELD_TYPES[name]
            if not isinstance(value, wanted) or (wanted is int and isinstance(value, bool)):
                raise ValueError(f"fault field {name!r} must be {wanted.__name__}, got {value!r:.40}")
        if not 400 <= body["status"] <= 599:
            raise ValueError(f"fault status must be an HTTP error status (400-599), got {body['status']}")
        return cls(**body)

    @property
    def status_name(self) -> str:
        return STATUS_NAMES.get(self.status, "UNKNOWN")


_FIELD_TYPES: dict[str, type] = {
    "method": str,
    "status": int,
    "message": str,
    "collection": str,
    "times": int,
    "after": bool,
}


class FaultPlan:
    def __init__(self) -> None:
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self.fired: list[tuple[str, str, int]] = []

    def add(self, fault: Fault) -> None:
        with self._lock:
            self._faults.append(fault)

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()
            self.fired.clear()

    def take(self, method: str, collection: str) -> Fault | None:
        """The fault to answer this request with, if one is armed (and count it down)."""
        with self._lock:
            for fault in self._faults:
                if (
                    fault.method in ("*", method)
                    and fault.collection in ("*", collection)
                    and fault.times > 0
                ):
                    fault.times -= 1
                    self.fired.append((method, collection, fault.status))
                    return fault
        return None
