"""`vertexdist local-run TEMPLATE`: every replica of the job as a local process, with Vertex's environment.

Flags and printing only: the service (`vertexdist.jobs.local_run`) has the local backend package and render
the template the way submit does, plan the replicas and run them; this shows the plan, the live view and
the summary.
Each run writes to its own output folder; `--resume-from RUN` continues an earlier run's folder instead.
"""

from __future__ import annotations

import json
import queue
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import typer

from vertexdist.errors import JobFailedError, UsageError

if TYPE_CHECKING:
    from vertexdist.backends.base import JobEvent, JobResult
    from vertexdist.jobs.local_faults import LocalFaults
    from vertexdist.jobs.local_run import LocalRun, LocalRunRequest


def _timeout_seconds(timeout: str | None) -> float | None:
    from vertexdist.spec.durations import parse_duration

    try:
        return parse_duration(timeout) if timeout is not None else None
    except ValueError as exc:
        raise UsageError(f"--timeout: {exc}") from None


def _follow(run: LocalRun, events: queue.Queue[JobEvent], json_events: bool) -> JobResult:
    """Show the job until it is done; SIGINT/SIGTERM to this process cancel it."""
    from vertexdist.cli.local_view import choose_view
    from vertexdist.jobs.local_run import follow_local
    from vertexdist.render import mask_text

    job = run.job
    secrets = run.secret_values

    def stop(_signum: int, _frame: FrameType | None) -> None:
        job.cancel()

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        view = choose_view(run.name, run.run_dir, json_events=json_events)
        return follow_local(job, view, events, mask=lambda text: mask_text(text, secrets))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _faults(path: Path, *, tuning: bool) -> LocalFaults:
    from vertexdist.jobs.local_faults import LocalFaults
    from vertexdist.spec.fault_plan import load_fault_plan

    if tuning:
        raise UsageError(
            "--fault-plan is for template jobs, not tuning templates",
            hint="run the tuning job on `vertexdist emulator start --fault-plan FILE`",
        )
    return LocalFaults(load_fault_plan(path), notice=lambda line: typer.echo(line, err=True))


def _managed(request: LocalRunRequest, template: Path, *, out: Path | None, json_events: bool) -> None:
    """A template with `recovery:`: its attempts under the managed-job controller, one local run each."""
    from vertexdist.cli.local_managed import local_managed

    for given, flag in ((out, "--out"), (request.resume_from, "--resume-from")):
        if given is not None:
            raise UsageError(
                f"{flag} does not go with a template with recovery: (each attempt has its own run folder,"
                " and every attempt after the first continues the first's)",
                hint="drop it; continue a stopped managed run with `vertexdist managed resume ID`",
            )
    if json_events:
        raise UsageError(
            "--json does not go with a template with recovery: (its attempts are shown as notices)",
            hint="drop --json; read the attempts with `vertexdist managed status ID --json`",
        )
    local_managed(
        template,
        runs_dir=request.runs_dir,
        procs_per_replica=request.procs_per_replica,
        docker=request.docker,
        warm=request.warm,
        grace_s=request.grace_s,
        timeout_s=request.timeout_s,
        faults=request.faults,
    )


