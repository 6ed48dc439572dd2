"""`vertexdist local-run TEMPLATE` for a template with a `tuning:` section: its trials on this machine.

Flags and printing only: `jobs.local_run` starts the study through the local backend
(`backends.local.tuning`, the emulator's own loop); this shows the trials as they go and ends with the best
trial, its parameters and its model folder. SIGINT/SIGTERM cancel the job: every trial is stopped and
waited for before local-run exits.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import typer

from vertexdist.errors import JobFailedError

if TYPE_CHECKING:
    from vertexdist.jobs.local_run import LocalRunRequest

REFRESH_S = 0.25


def best_lines(summary: dict[str, Any]) -> list[str]:
    """What local-run prints last: the job's state, the best trial, its parameters and model folder."""
    trials = summary["trials"]
    failed = sum(1 for t in trials if t["state"] == "INFEASIBLE" and not t["stoppedEarly"])
    early = sum(1 for t in trials if t["stoppedEarly"])
    lines = [f"tuning job {summary['state']}: {len(trials)} trials, {failed} failed, {early} stopped early"]
    best = summary.get("best")
    if best:
        metric = summary["metric"]
        values = ", ".join(
            f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in best["parameters"].items()
        )
        lines.append(f"best trial {best['trial']}: {metric} {best[metric]:.6g}  ({values})")
        lines.append(f"model folder: {best['modelDir']}")
    lines.append(f"summary: {Path(summary['run_dir']) / 'summary.json'}")
    return lines


def failed_hint(job: str, summary: dict[str, Any]) -> str:
    """The commands that show why a tuning run failed: the first failed trial's log, and every trial."""
    failed = [t["id"] for t in summary["trials"] if t["state"] == "INFEASIBLE" and not t["stoppedEarly"]]
    logs = f"vertexdist logs {job} --trial {failed[0]}" if failed else f"vertexdist logs {job}"
    return f"see why: {logs}; every trial: vertexdist trials {job}"


def run_tuning(request: LocalRunRequest, *, plan_only: bool, json_events: bool) -> None:
    from vertexdist.cli.tuning_view import choose_view
    from vertexdist.jobs.local_run import plan_local, start_local_tuning

    if request.template.build is not None:
        typer.echo("local-run: `build` ignored; each trial runs the trainer as a Python package", err=True)
    if plan_only:
        typer.echo(json.dumps(plan_local(request), indent=2))
        return
    run = start_local_tuning(request)
    if run.warning:  # once, for the whole run, before the first trial's line
        if json_events:
            typer.echo(json.dumps({"event": "warning", "job_id": run.name, "message": run.warning}))
        else:
            typer.echo(run.warning, err=True)
    view = choose_view(run.name, run.metric, run.parameters, json_events=json_events)

    def stop(_signum: int, _frame: FrameType | None) -> None:
        run.cancel()

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        view.start()
        try:
            while not run.wait(REFRESH_S):
                view.refresh(run.snapshot())
            view.refresh(run.snapshot())
        finally:
            view.stop()
    except BaseException:
        run.cancel()  # the view failed (stdout closed, say): the trials must not outlive local-run
        run.wait()
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    summary = run.summary()
    state = summary["state"]
    if json_events:
        typer.echo(json.dumps({"event": "summary", **summary}))
    else:
        stream = sys.stdout if state == "JOB_STATE_SUCCEEDED" else sys.stderr
        for line in best_lines(summary):
            print(line, file=stream)
    if state == "JOB_STATE_CANCELLED":
        raise typer.Exit(130)
    if state != "JOB_STATE_SUCCEEDED":
        raise JobFailedError(summary.get("error") or state, hint=failed_hint(run.name, summary))
