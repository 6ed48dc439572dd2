"""`vertexdist ui [--port N] [--host 127.0.0.1]`: the console in a browser — jobs, replicas, live logs,
metric charts, a tuning job's trials (`vertexdist.console`).

It shows the local runs under `--runs` (default: this folder's .vertexdist/runs) and one more place's jobs:
with an endpoint (--endpoint or VERTEX_API_ENDPOINT: an emulator) or --project, that target's; with
--emulator, those of the emulator over --emulator-data-dir (the one serving it, else one started for the
console's length); with none of these, those of the emulator serving this folder's .vertexdist/emulator, if
one does (`vertexdist emulator start`). It serves on loopback; another --host must be asked for, and then
every request needs the token printed at start.
Needs the `ui` extra (Starlette, uvicorn, jinja2, tensorboard's event reader).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from vertexdist.cli.targets import (
    EMULATOR_DATA_DIR,
    EmulatorDataDir,
    Endpoint,
    Location,
    Project,
    Transport,
    UseEmulator,
)
from vertexdist.errors import UsageError

if TYPE_CHECKING:
    from vertexdist.backends.vertex import VertexBackend
    from vertexdist.console.jobs import Console
    from vertexdist.console.serve import Plan

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
    """The Vertex (or emulator) backend the console also shows, or None: only when one is named. An
    emulator's endpoint brings its storage endpoint (`jobs.emulator_storage`), for the charts."""
    from vertexdist.backends.config import LOCAL_PROJECT, resolve_target
    from vertexdist.console.jobs import page_backend
    from vertexdist.jobs.emulator_storage import with_emulator_storage

    named = endpoint or os.environ.get("VERTEX_API_ENDPOINT")
    if not (named or project):
        return None
    target = resolve_target(
        env=os.environ,
        project=project,
        location=location,
        api_endpoint=endpoint,
        transport=transport,
        default_project=LOCAL_PROJECT if named and named.strip().startswith("http://") else None,
        no_project_hint="pass --project PROJECT (the project whose jobs to show) or set GOOGLE_CLOUD_PROJECT",
    )
    return page_backend(with_emulator_storage(target))


@contextmanager
def console_remote(
    project: str | None,
    location: str | None,
    endpoint: str | None,
    transport: str | None,
    emulator_dir: Path | None,
) -> Iterator[tuple[VertexBackend | None, Path | None]]:
    """The remote the console shows, and the emulator folder whose jobs it lists, until the `with` ends (an
    emulator started for --emulator stops then)."""
    from vertexdist.emulator.folder import serving

    served = serving(EMULATOR_DATA_DIR)
    if emulator_dir is None and not (endpoint or os.environ.get("VERTEX_API_ENDPOINT") or project):
        emulator_dir = EMULATOR_DATA_DIR if served is not None else None  # beside `emulator start`
    if emulator_dir is None:
        remote = remote_backend(project, location, endpoint, transport)
        same = remote is not None and served is not None and remote.target.api_endpoint == served.vertex
        yield remote, EMULATOR_DATA_DIR.resolve() if same else None
        return
    from vertexdist.backends.config import LOCAL_PROJECT, resolve_target
    from vertexdist.console.jobs import page_backend
    from vertexdist.jobs.where import JobPlace, reach

    with reach(JobPlace(project, location, emulator_dir=emulator_dir), os.environ) as (place, env):
        target = resolve_target(
            env=env,
            project=place.project,
            location=place.location,
            api_endpoint=place.endpoint,
            transport=place.transport,
            default_project=LOCAL_PROJECT,
        )
        yield page_backend(target), emulator_dir.resolve()


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
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
) -> None:
    """Serve the job console in the browser: jobs, replicas, live logs, metrics, trials."""
    require_ui_extra()
    from vertexdist.console.jobs import Console
    from vertexdist.console.managed import ManagedAttempts
    from vertexdist.console.serve import plan_serving
    from vertexdist.managed.service import MANAGED_DIR

    if emulator and endpoint:
        raise UsageError(
            "--emulator and --endpoint both say which emulator", hint="drop one: --emulator is the local one"
        )
    plan = plan_serving(host, port)
    folder = emulator_data_dir if emulator else None
    with console_remote(project, location, endpoint, transport, folder) as (remote, shown_folder):
        cache = Path(".vertexdist/cache/console").resolve()
        console = Console(runs.resolve(), remote, cache_dir=cache, emulator_dir=shown_folder)
        console.attempt_sources.append(ManagedAttempts((MANAGED_DIR / "managed.sqlite").resolve()))
        _serve(console, plan, host)


def _serve(console: Console, plan: Plan, host: str) -> None:
    from vertexdist.console.app import build_app
    from vertexdist.console.serve import bind, plan_serving, serve

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
        shown = f"; {console.remote_label}" if console.remote is not None else ""
        typer.echo(f"local runs: {console.runs_dir}{shown}")
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
