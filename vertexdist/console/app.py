"""The console's Starlette application: server-rendered pages (jinja2), a few JSON reads, and the live log
stream (server-sent events). Every job address goes through `refs.parse_ref` (anything else: 404); static
files are the package's own (Chart.js vendored), nothing is fetched at run time.

With `token` set (a host beyond loopback), every request needs it: `?token=` once (it is then kept in an
HttpOnly cookie), or an `Authorization: Bearer` header. `allowed_hosts` refuses requests addressed to any
other host name (a page on another site cannot reach a loopback console through DNS rebinding).
`OwnerOnly` answers a connection from loopback only when its socket is the console user's own (or root's):
another user of the host gets 403 (`peer_uid`; docs/security.md).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
import json
import math
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from vertexdist import peer_uid, request_guard
from vertexdist.backends.base import SEVERITIES, TERMINAL_STATES, LogQuery, StateChange
from vertexdist.console.jobs import KINDS, Console, JobRow, NotFound, Unavailable
from vertexdist.console.notes import note_kind, service_notes, silence_notice
from vertexdist.console.refs import JobRef, parse_ref
from vertexdist.console.registry import Registry
from vertexdist.console.serve import is_loopback

HERE = Path(__file__).parent
PAGE_ROWS = 100
TOKEN_COOKIE = "vertexdist_console"
MAX_QUERY = 200  # characters of a filter value; longer ones are cut


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html"]), auto_reload=False
    )
    env.filters["money"] = money
    env.filters["duration"] = duration
    env.filters["stamp"] = stamp
    env.filters["percent"] = percent
    env.filters["note_kind"] = note_kind
    return env


def money(value: float | None) -> str:
    if value is None:
        return "—"
    return f"${value:,.2f}" if value >= 0.01 or value == 0 else f"${value:.4f}"


def percent(value: float | None) -> str:
    """A share (0..1) as `82.3%`; — where there is none."""
    return "—" if value is None else f"{100 * value:.1f}%"


def duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "—"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{seconds:.1f}s" if seconds < 10 else f"{secs}s"


def stamp(value: str | None) -> str:
    """An RFC 3339 time as `2024-05-01 12:00:03 UTC` (to the second)."""
    if not value:
        return "—"
    return value[:19].replace("T", " ") + " UTC"


class TokenGate:
    """Requests without the token get 401 (see the module's docstring)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    def _ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        header = request.headers.get("authorization", "")
        bearer = header[len("Bearer ") :] if header.startswith("Bearer ") else None
        if self._ok(request.cookies.get(TOKEN_COOKIE)) or self._ok(bearer):
            await self.app(scope, receive, send)
            return
        if self._ok(request.query_params.get("token")):
            # Once: the token moves into a cookie, and out of the address bar (and the history).
            params = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            target = request.url.path + (f"?{urllib.parse.urlencode(params)}" if params else "")
            response: Response = RedirectResponse(target, status_code=303)
            response.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="strict")
            await response(scope, receive, send)
            return
        response = Response("a token is needed: open the URL `vertexdist ui` printed\n", status_code=401)
        await response(scope, receive, send)


