"""`vertexdist local-run TEMPLATE`: every replica of the job as a local process, with Vertex's environment.

The template is packaged (a deterministic sdist), rendered into the same CustomJobSpec the submit path sends,
and handed to the local backend (`vertexdist.local`), which installs the package and runs the replicas.
"""

from __future__ import annotations

import json
import queue
import secrets
import shlex
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import typer

from vertexdist.errors import JobFailedError, UsageError

# Light: the local backend imports only the standard library (torch loads in the replicas, not here).
from vertexdist.local.environment import JobContext
from vertexdist.local.runner import JobEvent, JobResult, JobState, LocalJob

if TYPE_CHECKING:
    from vertexdist.container.ensure import BuildPlan
    from vertexdist.spec.models import JobTemplate

RUNS_DIR = Path(".vertexdist/runs")
PACKAGE_CACHE = Path(".vertexdist/cache/packages")


def new_job_id() -> str:
    return time.strftime("local-%Y%m%d-%H%M%S-", time.gmtime()) + secrets.token_hex(2)


def _mask_env(env: dict[str, str]) -> dict[str, str]:
    from vertexdist.render import mask_secrets

    masked: dict[str, str] = mask_secrets(env)
    for key in ("CLUSTER_SPEC", "TF_CONFIG"):
        if key in masked:  # their `job` holds the pools' env, secrets included
            value = json.loads(masked[key])
            value["job"] = mask_secrets(value.get("job"))
            masked[key] = json.dumps(value, separators=(",", ":"))
    return masked


def _print_plan(plan_dict: dict[str, Any], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(plan_dict, indent=2))
        return
    typer.echo(f"job {plan_dict['job_id']}  run folder {plan_dict['run_dir']}")
    timeout = "none" if plan_dict["timeout_s"] is None else f"{plan_dict['timeout_s']:g}s"
    typer.echo(f"timeout {timeout}  job restarts allowed: {plan_dict['max_restarts']}")
    for replica in plan_dict["replicas"]:
        typer.echo(f"\n{replica['name']}  ({replica['kind']}, {replica['address']})")
        typer.echo(f"  argv: {shlex.join(replica['argv']) if replica['kind'] != 'standin' else '<stand-in>'}")
        typer.echo(f"  cwd:  {replica['cwd']}")
        typer.echo(f"  log:  {replica['log']}")
        typer.echo("  env:")
        for key, value in sorted(replica["env"].items()):
            typer.echo(f"    {key}={value}")
        if replica.get("stop_argv"):
            typer.echo(f"  stop: {shlex.join(replica['stop_argv'])}")
    docker = plan_dict.get("docker")
    if docker:
        typer.echo(f"\nimage {docker['image']} (built from the context unless the daemon has it)")
        for argv in docker["setup"]:
            typer.echo(f"before: {shlex.join(argv)}")
        for argv in docker["teardown"]:
            typer.echo(f"after:  {shlex.join(argv)}")


@dataclass(frozen=True)
class LocalJobInput:
    """A template made ready for the local backend: its CustomJobSpec, package (if any) and run context."""

    spec: dict[str, Any]
    package_uri: str | None
    sdist: Path | None
    ctx: JobContext
    run_dir: Path
    # Set for `--docker`: the image to build (or find) and run the replicas in.
    image_build: BuildPlan | None = None


def _host_spec_for_build(t: JobTemplate) -> dict[str, Any]:
    """A `build` template's job with its image pools run on the host, from the build context (no Docker)."""
    from vertexdist.container.ensure import plan_build
    from vertexdist.container.host import host_job_spec
    from vertexdist.render import render_job_spec

    assert t.build is not None
    image_uri = plan_build(t).image_uri
    return host_job_spec(
        render_job_spec(t, image_uri=image_uri),
        image_uri=image_uri,
        context=Path(t.build.context),
        dockerfile=Path(t.build.dockerfile),
    )


def _docker_spec_for_build(t: JobTemplate) -> tuple[dict[str, Any], BuildPlan]:
    """A `build` template's job as Vertex runs it (its image pools on the built image), and the build."""
    from vertexdist.container.ensure import plan_build
    from vertexdist.render import render_job_spec

    image_build = plan_build(t)
    return render_job_spec(t, image_uri=image_build.image_uri), image_build


def require_docker(t: JobTemplate, *, need_daemon: bool) -> None:
    """`--docker` needs a template with an image to build and, to run, a Docker daemon that answers."""
    if t.build is None:
        where = f" {t.source_path}" if t.source_path else ""
        raise UsageError(
            f"--docker runs the replicas in the template's image, but the template{where} has no "
            "`build` section",
            hint="drop --docker to run the replicas on the host, or add a `build` section",
        )
    if need_daemon:
        from vertexdist.container.docker import docker_daemon_answers

        if not docker_daemon_answers():
            raise UsageError(
                "--docker needs a Docker daemon, and none answers (`docker version` reached no server)",
                hint="start Docker, or drop --docker: without it the replicas run on the host",
            )


