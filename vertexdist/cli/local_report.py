"""What `local-run` prints besides the live view: the launch plan (`--plan`) and the summary at the end."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from vertexdist.backends.base import JobResult, JobState, ReplicaState, ReplicaStatus
from vertexdist.health.folder import HEALTH_DIR, read_summary
from vertexdist.log_files import last_lines


def print_plan(plan_dict: dict[str, Any], as_json: bool) -> None:
    """The plan as JSON, or as text: each replica's argv, folder, log and environment."""
    if as_json:
        typer.echo(json.dumps(plan_dict, indent=2))
        return
    typer.echo(f"job {plan_dict['job_id']}  run folder {plan_dict['run_dir']}")
    timeout = "none" if plan_dict["timeout_s"] is None else f"{plan_dict['timeout_s']:g}s"
    typer.echo(f"timeout {timeout}  job restarts allowed: {plan_dict['max_restarts']}")
    if plan_dict.get("replica_restarts"):
        typer.echo(
            f"a replica with a restartable exit: restarted up to {plan_dict['replica_restarts']} times,"
            f" then the job retried up to {plan_dict.get('job_retries', 0)} times"
        )
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


def summary_lines(
    result: JobResult,
    run_dir: Path,
    *,
    outputs: str | None = None,
    tail: Callable[[Path], list[str]] = last_lines,
    mask: Callable[[str], str] = lambda line: line,
) -> list[str]:
    """What to print once the job is done: its state and output folder, and for a failure the tail of the
    replica that failed first (the one the error names; the error message itself is the CLI's `error:` line)
    and which others failed with it."""
    lines = [
        f"job {result.state.value} after {result.elapsed_s:.1f}s"
        + (f" ({result.restarts} restarts)" if result.restarts else "")
    ]
    if outputs:
        lines.append(f"outputs: {outputs}")
    lines.extend(uri_as_path_lines(run_dir))
    restarted = [f"{r.name} ({r.restarts})" for r in result.replicas if r.restarts]
    if restarted:  # Vertex's restart rules restarted these on their own (docs/reference/vertex.md §8.1)
        lines.append(f"replicas restarted: {', '.join(restarted)}")
    flagged = read_summary(run_dir / HEALTH_DIR).get("stragglers") or []
    if flagged:  # what the job's health monitor flagged while it ran (docs/guide/rank-health.md)
        listed = ", ".join(f"rank {s.get('rank')} ({s.get('slowdown')}x)" for s in flagged)
        lines.append(f"stragglers: {listed}; see vertexdist ranks {run_dir}")
    error = result.error
    if result.state is JobState.SUCCEEDED:
        lines.append(f"logs: {run_dir / 'logs'}")
        return lines
    if error is not None:
        failed: ReplicaStatus | None = next((r for r in result.replicas if r.name == error.replica), None)
        if failed is not None:
            lines.append(f"last lines of {failed.log_path}:")
            lines.extend(f"  {mask(line)}" for line in tail(failed.log_path))
        also = [r.name for r in result.replicas if r.state is ReplicaState.FAILED and r is not failed]
        if also:
            lines.append(f"failed after it: {', '.join(also)}")
    return lines


def uri_as_path_lines(run_dir: Path) -> list[str]:
    """A warning for each replica that wrote into a folder named `gs:` in its working folder: a script that
    took AIP_MODEL_DIR (a gs:// URI) for a path. Its files are there, not in the job's outputs."""
    lines = []
    for written in sorted(run_dir.glob("replicas/*/gs:")):
        if not written.is_dir():
            continue
        buckets = sorted(p.name for p in written.iterdir() if p.is_dir())
        example = f" (here /gcs/{buckets[0]}/...)" if buckets else ""
        lines.append(
            f"warning: the script wrote into {written}, a folder named `gs:`: it used a gs:// URI as a path."
            f" AIP_MODEL_DIR is a gs:// URI; write under /gcs/... (`/gcs/` + the rest){example}"
        )
    return lines
