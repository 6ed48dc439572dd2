"""Fixtures for the console's tests: run folders made by real local jobs (stand-in replicas, the bundled
trainer, a tuning run), the console served by uvicorn on loopback, one headless Chromium per module."""

from __future__ import annotations

import contextlib
import shutil
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

TRIAL_SCRIPT = Path(__file__).with_name("trial_script.py")
PREBUILT_CPU_IMAGE = "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest"
CHROMIUM = Path("/usr/bin/chromium")


def command_pool(code: str, replicas: int = 1, machine: str = "n1-standard-4") -> dict[str, Any]:
    """A worker pool running a Python one-liner on the host (a containerSpec with a command)."""
    return {
        "machineSpec": {"machineType": machine},
        "replicaCount": replicas,
        "containerSpec": {"imageUri": "example.com/standin:latest", "command": [sys.executable, "-c", code]},
    }


def run_local_job(runs: Path, pools: list[dict[str, Any]], name: str, *, wait: bool = True) -> str:
    """A local job of `pools` started through the local backend, as local-run starts one; its id."""
    from vertexdist.backends.local import LocalBackend
    from vertexdist.backends.local.prepare import LocalOptions, new_job_id
    from vertexdist.local.environment import JobContext
    from vertexdist.local.request import build_request
    from vertexdist.wire.job_spec import parse_job_spec

    job_id = new_job_id()
    while (runs / job_id).exists():
        job_id = new_job_id()
    run_dir = runs / job_id
    spec = {"workerPoolSpecs": pools, "baseOutputDirectory": {"outputUriPrefix": f"gs://b/out/{job_id}"}}
    ctx = JobContext(job_id=job_id, project="p", region="us-central1", gcs_root=str(run_dir / "gcs"))
    cache = runs.parent / "cache"
    request = build_request(
        parse_job_spec(spec), ctx, run_dir=run_dir, sdists={}, cache_dir=cache, display_name=name
    )
    backend = LocalBackend(LocalOptions(runs_dir=runs))
    backend.schedule(request)
    if wait:
        assert backend.job(job_id).wait(120) is not None
    return job_id


def tuning_template(folder: Path, *, trials: int = 3, name: str = "tune-console") -> Path:
    """A tuning template around `trial_script.py` (reports `score` with cloudml-hypertune)."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(TRIAL_SCRIPT, folder / "trial.py")
    data = {
        "display_name": name,
        "project": "my-project",
        "location": "us-central1",
        "staging_bucket": "gs://my-bucket/staging",
        "container_uri": PREBUILT_CPU_IMAGE,
        "machine_type": "n1-standard-4",
        "trainer": {"script": "trial.py", "args": ["--steps=3"]},
        "tuning": {
            "metric_spec": {"score": "maximize"},
            "parameter_spec": {
                "x": {"type": "double", "min": 0.0, "max": 1.0},
                "units": {"type": "integer", "min": 1, "max": 8},
            },
            "max_trial_count": trials,
            "parallel_trial_count": trials,
            "search_algorithm": "random",
        },
    }
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run_local_tuning(runs: Path, template: Path) -> str:
    """The template's tuning run under `runs`, to its end, through the local tuning backend; its id."""
    from vertexdist.backends.local import LocalBackend, LocalOptions
    from vertexdist.spec.loader import load_template

    backend = LocalBackend(LocalOptions(runs_dir=runs, package_cache=runs.parent / "packages"), seed=3)
    job_id = backend.schedule(backend.dryrun(load_template(template)))
    _run, thread = backend.tuning.run(job_id)
    thread.join(180)
    assert not thread.is_alive()
    return job_id


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def serving(app: Any) -> Iterator[str]:
    """`app` served by uvicorn on a loopback port in a thread; its base URL."""
    import uvicorn

    from vertexdist.console.serve import bind, server_config

    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(server_config(app))  # as `vertexdist ui` serves it: the guarded protocol
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the console did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@pytest.fixture(scope="module")
def kit() -> Any:
    """The helpers above (importlib import mode keeps conftest out of reach of plain imports)."""

    class Kit:
        pass

    for helper in (command_pool, run_local_job, tuning_template, run_local_tuning, serving, free_port):
        setattr(Kit, helper.__name__, staticmethod(helper))
    return Kit


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium (Debian's, which `make test` installs) for the module's pages."""
    playwright_api = pytest.importorskip("playwright.sync_api")
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs it (apt-get install chromium)")
    with playwright_api.sync_playwright() as playwright:
        found = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield found
        finally:
            found.close()


@pytest.fixture
def page_of(browser: Any) -> Iterator[Callable[[], Any]]:
    """New pages of the module's browser; a script error on any of them fails the test."""
    pages: list[Any] = []
    errors: list[str] = []

    def make() -> Any:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        pages.append(page)
        return page

    yield make
    for page in pages:
        page.close()
    assert not errors, errors