def make_run_dir(run_dir: Path) -> None:
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"cannot create the run folder {run_dir}: {exc.strerror or exc}", hint="pick another --out"
        ) from exc


def prepare_input(
    template: Path,
    *,
    out: Path | None,
    procs_per_replica: int | None,
    sdist_dir: Path | None,
    docker: bool = False,
) -> LocalJobInput:
    """Load, package and render the template the way submit does (same CustomJobSpec, same sdist).

    A `build` template runs its image on Vertex; here its replicas run the image's command on the host,
    from the build context, with the Dockerfile's environment.
    """
    from vertexdist.packaging import build_sdist, package_uri
    from vertexdist.render import render_job_spec
    from vertexdist.spec import load_template

    t = load_template(template)
    if docker:  # before anything is made: a plan (sdist_dir set) starts nothing, so needs no daemon
        require_docker(t, need_daemon=sdist_dir is None)
    job_id = new_job_id()
    run_dir = (out or RUNS_DIR / job_id).resolve()
    ctx = JobContext(
        job_id=job_id,
        project=t.project,
        region=t.location,
        gcs_root=str(run_dir / "gcs"),
        procs_per_replica=procs_per_replica,
        default_output_uri=f"gs://vertexdist-local/{job_id}",
    )
    if sdist_dir is None:  # a real run: its folder must be usable before anything is built into it
        make_run_dir(run_dir)
    if docker:
        spec, image_build = _docker_spec_for_build(t)
        return LocalJobInput(spec, None, None, ctx, run_dir, image_build)
    if t.build is not None:
        return LocalJobInput(_host_spec_for_build(t), None, None, ctx, run_dir)
    sdist = build_sdist(t.trainer, sdist_dir or run_dir / "package")
    uri = package_uri(t.staging_bucket, sdist)
    return LocalJobInput(render_job_spec(t, package_uri=uri), uri, sdist.path, ctx, run_dir)


def show_plan(job_input: LocalJobInput, *, timeout_s: float | None, as_json: bool) -> None:
    from vertexdist.local import prepare_plan
    from vertexdist.local.environment import replica_slots
    from vertexdist.local.job import parse_job_spec
    from vertexdist.local.ports import reserved_ports

    if job_input.image_build is not None:
        from vertexdist.container.docker_job import caller_user, docker_job_plan
        from vertexdist.local.gpus import host_gpus

        docker_plan = docker_job_plan(
            job_input.spec,
            job_input.ctx,
            image_uri=job_input.image_build.image_uri,
            run_dir=job_input.run_dir,
            host_gpus=host_gpus(),
            run_as=caller_user(),
        )
        plan_dict = docker_plan.to_dict(mask=_mask_env)
        if timeout_s is not None:
            plan_dict["timeout_s"] = timeout_s
        _print_plan(plan_dict, as_json)
        return
    count = len(replica_slots(parse_job_spec(job_input.spec)))
    with reserved_ports(count) as ports:
        plan = prepare_plan(
            job_input.spec,
            job_input.ctx,
            run_dir=job_input.run_dir,
            ports=ports,
            package_dirs=(
                {job_input.package_uri: f"<installed copy of {job_input.package_uri}>"}
                if job_input.package_uri
                else {}
            ),
        )
    plan_dict = plan.to_dict(mask=_mask_env)
    if timeout_s is not None:
        plan_dict["timeout_s"] = timeout_s
    _print_plan(plan_dict, as_json)


def run_until_done(
    job_input: LocalJobInput, *, json_events: bool, timeout_s: float | None, grace_s: float
) -> tuple[LocalJob, JobResult]:
    """Start the job and show it until it is done; SIGINT/SIGTERM to this process cancel the job."""
    from vertexdist.local import start_job
    from vertexdist.local.view import choose_view, follow

    def fetch_package(wanted: str) -> Path:
        if job_input.sdist is None or wanted != job_input.package_uri:
            raise UsageError(f"unknown package {wanted}")
        return job_input.sdist

    events: queue.Queue[JobEvent] = queue.Queue()
    if job_input.image_build is not None:
        from vertexdist.container.docker_job import start_docker_job
        from vertexdist.local.gpus import host_gpus

        job = start_docker_job(
            job_input.spec,
            job_input.ctx,
            job_input.image_build,
            run_dir=job_input.run_dir,
            host_gpus=host_gpus(),
            on_event=events.put,
            grace_s=grace_s,
            timeout_s=timeout_s,
        )
    else:
        job = start_job(
            job_input.spec,
            job_input.ctx,
            run_dir=job_input.run_dir,
            fetch_package=fetch_package,
            cache_dir=PACKAGE_CACHE.resolve(),
            on_event=events.put,
            grace_s=grace_s,
            timeout_s=timeout_s,
        )

    def stop(signum: int, _frame: FrameType | None) -> None:
        job.cancel()

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        result = follow(
            job, choose_view(job_input.ctx.job_id, job_input.run_dir, json_events=json_events), events
        )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return job, result


