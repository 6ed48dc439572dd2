"""Which API errors are worth retrying, and the message and hint for those that are not. No SDK import.

Transient: 503 UNAVAILABLE, 500/502/504, and 429 when it is rate limiting. Permanent: 400, 401, 403, 404,
409 and 429 RESOURCE_EXHAUSTED for a quota (Vertex says "quota" in that message, docs/reference/vertex.md §6);
retrying those only repeats the refusal.
"""

from __future__ import annotations

import re

from vertexdist.errors import VertexdistError

TRANSIENT_CODES = frozenset({500, 502, 503, 504})
_REST_PREFIX = re.compile(r"^(GET|POST|PUT|PATCH|DELETE) \S+: ")


class ApiCallError(VertexdistError):
    """Vertex (or the emulator) refused a call; carries the HTTP status."""

    def __init__(self, message: str, hint: str | None, status: int | None) -> None:
        super().__init__(message, hint)
        self.status = status


def status_of(exc: BaseException) -> int | None:
    code = getattr(exc, "code", None)
    return code if isinstance(code, int) else None


def message_of(exc: BaseException) -> str:
    """The server's own words (the REST transport prefixes them with `VERB URL: `; dropped)."""
    message = getattr(exc, "message", None)
    return _REST_PREFIX.sub("", str(message) if message else str(exc))


def is_quota(message: str) -> bool:
    return "quota" in message.lower()


def is_transient(exc: BaseException) -> bool:
    status = status_of(exc)
    if status in TRANSIENT_CODES:
        return True
    if status == 429:
        return not is_quota(message_of(exc))
    # Connection resets and timeouts before an answer (requests/urllib3/grpc raise these, not API errors).
    # requests' InvalidURL and friends are OSErrors too, but also ValueErrors: a bad URL stays bad.
    return status is None and isinstance(exc, OSError) and not isinstance(exc, ValueError)


def is_refused(exc: BaseException) -> bool:
    """Nothing listens at the address: the connection was refused (at any depth of the exception chain)."""
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            return False
        if isinstance(seen, ConnectionRefusedError) or "Connection refused" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def is_unreachable(exc: BaseException) -> bool:
    """No answer at all: nothing listens at the endpoint, or the connection broke (not an API error)."""
    return status_of(exc) is None and isinstance(exc, OSError)


def hint_for(status: int | None, message: str, project: str, location: str, *, creating: bool = False) -> str:
    if status == 400 and creating:
        return "Vertex refused the request as invalid; check the template with `vertexdist validate`"
    if status == 400:
        return "Vertex refused the request; its message above says why"
    if status == 401:
        return "sign in: gcloud auth application-default login"
    if status == 403:
        return (
            f"check that the Vertex AI API is enabled in project {project} and that you have"
            " roles/aiplatform.user (gcloud services enable aiplatform.googleapis.com)"
        )
    if status == 404:
        return f"check the job name, and that it lives in project {project}, location {location}"
    if status == 429 and is_quota(message):
        return (
            f"the project is out of quota in {location}: request more (console: IAM & Admin > Quotas),"
            " or pick another region or machine type"
        )
    if status is not None and (status in TRANSIENT_CODES or status == 429):
        return "the service kept failing; wait a minute and try again"
    return "run again with --debug for details"


def api_error(
    exc: BaseException,
    what: str,
    project: str,
    location: str,
    *,
    endpoint: str | None = None,
    endpoint_variable: str = "VERTEX_API_ENDPOINT",
) -> ApiCallError:
    """A user-facing error for a failed call: the server's own message first, then what to do."""
    status = status_of(exc)
    message = message_of(exc)
    prefix = f"{what} failed" + (f" ({status})" if status else "")
    if endpoint and is_unreachable(exc):
        hint = (
            f"nothing answers at {endpoint}: start the emulator (vertexdist emulator start) and set"
            f" {endpoint_variable} to the address it prints, or unset it to use Vertex AI"
            if endpoint.startswith("http://")
            else f"check the network and the endpoint {endpoint}"
        )
    else:
        hint = hint_for(status, message, project, location, creating=what.startswith("creating"))
    return ApiCallError(f"{prefix}: {message}", hint, status)
