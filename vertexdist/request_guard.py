"""Who may drive a loopback server, decided from one request's facts (pure: no sockets, no I/O).

A server on 127.0.0.1 is reachable by every page the user's browser opens and by every user of the host.
`check` answers one request in the order it is cheapest to tell:

1. **Owner.** The peer's socket must belong to the user who started the server (or to root, who can do
   anything to that user anyway). `peer_uid` finds that owner; where it cannot be told at all (no Linux
   socket tables) the check is skipped, which docs/security.md lists as a limit.
2. **Host.** The Host header must name the address served, `127.0.0.1`, `localhost` or `[::1]` with the
   server's port: a DNS-rebinding page sends its own name (400).
3. **Origin.** A request that carries an `Origin` must come from the server's own origin: browsers send
   one with every cross-origin request and with every POST (403).
4. **Content type.** A write (POST, PUT, PATCH, DELETE) must be JSON on the APIs that take JSON
   (`JSON_ONLY`: the Vertex API, Cloud Logging, the `/vertexdist/v1/` control endpoints); every client of
   theirs (google-cloud-aiplatform's REST transport, google-api-core's operations client, google-cloud-
   logging) sends `application/json` on every call, bodiless `:cancel` and DELETE included. A DELETE with
   no body and no type passes too: the gcloud CLI sends its deletes so (`ai persistent-resources delete`),
   and a page cannot send a DELETE cross-origin without a CORS preflight, which these servers never grant
   (https://fetch.spec.whatwg.org/#cors-safelisted-method). The storage API
   (`STORAGE`) takes its own upload types too, but a POST never as one of the "simple" types a page can
   send cross-origin without a CORS preflight (`multipart/form-data`, `text/plain`,
   `application/x-www-form-urlencoded`), nor a body with no type at all; a POST with no body and no type
   is what google-cloud-storage sends to copy an object. PUT, PATCH and DELETE cannot leave a browser
   without a preflight (which these servers never grant), so the storage API takes any type there: a
   resumable upload's chunks carry the object's own type, `text/plain` included (415).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

ROOT_UID = 0
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
SIMPLE_TYPES = frozenset({"multipart/form-data", "text/plain", "application/x-www-form-urlencoded"})
JSON = "application/json"


class WritePolicy(Enum):
    """Which content types a server's writes may carry (see the module's docstring)."""

    JSON_ONLY = "json"
    STORAGE = "storage"


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused: an HTTP status, Google's status name, and a message for the client."""

    status: int
    reason: str
    message: str


Header = Callable[[str], "str | None"]


def media_type(value: str | None) -> str:
    """`application/json` of `Application/JSON; charset=utf-8`; '' for no header."""
    return (value or "").split(";", 1)[0].strip().lower()


def check_owner(peer_uid: int | None, owner_uid: int, *, can_tell: bool) -> Refusal | None:
    """None when the peer may drive a server that `owner_uid` started. `peer_uid` None: no live socket
    of that address was found (gone already, or in a state that hides its owner)."""
    if not can_tell or peer_uid in (owner_uid, ROOT_UID):
        return None
    if peer_uid is None:
        return Refusal(403, "PERMISSION_DENIED", "cannot tell which user is asking: refused")
    return Refusal(
        403, "PERMISSION_DENIED", f"this server answers only the user who started it (uid {owner_uid})"
    )


def allowed_hosts(port: int) -> frozenset[str]:
    return frozenset(f"{name}:{port}" for name in LOOPBACK_NAMES)


def check_host(host: str | None, port: int) -> Refusal | None:
    if host is None or host.strip().lower() not in allowed_hosts(port):
        shown = "no Host header" if host is None else f"Host {host[:80]!r}"
        where = f"127.0.0.1:{port} or localhost:{port}"
        return Refusal(400, "INVALID_ARGUMENT", f"{shown}: this server answers only at {where}")
    return None


def check_origin(origin: str | None, port: int) -> Refusal | None:
    if origin is None or origin.strip().lower() in {f"http://{h}" for h in allowed_hosts(port)}:
        return None
    return Refusal(403, "PERMISSION_DENIED", f"Origin {origin[:80]!r} is not this server's: refused")


def _bodiless(content_length: str | None) -> bool:
    return (content_length or "0").strip() in ("", "0")


def check_content_type(
    method: str, content_type: str | None, content_length: str | None, policy: WritePolicy
) -> Refusal | None:
    if method not in WRITES:
        return None
    kind = media_type(content_type)
    if policy is WritePolicy.JSON_ONLY:
        if kind == JSON or (method == "DELETE" and not kind and _bodiless(content_length)):
            return None
        given = repr(kind) if kind else "none"
        return Refusal(415, "INVALID_ARGUMENT", f"{method} needs Content-Type: {JSON}, not {given}")
    if method != "POST":
        return None
    if kind in SIMPLE_TYPES:
        return Refusal(415, "INVALID_ARGUMENT", f"a POST of Content-Type {kind!r} is not an upload type")
    if not kind and not _bodiless(content_length):
        return Refusal(415, "INVALID_ARGUMENT", "a POST with a body needs a Content-Type")
    return None


def check(method: str, header: Header, port: int, policy: WritePolicy) -> Refusal | None:
    """Host, Origin and content type of one request (the owner is checked once per connection)."""
    return (
        check_host(header("Host"), port)
        or check_origin(header("Origin"), port)
        or check_content_type(method, header("Content-Type"), header("Content-Length"), policy)
    )