def summary_of(job_id: str, run_dir: Path, result: JobResult) -> dict[str, Any]:
    error = (
        None if result.error is None else {"message": result.error.message, "replica": result.error.replica}
    )
    return {
        "job_id": job_id,
        "state": result.state.value,
        "error": error,
        "restarts": result.restarts,
        "elapsed_s": round(result.elapsed_s, 3),
        "run_dir": str(run_dir),
        "replicas": [
            {
                "name": r.name,
                "state": r.state.value,
                "pid": r.pid,
                "exit_code": r.exit_code,
                "log": str(r.log_path),
            }
            for r in result.replicas
        ],
    }


def local_run(
    template: Path = typer.Argument(..., help="The job template (YAML)."),
    procs_per_replica: int | None = typer.Option(
        None,
        "--procs-per-replica",
        min=1,
        help="Worker processes per replica (default: the template's GPUs per node); scales a GPU job down.",
    ),
    out: Path | None = typer.Option(None, "--out", help="Run folder (default .vertexdist/runs/<job id>)."),
    plan_only: bool = typer.Option(False, "--plan", help="Print the launch plan and start nothing."),
    json_events: bool = typer.Option(
        False, "--json", help="Print JSON event lines instead of the live view."
    ),
    timeout: str | None = typer.Option(
        None,
        "--timeout",
        help="Stop the job after this long (3600, 3600s, 90m, 24h). Default: the template's.",
    ),
    grace: float = typer.Option(5.0, "--grace", min=0.0, help="Seconds between SIGTERM and SIGKILL on stop."),
    docker: bool = typer.Option(
        False,
        "--docker",
        help="Run each replica of a `build` template as a container of its image (needs a Docker daemon).",
    ),
) -> None:
    """Run every replica of TEMPLATE as a local process, with the environment Vertex gives them."""
    from vertexdist.local.job import JobSpecError, parse_duration
    from vertexdist.local.view import summary_lines

    try:
        timeout_s = parse_duration(timeout) if timeout is not None else None
    except JobSpecError as exc:
        raise UsageError(f"--timeout: {exc.message}", hint=exc.hint) from exc
    if out is not None and out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file, not a folder", hint="pass a folder for the run's files")
    if plan_only:
        # --plan starts and leaves nothing: its sdist (needed for the package URI) goes to a temporary folder.
        with tempfile.TemporaryDirectory(prefix="vertexdist-plan-") as scratch:
            job_input = prepare_input(
                template,
                out=out,
                procs_per_replica=procs_per_replica,
                sdist_dir=Path(scratch),
                docker=docker,
            )
            show_plan(job_input, timeout_s=timeout_s, as_json=json_events)
        return
    if out is not None and out.exists() and any(out.iterdir()):
        raise UsageError(f"run folder {out} is not empty", hint="pick another --out, or remove it")
    job_input = prepare_input(
        template, out=out, procs_per_replica=procs_per_replica, sdist_dir=None, docker=docker
    )
    run_dir = job_input.run_dir
    (run_dir / "job.json").write_text(json.dumps(job_input.spec, indent=2) + "\n")
    job, result = run_until_done(job_input, json_events=json_events, timeout_s=timeout_s, grace_s=grace)

    if job.plan is not None:
        (run_dir / "plan.json").write_text(json.dumps(job.plan.to_dict(mask=_mask_env), indent=2) + "\n")
    summary = summary_of(job_input.ctx.job_id, run_dir, result)
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if json_events:
        typer.echo(json.dumps({"event": "summary", **summary}))
    else:
        stream = sys.stdout if result.state is JobState.SUCCEEDED else sys.stderr
        for line in summary_lines(result, run_dir):
            print(line, file=stream)
    if result.state is JobState.CANCELLED:
        raise typer.Exit(130)
    if result.state is not JobState.SUCCEEDED:
        message = result.error.message if result.error else f"job {result.state.value}"
        raise JobFailedError(message, hint=f"logs: {run_dir / 'logs'}")


def register(app: typer.Typer) -> None:
    app.command("local-run")(local_run)
