"""How the Vertex backend calls the service: transient failures retried with backoff, the rest turned into one
`ApiCallError` carrying the server's message and a hint (`backends.errors`)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vertexdist.backends.config import Target
from vertexdist.backends.errors import ApiCallError, api_error, is_refused, is_transient, status_of


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter (https://cloud.google.com/storage/docs/retry-strategy)."""

    attempts: int = 6
    initial_s: float = 0.5
    max_s: float = 16.0
    multiplier: float = 2.0

    def delays(self) -> list[float]:
        return [
            random.uniform(0.5, 1.0) * min(self.max_s, self.initial_s * self.multiplier**n)
            for n in range(self.attempts - 1)
        ]


class Caller:
    """Runs one API call at a time under a retry policy, for one target."""

    def __init__(
        self,
        target: Target,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        *,
        storage: bool = False,
    ) -> None:
        self.target = target
        self._retry = retry or RetryPolicy()
        self._sleep = sleep
        # Calls to Cloud Storage: their endpoint is the storage emulator's (STORAGE_EMULATOR_HOST).
        self._storage = storage

    def for_storage(self) -> Caller:
        """The same policy for Cloud Storage calls (errors then name the storage endpoint)."""
        return Caller(self.target, self._retry, self._sleep, storage=True)

    def __call__(self, what: str, fn: Callable[[], Any], *, on_retry: Callable[[], Any] | None = None) -> Any:
        """Run `fn`; retry transient failures with backoff; turn failures into ApiCallError.

        `on_retry` runs before each retry and may return a result instead (create uses it to find a job
        that the failed attempt created after all).
        """
        delays = self._retry.delays()
        for attempt in range(len(delays) + 1):
            try:
                return fn()
            except ApiCallError:
                raise
            except Exception as raised:
                exc = _unwrapped(raised)
                if type(exc).__module__.startswith("google.auth"):
                    hint = "sign in again: gcloud auth application-default login"
                    raise ApiCallError(f"{what} failed: credentials: {exc}", hint, 401) from exc
                if status_of(exc) is None and not isinstance(exc, OSError):
                    raise  # not an answer from the service: a bug, shown as one
                # A local emulator that refuses connections is not running; backing off will not start it.
                emulator_down = self.target.is_emulator and is_refused(exc)
                if not is_transient(exc) or emulator_down or attempt == len(delays):
                    endpoint, variable = (
                        (self.target.storage_endpoint, "STORAGE_EMULATOR_HOST")
                        if self._storage and self.target.storage_endpoint
                        else (self.target.endpoint, "VERTEX_API_ENDPOINT")
                    )
                    raise api_error(
                        exc,
                        what,
                        self.target.project,
                        self.target.location,
                        endpoint=endpoint,
                        endpoint_variable=variable,
                    ) from exc
                self._sleep(delays[attempt])
                if on_retry is not None:
                    found = on_retry()
                    if found is not None:
                        return found
        raise AssertionError("unreachable")


def _unwrapped(exc: Exception) -> Exception:
    """What a client library's own retry gave up on (google.api_core's RetryError carries it as `cause`)."""
    if type(exc).__name__ == "RetryError" and type(exc).__module__.startswith("google.api_core"):
        cause = getattr(exc, "cause", None)
        if isinstance(cause, Exception):
            return cause
    return exc