def host_name(header: str) -> str:
    """The host of a Host header, without its port (`[::1]:8686` -> `::1`)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class AllowedHosts:
    """Requests addressed to another host name get 400 (see the module's docstring)."""

    def __init__(self, app: ASGIApp, hosts: Sequence[str]) -> None:
        self.app = app
        self.hosts = frozenset(h.strip("[]").lower() for h in hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            header = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
            if host_name(header) not in self.hosts:
                response = Response("this console answers on loopback only\n", status_code=400)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class OwnerOnly:
    """A request from a loopback socket another user owns gets 403 (see the module's docstring); one
    from beyond loopback is the token's to judge."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.owner = peer_uid.my_uid()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client, server = scope.get("client"), scope.get("server")
        if scope["type"] in ("http", "websocket") and client and server and is_loopback(str(client[0])):
            can_tell = peer_uid.can_tell()
            uid = peer_uid.lookup((str(client[0]), int(client[1])), (str(server[0]), int(server[1])))
            refusal = request_guard.check_owner(uid, self.owner, can_tell=can_tell)
            if refusal is not None:
                await Response(refusal.message + "\n", status_code=refusal.status)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class SecurityHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [
                    (b"content-security-policy",
                     b"default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline';"
                     b" img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'"),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                ]  # fmt: skip
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)


def _ref(request: Request) -> JobRef:
    ref = parse_ref(str(request.path_params.get("ref", "")))
    if ref is None:
        raise HTTPException(404, "no such job")
    return ref


def _text(request: Request, name: str) -> str:
    return request.query_params.get(name, "")[:MAX_QUERY].strip()


def _keep(row: JobRow, state: str, kind: str, where: str, text: str) -> bool:
    return (
        (not state or row.state == state)
        and (not kind or row.kind == kind)
        and (not where or row.where == where)
        and (not text or text.lower() in f"{row.display_name} {row.ref.job}".lower())
    )


def _sse(event: str, data: Any) -> str:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


def build_app(
    console: Console,
    *,
    token: str | None = None,
    allowed_hosts: Sequence[str] | None = None,
    poll_s: float = 1.0,
    registry: Registry | None = None,
) -> Starlette:
    """The console's ASGI app over `console`. `poll_s`: how often a live view asks the backend again;
    `registry`: the Models and experiment pages' data (default: over the console's own target)."""
    env = _environment()

    def render(name: str, status: int = 200, **context: Any) -> HTMLResponse:
        context.setdefault("remote", console.remote_label)
        return HTMLResponse(env.get_template(name).render(**context), status_code=status)

    async def job_list(request: Request) -> Response:
        rows, problems = await run_in_threadpool(console.rows)
        state, kind, where, text = (_text(request, k) for k in ("state", "kind", "where", "q"))
        kept = [row for row in rows if _keep(row, state, kind, where, text)]
        try:
            page = max(1, min(int(request.query_params.get("page", "1")), 10**6))
        except ValueError:
            page = 1
        pages = max(1, math.ceil(len(kept) / PAGE_ROWS))
        page = min(page, pages)
        shown = kept[(page - 1) * PAGE_ROWS : page * PAGE_ROWS]
        filters = {"state": state, "kind": kind, "where": where, "q": text}

        def page_url(number: int) -> str:
            params = {k: v for k, v in filters.items() if v}
            return "/?" + urllib.parse.urlencode({**params, "page": number})

        return render(
            "list.html",
            rows=shown,
            total=len(rows),
            matched=len(kept),
            page=page,
            pages=pages,
            page_url=page_url,
            filters=filters,
            states=sorted({row.state for row in rows} | ({state} if state else set())),
            kinds=KINDS,
            wheres=sorted({row.where for row in rows} | ({where} if where else set())),
            problems=problems,
            running=any(row.state not in TERMINAL_STATES for row in shown),
        )

    async def job_page(request: Request) -> Response:
        ref = _ref(request)
        page = await run_in_threadpool(console.page, ref)
        trials: list[dict[str, Any]] = []
        trial_data: dict[str, Any] = {}
        if page.tuning is not None:
            trials, trial_data = _trials(console, ref, page.tuning)
        return render(
            "job.html",
            page=page,
            ref=ref,
            severities=SEVERITIES,
            done=page.status.state in TERMINAL_STATES,
            trials=trials,
            trial_data=_script_json(trial_data),
        )

    async def status_json(request: Request) -> Response:
        ref = _ref(request)
        status = await run_in_threadpool(console.status, ref)
        replicas = await run_in_threadpool(console.replicas, ref)
        row = await run_in_threadpool(console.header, ref, status)
        facts = _facts(row)
        if ref.source == "local":  # a remote job's silence line comes with its logs (the log stream's)
            facts["silence"] = silence_text(await run_in_threadpool(console.silence, ref))
        return JSONResponse({**_status_data(status.state, status.error, replicas), "facts": facts})

    async def metrics_json(request: Request) -> Response:
        ref = _ref(request)
        try:
            series = await run_in_threadpool(console.metrics, ref)
        except Unavailable as exc:  # the page says why there is no chart: never "no scalars"
            return JSONResponse({"series": [], "problem": exc.message})
        return JSONResponse({"series": [s.to_json() for s in series]})

    # --- the job page's Ranks panel (console.ranks) ---------------------------------------------
    async def ranks_json(request: Request) -> Response:
        from vertexdist.console.ranks import ranks_data

        ref = _ref(request)
        return JSONResponse(await run_in_threadpool(ranks_data, console, ref))

    # --- the pipeline page (console.pipelines) ---------------------------------------------------
    async def pipeline_page(request: Request) -> Response:
        view = await run_in_threadpool(console.pipeline, str(request.path_params["ident"]))
        return render("pipeline.html", p=view)

    async def pipeline_json(request: Request) -> Response:
        return JSONResponse(await run_in_threadpool(console.pipeline, str(request.path_params["ident"])))

    async def jobs_json(request: Request) -> Response:
        rows, problems = await run_in_threadpool(console.rows)
        return JSONResponse({"jobs": [_row_json(row) for row in rows], "problems": problems})

    async def log_stream(request: Request) -> Response:
        ref = _ref(request)
        replica = _text(request, "replica") or None
        severity = _text(request, "severity").upper() or None
        if severity is not None and severity not in SEVERITIES:
            raise HTTPException(400, f"severity is one of {', '.join(SEVERITIES)}")
        query = LogQuery(replica=replica, severity=severity)
        status = await run_in_threadpool(console.status, ref)  # 404 before the stream starts
        secrets = status.secret_values

        async def events() -> AsyncIterator[str]:
            from vertexdist.render import mask_text

            cursor: object | None = None
            last_status: dict[str, Any] | None = None
            last_facts: dict[str, str] | None = None
            heard: StateChange | None = None  # a remote job's latest silence line, from its `service` lines
            while True:
                try:
                    page = await run_in_threadpool(console.logs, ref, cursor, query)
                except (NotFound, Unavailable) as exc:
                    yield _sse("problem", {"message": exc.message})
                    page = None
                if page is not None:
                    cursor = page.cursor
                    lines = [
                        {"r": c.replica, "s": c.severity, "t": c.timestamp, "x": line}
                        for c in page.chunks
                        for line in (mask_text(c.text, secrets).splitlines() or [""])
                    ]
                    if lines:
                        yield _sse("lines", lines)
                    told = silence_notice(service_notes(page.chunks), "RUNNING")
                    if told is not None:
                        heard = dataclasses.replace(told, message=mask_text(told.message, secrets))
                    if page.more:
                        continue
                try:
                    found = await run_in_threadpool(console.status, ref)
                    replicas = await run_in_threadpool(console.replicas, ref)
                    facts = _facts(await run_in_threadpool(console.header, ref, found))
                    silent = await run_in_threadpool(console.silence, ref) if ref.source == "local" else heard
                except (NotFound, Unavailable) as exc:
                    yield _sse("problem", {"message": exc.message})
                    return
                facts["silence"] = silence_text(silent) if found.state not in TERMINAL_STATES else ""
                data = _status_data(found.state, found.error, replicas)
                if data != last_status or facts != last_facts:
                    # The header's times, duration and cost change while it runs; the timeline with the state.
                    event: dict[str, Any] = {**data, "facts": facts}
                    if data != last_status:
                        try:
                            steps = await run_in_threadpool(console.timeline, ref)
                        except (NotFound, Unavailable):
                            steps = []
                        event["timeline"] = [_step_json(step) for step in steps]
                    last_status, last_facts = data, facts
                    yield _sse("status", event)
                if found.state in TERMINAL_STATES:
                    # One more read: lines written as the job ended.
                    page = await run_in_threadpool(console.logs, ref, cursor, query)
                    lines = [
                        {"r": c.replica, "s": c.severity, "t": c.timestamp, "x": line}
                        for c in page.chunks
                        for line in (mask_text(c.text, secrets).splitlines() or [""])
                    ]
                    if lines:
                        yield _sse("lines", lines)
                    if not page.more:
                        # Its end time may be recorded a moment after its state: the header's last word.
                        facts = {**_facts(await run_in_threadpool(console.header, ref)), "silence": ""}
                        if facts != last_facts:
                            yield _sse("status", {**data, "facts": facts})
                        yield _sse("end", {"state": found.state})
                        return
                    cursor = page.cursor
                    continue
                if await request.is_disconnected():
                    return
                await asyncio.sleep(poll_s)

        return StreamingResponse(
            events(), media_type="text/event-stream", headers={"Cache-Control": "no-store"}
        )

    async def not_found(request: Request, exc: Exception) -> Response:
        message = getattr(exc, "message", None) or getattr(exc, "detail", None) or "not found"
        return render("error.html", status=404, title="Not found", message=str(message))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            return await not_found(request, exc)
        return render("error.html", status=exc.status_code, title="Bad request", message=str(exc.detail))

    async def unavailable(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, Unavailable)
        message = exc.message + (f" ({exc.hint})" if exc.hint else "")
        return render("error.html", status=503, title="Not reachable", message=message)

    handlers: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
        NotFound: not_found,
        HTTPException: http_error,
        Unavailable: unavailable,
    }
    middleware = [Middleware(SecurityHeaders), Middleware(OwnerOnly)]
    if allowed_hosts:
        middleware.append(Middleware(AllowedHosts, hosts=allowed_hosts))
    if token:
        middleware.append(Middleware(TokenGate, token=token))
    # --- the Models and experiment pages (console.registry_pages) ---------------------------------
    from vertexdist.console.registry_pages import registry_routes

    if registry is None:
        registry = Registry.over(
            console.remote.target if console.remote is not None else None,
            console.runs_dir,
            console.problem,
            emulator_dir=console.emulator_dir,
        )
    # --- end of the Models and experiment pages ----------------------------------------------------
    return Starlette(
        routes=[
            *registry_routes(registry, render),
            Route("/", job_list),
            Route("/jobs/{ref:path}", job_page),
            Route("/api/jobs", jobs_json),
            Route("/api/status/{ref:path}", status_json),
            Route("/api/metrics/{ref:path}", metrics_json),
            Route("/api/logs/{ref:path}", log_stream),
            Route("/api/ranks/{ref:path}", ranks_json),  # the Ranks panel
            Route("/pipelines/{ident}", pipeline_page),  # the pipeline page
            Route("/api/pipelines/{ident}", pipeline_json),
            Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
        ],
        middleware=middleware,
        exception_handlers=handlers,
    )


def _script_json(data: Any) -> str:
    """JSON to sit inside a <script> element: no `<`, `>` or `&` that could end it early."""
    text = json.dumps(data)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _status_data(state: str, error: str | None, replicas: Sequence[Any]) -> dict[str, Any]:
    return {
        "state": state,
        "done": state in TERMINAL_STATES,
        "error": error,
        "replicas": [
            {"name": r.name, "state": r.state, "exit_code": r.exit_code, "attempt": r.attempt}
            for r in replicas
        ],
    }


def _facts(row: JobRow) -> dict[str, str]:
    """The page header's facts as it shows them (job.html's Started, Ended, Duration, Cost so far)."""
    return {
        "started": stamp(row.start_time),
        "ended": stamp(row.end_time),
        "duration": duration(row.duration_s),
        "cost": money(row.cost),
    }


def silence_text(step: StateChange | None) -> str:
    """The page's line for a silent job (job.html's `job-silence`): when, and what the line said."""
    return f"{stamp(step.time)}: {step.message}" if step is not None else ""


def _step_json(step: Any) -> dict[str, Any]:
    return {
        "time": stamp(step.time),
        "state": step.state,
        "replica": step.replica,
        "exit_code": step.exit_code,
        "message": step.message,
    }


def _row_json(row: JobRow) -> dict[str, Any]:
    return {
        "ref": row.ref.path,
        "url": row.url,
        "displayName": row.display_name,
        "kind": row.kind,
        "state": row.state,
        "where": row.where,
        "createTime": row.create_time,
        "startTime": row.start_time,
        "endTime": row.end_time,
        "durationS": row.duration_s,
        "cost": row.cost,
        "goodput": row.goodput,
    }


def _shown(value: object) -> str:
    """A parameter value as the table shows it: numbers to 6 significant digits, whole ones whole."""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:.6g}"
    return "" if value is None else str(value)


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def _trials(console: Console, ref: JobRef, tuning: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The trials table's rows, and the data of the metric-against-parameter plots."""
    study = tuning.study
    metric = study.objective.id if study else ""
    names = [p.id for p in study.parameters] if study else []
    for trial in tuning.trials:
        names += [pid for pid, _ in trial.parameters if pid not in names]
    best = tuning.best
    rows = []
    points: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for trial in tuning.trials:
        values = trial.parameter_values
        final = trial.final_measurement
        value = final.values.get(metric) if final else None
        link = console.trial_ref(ref, trial.id, trial.custom_job)
        is_best = best is not None and trial.id == best.id
        rows.append(
            {
                "id": trial.id,
                "state": trial.state,
                "values": [_shown(values.get(name)) for name in names],
                "metric": value,
                "step": final.step if final else None,
                "best": is_best,
                "url": f"/jobs/{link.path}" if link else None,
                "reason": trial.infeasible_reason or "",
            }
        )
        for name in names:
            x = values.get(name)
            y = _number(value)
            if y is None or x is None:
                continue
            points[name].append({"x": x, "y": y, "trial": trial.id, "best": is_best})
    log_scaled = [p.id for p in study.parameters if p.scale == "UNIT_LOG_SCALE"] if study else []
    data = {
        "metric": metric,
        "goal": study.objective.goal if study else "",
        "parameters": names,
        "log": log_scaled,
        "points": points,
    }
    return [{"names": names, "metric": metric}, *rows], data
