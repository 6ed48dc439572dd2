"""The REST front end: the wire format google-cloud-aiplatform's REST transport speaks, on loopback only.

Routes (https://cloud.google.com/vertex-ai/docs/reference/rest/v1/): `POST /v1/{parent}/customJobs`,
`GET /v1/{name}`, `GET /v1/{parent}/customJobs`, `POST /v1/{name}:cancel`, the same for trainingPipelines and
hyperparameterTuningJobs (these also `DELETE /v1/{name}`; `tuning_api` serves them), `/v1beta1/` alike.
Errors are `{"error": {code, message, status}}`, which the client maps to google.api_core exceptions.
`$alt=json;enum-encoding=int` asks for enums as numbers.
Resource Manager's `GET /v3/projects/ID` and `/v1/projects/ID` (`resource_manager.projects`) give a project's
number. Cloud Logging's `POST /v2/entries:list` serves the jobs' replica logs (`logging.api`). Emulator-only
extensions live under `/vertexdist/` (the fault plan).
Before any of that, `loopback_server.GuardedHandler` answers only the user who started the emulator, at its
own address and origin, with JSON writes (docs/security.md).
Bodies are read as Google's front end reads them (`http_body`: 411, 400, 413, bounded memory), before
routing, and the fields the emulator reads are type-checked (`shapes`): bad input is a 4xx, never a 500.
"""

from __future__ import annotations

import json
import re
import socket
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from vertexdist.emulator.faults import Fault, FaultPlan
from vertexdist.emulator.folder import ENDPOINTS_PATH
from vertexdist.emulator.http_body import BodyError, parse_json_object, read_body
from vertexdist.emulator.logging import api as logging_api
from vertexdist.emulator.logging.entries import JobEntries
from vertexdist.emulator.paging import list_page
from vertexdist.emulator.resource_manager.projects import project_answer
from vertexdist.emulator.routes import EmulatorRoutes
from vertexdist.emulator.vertex import tuning_api
from vertexdist.emulator.vertex.experiments import ExperimentsApi
from vertexdist.emulator.vertex.jobs import ApiError, EmulatorService
from vertexdist.emulator.vertex.tuning import TuningService
from vertexdist.errors import VertexdistError
from vertexdist.loopback_server import LOOPBACK, GuardedHandler, LoopbackServer
from vertexdist.wire import shapes
from vertexdist.wire.proto_json import encode_enums

_RESOURCE = re.compile(
    r"^/(v1|v1beta1)/(projects/[^/]+/locations/[^/]+)/(customJobs|trainingPipelines|hyperparameterTuningJobs)"
    r"(?:/([^/:]+))?(:cancel)?$"
)
_LINGER_S = 2.0


def _public(resource: dict[str, Any], as_int: bool) -> dict[str, Any]:
    visible = {k: v for k, v in resource.items() if not k.startswith("_")}
    return encode_enums(visible, as_int=as_int)