def local_run(
    template: Path = typer.Argument(..., help="The job template (YAML)."),
    procs_per_replica: int | None = typer.Option(
        None,
        "--procs-per-replica",
        min=1,
        help=(
            "Processes per replica for `launcher: torchrun` and the bundled trainer (default: the"
            " template's GPUs per node); scales a GPU job down. With `launcher: ray`, the CPUs each Ray"
            " node advertises (at least 2). Not for `launcher: python` user code."
        ),
    ),
    out: Path | None = typer.Option(None, "--out", help="Run folder (default .vertexdist/runs/<job id>)."),
    plan_only: bool = typer.Option(False, "--plan", help="Print the launch plan and start nothing."),
    json_events: bool = typer.Option(
        False, "--json", help="Print JSON event lines instead of the live view."
    ),
    timeout: str | None = typer.Option(
        None,
        "--timeout",
        help="Stop the job after this long (3600, 3600s, 90m, 24h, 1h30m). Default: the template's.",
    ),
    grace: float = typer.Option(5.0, "--grace", min=0.0, help="Seconds between SIGTERM and SIGKILL on stop."),
    docker: bool = typer.Option(
        False,
        "--docker",
        help="Run each replica of a `build` template as a container of its image (needs a Docker daemon).",
    ),
    warm: bool = typer.Option(
        False,
        "--warm",
        help="Fork each replica from a warm pool that has already imported Python, torch, the bundled"
        " trainer and the launcher (started on first use, it stays up while used; idle for"
        " VERTEXDIST_WARM_IDLE_S, default 900 s, it exits). Replicas it cannot fork start cold.",
    ),
    seed: int | None = typer.Option(
        None, "--seed", help="Tuning templates: seed of random and bayesian search (same seed, same trials)."
    ),
    resume_from: str | None = typer.Option(
        None,
        "--resume-from",
        help="Continue an earlier run: use its output folder (checkpoints, model) instead of a new one."
        " A run id (as local-run printed it) or a run folder.",
    ),
    fault_plan: Path | None = typer.Option(
        None,
        "--fault-plan",
        help="Inject a fault plan's faults into this run, as `emulator start --fault-plan` does: preempt,"
        " stockout, quota, flex_wait (docs/commands/local-run.md).",
    ),
) -> None:
    """Run every replica of TEMPLATE as a local process, with the environment Vertex gives them."""
    from vertexdist.backends.base import JobState
    from vertexdist.cli.local_report import print_plan, summary_lines
    from vertexdist.jobs.local_run import LocalRunRequest, plan_local, start_local
    from vertexdist.render import mask_text
    from vertexdist.spec import load_template

    timeout_s = _timeout_seconds(timeout)
    if out is not None and out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file, not a folder", hint="pass a folder for the run's files")
    if not plan_only and out is not None and out.exists() and any(out.iterdir()):
        raise UsageError(f"run folder {out} is not empty", hint="pick another --out, or remove it")
    loaded = load_template(template)
    faults = _faults(fault_plan, tuning=loaded.tuning is not None) if fault_plan is not None else None
    request = LocalRunRequest(
        loaded,
        out=out,
        procs_per_replica=procs_per_replica,
        docker=docker,
        resume_from=resume_from,
        timeout_s=timeout_s,
        grace_s=grace,
        warm=warm,
        seed=seed,
        faults=faults,
    )
    if request.template.tuning is not None:
        from vertexdist.cli.local_tune import run_tuning

        run_tuning(request, plan_only=plan_only, json_events=json_events)
        return
    if plan_only:
        print_plan(plan_local(request), json_events)
        return
    if loaded.recovery is not None:
        _managed(request, template, out=out, json_events=json_events)
        return
    events: queue.Queue[JobEvent] = queue.Queue()
    run = start_local(request, on_event=events.put)
    result = _follow(run, events, json_events)
    summary = run.summary()
    run_dir = Path(summary["run_dir"])
    from vertexdist.jobs.record_store import keep_local_record

    keep_local_record(loaded, run_dir, str(summary.get("job_id") or run_dir.name), fault_plan)
    secrets = run.secret_values

    def mask(text: str) -> str:
        return mask_text(text, secrets)

    if json_events:
        typer.echo(json.dumps({"event": "summary", **summary}))
    else:
        stream = sys.stdout if result.state is JobState.SUCCEEDED else sys.stderr
        for line in summary_lines(result, run_dir, outputs=summary.get("output_path"), mask=mask):
            print(line, file=stream)
        _goodput_line(run_dir)
    if result.state is JobState.SUCCEEDED and loaded.model is not None:
        _model_check(loaded, summary)
    if result.state is JobState.CANCELLED:
        raise typer.Exit(130)
    if result.state is not JobState.SUCCEEDED:
        message = result.error.message if result.error else f"job {result.state.value}"
        raise JobFailedError(message, hint=f"logs: {run_dir / 'logs'}")


def _goodput_line(run_dir: Path) -> None:
    """The run's goodput, its biggest loss and that loss's cost (docs/guide/goodput.md), on stderr."""
    from vertexdist.jobs.goodput import end_of_run_line

    line = end_of_run_line(str(run_dir))
    if line is not None:
        typer.echo(line, err=True)


def _model_check(loaded: Any, summary: dict[str, Any]) -> None:
    """`model:`: the registration Vertex would make; an empty model folder fails the run."""
    from vertexdist.jobs.registered_model import local_registration

    lines, problem = local_registration(loaded, summary.get("output_dir"), summary.get("output_path"))
    for line in lines:
        typer.echo(line)
    if problem is not None:
        raise JobFailedError(problem, hint="save the model under os.environ['AIP_MODEL_DIR']")


def register(app: typer.Typer) -> None:
    app.command("local-run")(local_run)
