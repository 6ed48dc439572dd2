"""`vertexdist ui [--port N] [--host 127.0.0.1]`: the console in a browser — jobs, replicas, live logs,
metric charts, a tuning job's trials (`vertexdist.console`).

It shows the local runs under `--runs` (default: this folder's .vertexdist/runs) and, with an endpoint
(--endpoint or VERTEX_API_ENDPOINT: the emulator) or --project, that target's jobs. It serves on
loopback; another --host must be asked for, and then every request needs the token printed at start.
Needs the `ui` extra (Starlette, uvicorn, jinja2, tensorboard's event reader).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from vertexdist.cli.targets import Endpoint, Location, Project, Transport
from vertexdist.errors import UsageError

if TYPE_CHECKING:
    from vertexdist.backends.vertex import VertexBackend

UI_MODULES = ("starlette", "uvicorn", "jinja2", "tensorboard")
DEFAULT_PORT = 8686


def _importable(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


def require_ui_extra() -> None:
    missing = [name for name in UI_MODULES if not _importable(name)]
    if missing:
        raise UsageError(
            f"vertexdist ui needs the `ui` extra ({', '.join(missing)} not installed)",
            hint="pip install 'vertexdist[ui]' (make venv installs it)",
        )


def remote_backend(
    project: str | None, location: str | None, endpoint: str | None, transport: str | None
) -> VertexBackend | None:
    """The Vertex (or emulator) backend the console also shows, or None: only when one is named."""
    from vertexdist.backends import create_backend
    from vertexdist.backends.config import resolve_target
    from vertexdist.backends.vertex.retry import RetryPolicy

    if not (endpoint or os.environ.get("VERTEX_API_ENDPOINT") or project):
        return None
    target = resolve_target(
        env=os.environ,
        project=project,
        location=location,
        api_endpoint=endpoint,
        transport=transport,
        no_project_hint="pass --project PROJECT (the project whose jobs to show) or set GOOGLE_CLOUD_PROJECT",
    )
    # A page waits on these calls: a stopped emulator shows as such at once, not after a minute of retries.
    retry = RetryPolicy(attempts=2, initial_s=0.2, max_s=1.0)
    return create_backend("vertex", target, retry=retry)


def ui(
    port: int = typer.Option(DEFAULT_PORT, "--port", help="Port to serve on (0: any free port)."),
    host: str = typer.Option(
        "127.0.0.1",
        "--host",
        help="Address to listen on. Beyond loopback (e.g. 0.0.0.0) every request needs the printed token.",
    ),
    runs: Path = typer.Option(
        Path(".vertexdist/runs"), "--runs", help="The local runs folder to show (local-run's)."
    ),
    project: Project = None,
    location: Location = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
) -> None:
    """Serve the job console in the browser: jobs, replicas, live logs, metrics, trials."""
    require_ui_extra()
    from vertexdist.console.app import build_app
    from vertexdist.console.jobs import Console
    from vertexdist.console.managed import ManagedAttempts
    from vertexdist.console.serve import bind, plan_serving, serve
    from vertexdist.managed.service import MANAGED_DIR

    plan = plan_serving(host, port)
    remote = remote_backend(project, location, endpoint, transport)
    console = Console(runs.resolve(), remote, cache_dir=Path(".vertexdist/cache/console").resolve())
    console.attempt_sources.append(ManagedAttempts((MANAGED_DIR / "managed.sqlite").resolve()))
    sock = bind(plan.host, plan.port)
    bound_port = sock.getsockname()[1]
    plan = plan_serving(host, bound_port, token=plan.token)
    app = build_app(
        console,
        token=plan.token,
        allowed_hosts=[f"{h}" for h in plan.allowed_hosts] if plan.allowed_hosts else None,
    )

    def ready() -> None:
        typer.echo(f"vertexdist console: {plan.url}")
        typer.echo(f"local runs: {console.runs_dir}" + (f"; {console.remote_label}" if remote else ""))
        if plan.token:
            typer.echo(
                f"listening on {host}, beyond loopback: every request needs the token above (keep it private)"
            )
        typer.echo("Ctrl-C stops it")

    try:
        serve(app, sock, on_ready=ready)
    finally:
        sock.close()


def register(app: typer.Typer) -> None:
    app.command("ui")(ui)