class _Handler(GuardedHandler):  # the guard (Host, Origin, JSON writes, owner) stands in front
    server: VertexHTTPServer
    protocol_version = "HTTP/1.1"
    _raw_body = b""

    def setup(self) -> None:
        super().setup()
        # Headers and body go out as two writes; with Nagle on, a keep-alive client waits ~40 ms for each.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    def _send(self, status: int, body: dict[str, Any]) -> None:
        # Compact: a TensorBoard read of 1,000 points encodes in 0.6x the time of the spaced form.
        data = json.dumps(body, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def _error(self, error: ApiError) -> None:
        self._send(
            error.code, {"error": {"code": error.code, "message": error.message, "status": error.status}}
        )

    def _body(self) -> dict[str, Any]:
        try:
            return parse_json_object(self._raw_body)
        except ValueError as exc:
            raise ApiError.invalid(str(exc)) from None

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def _read_body(self, verb: str) -> bool:
        """Read this request's whole body before routing, so every answer leaves the connection in step."""
        try:
            self._raw_body = read_body(verb, self.headers, self.rfile)
        except BodyError as error:
            self.close_connection = self.close_connection or error.close
            status = HTTPStatus(error.status)
            self._send(
                error.status,
                {"error": {"code": error.status, "message": error.message, "status": status.name}},
            )
            if error.close:
                self._drop_the_rest()
            return False
        return True

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        # http.server's own refusals (a bad request line, an unknown method) close without reading.
        super().send_error(code, message, explain)
        if self.close_connection:
            self._drop_the_rest()

    def _drop_the_rest(self) -> None:
        """A lingering close: the client may still be sending the body we refused; closing now would reset
        the connection and lose our answer, so read and drop what comes for a moment, in fixed-size pieces."""
        try:
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.settimeout(0.25)
            deadline = time.monotonic() + _LINGER_S
            while time.monotonic() < deadline and self.connection.recv(64 * 1024):
                pass
        except OSError:
            pass  # the client is gone or stays silent: either way we are done

    def _dispatch(self, verb: str) -> None:
        if not self._read_body(verb):
            return
        split = urlsplit(self.path)
        path = unquote(split.path, errors="replace")
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        as_int = "enum-encoding=int" in query.get("$alt", "")
        try:
            if path == logging_api.PATH and verb == "POST":
                self._send(HTTPStatus.OK, self.server.logging.entries_list(self._body()))
                return
            if path.startswith("/vertexdist/"):
                self._extension(verb, path, query)
                return
            extra = project_answer(verb, path, self._known_projects())
            if extra is None:
                extra = self.server.experiments.answer(verb, path, split.query, self._body)
            extra = extra if extra is not None else self._routes(verb, path, query)
            if extra is not None:
                self._send(HTTPStatus.OK, extra)
                return
            match = _RESOURCE.match(path)
            if not match:
                raise ApiError(404, "NOT_FOUND", f"{verb} {path} is not a method the emulator serves")
            _version, parent, collection, ident, cancel = match.groups()
            method = self._method(verb, ident, cancel)
            fault = self.server.faults.take(method, collection)
            if fault is not None and not fault.after:
                raise ApiError(fault.status, fault.status_name, fault.message)
            answer = self._call(method, parent, collection, ident, query, as_int)
            if fault is not None:
                raise ApiError(fault.status, fault.status_name, fault.message)
            self._send(HTTPStatus.OK, answer)
        except ApiError as error:
            self._error(error)
        except ConnectionError:
            raise  # the client went away; nobody to answer
        except Exception as exc:  # an answer, not a dropped connection that clients would retry
            BaseHTTPRequestHandler.log_message(self, "internal error on %s %s: %r", verb, path, exc)
            self._error(ApiError(500, "INTERNAL", f"the emulator failed: {type(exc).__name__}: {exc}"))

    def _known_projects(self) -> set[str]:
        """The project ids of the emulator's resources (to find a project asked for by number)."""
        return {
            name.split("/")[1] for name in self.server.service.store.names() if name.startswith("projects/")
        }

    def _routes(self, verb: str, path: str, query: dict[str, str]) -> dict[str, Any] | None:
        return self.server.routes.answer(verb, path, query, self._body) if self.server.routes else None

    @staticmethod
    def _method(verb: str, ident: str | None, cancel: str | None) -> str:
        if verb == "POST" and ident is None:
            return "create"
        if verb == "GET" and ident is None:
            return "list"
        if verb == "GET" and not cancel:
            return "get"
        if verb == "POST" and cancel:
            return "cancel"
        if verb == "DELETE" and ident is not None and not cancel:
            return "delete"
        raise ApiError(405 if verb != "DELETE" else 501, "UNIMPLEMENTED", f"{verb} is not supported here")

    def _call(
        self,
        method: str,
        parent: str,
        collection: str,
        ident: str | None,
        query: dict[str, str],
        as_int: bool,
    ) -> dict[str, Any]:
        service = self.server.service
        if collection in tuning_api.COLLECTIONS and self.server.tuning is not None:
            return tuning_api.call(
                self.server.tuning, service, method, parent, ident, self._body, query, as_int
            )
        if method == "delete":
            raise ApiError(501, "UNIMPLEMENTED", f"the emulator does not delete {collection}")
        name = f"{parent}/{collection}/{ident}"
        if method == "create":
            body = self._body()
            shape, where = (
                (shapes.CUSTOM_JOB, "customJob")
                if collection == "customJobs"
                else (shapes.TRAINING_PIPELINE, "trainingPipeline")
            )
            wrong = shapes.problems(body, shape, where)
            if wrong:
                raise ApiError.invalid("; ".join(wrong[:5]))
            if collection == "customJobs":
                return _public(service.create_custom_job(parent, body), as_int)
            return _public(service.create_training_pipeline(parent, body), as_int)
        if method == "get":
            return _public(service.get(name), as_int)
        if method == "cancel":
            self._body()
            service.cancel(name)
            return {}
        return list_page(
            collection,
            query,
            lambda filter_, size, token: service.list(parent, collection, filter_, size, token),
            lambda resource: _public(resource, as_int),
        )

    def _extension(self, verb: str, path: str, query: dict[str, str]) -> None:
        if path == ENDPOINTS_PATH and verb == "GET":
            # Where this emulator's Cloud Storage is: a client given only the Vertex endpoint asks here.
            self._send(
                HTTPStatus.OK, {"vertex": self.server.endpoint, "storage": self.server.storage_endpoint}
            )
            return
        if path == "/vertexdist/v1/faults" and verb == "POST":
            try:
                fault = Fault.from_body(self._body())
            except ValueError as exc:
                raise ApiError.invalid(str(exc)) from None
            self.server.faults.add(fault)
            self._send(HTTPStatus.OK, {})
            return
        if path == "/vertexdist/v1/faults" and verb == "DELETE":
            self.server.faults.clear()
            self._send(HTTPStatus.OK, {})
            return
        raise ApiError(404, "NOT_FOUND", f"{verb} {path} is not a vertexdist emulator extension")


class VertexHTTPServer(LoopbackServer):
    thread_name = "vertex-emulator-http"

    def __init__(
        self,
        service: EmulatorService,
        port: int = 0,
        *,
        verbose: bool = False,
        tuning: TuningService | None = None,
    ) -> None:
        # Loopback only: the emulator runs arbitrary commands it is sent, so it must never face a network.
        try:
            super().__init__(port, _Handler)
        except OSError as exc:
            raise VertexdistError(
                f"the Vertex API emulator cannot listen on {LOOPBACK}:{port}: {exc.strerror}",
                hint="pick another --port, or 0 for any free port",
            ) from None
        self.service = service
        self.logging = logging_api.LoggingApi(JobEntries(service))
        self.tuning = tuning
        self.routes: EmulatorRoutes | None = None  # deletes, models, operations (emulator/routes.py)
        self.experiments = ExperimentsApi(None)  # metadata and TensorBoard (emulator/vertex/experiments.py)
        self.storage_endpoint: str | None = None  # its Cloud Storage's, answered at ENDPOINTS_PATH
        self.faults = FaultPlan()
        self.verbose = verbose
