"""How the job commands print a job: its status block and its replica log lines (secrets masked)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import typer

from vertexdist.cli.plain_text import cell, plain, terminal_line

if TYPE_CHECKING:
    from vertexdist.backends.base import JobStatus, LogChunk


def status_lines(status: JobStatus) -> list[str]:
    lines = [f"{status.name}", f"  display name: {status.display_name}", f"  state:        {status.state}"]
    for label, value in (
        ("created", status.create_time),
        ("started", status.start_time),
        ("ended", status.end_time),
        ("error", status.error),
        ("custom job", status.backing_job),
        ("console", status.console_url),
    ):
        if value:
            # A failed job's error carries its replica's last lines: keep them under the label.
            lines.append(f"  {label + ':':<13} {value}".replace("\n", "\n" + " " * 16))
    pools = status.spec.get("workerPoolSpecs") or []
    for index, pool in enumerate(pools):
        if not pool:
            continue
        machine = pool.get("machineSpec") or {}
        accel = (
            f" + {machine.get('acceleratorCount')} x {machine['acceleratorType']}"
            if machine.get("acceleratorType")
            else ""
        )
        code = pool.get("pythonPackageSpec") or pool.get("containerSpec") or {}
        env = ", ".join(f"{e['name']}={e['value']}" for e in code.get("env") or [])
        lines.append(
            f"  workerpool{index}: {pool.get('replicaCount', 1)} x {machine.get('machineType')}{accel}"
            + (f"  env: {env}" if env else "")
        )
    return lines


def where(status: JobStatus, name: str, *, on_vertex: bool, flags: str = "") -> dict[str, str]:
    """Where the job's outputs and logs are, and the commands that show them (what `status` prints);
    `flags` (` --emulator`) bring each command back to where the job is."""
    from vertexdist.backends.outputs import output_uri

    found: dict[str, str] = {}
    uri = output_uri(status.spec)
    if uri:
        found["outputs"] = f"{uri}/"
        found["outputsCommand"] = f"vertexdist outputs {name}{flags} --download DIR"
    found["logsCommand"] = f"vertexdist logs {name}{flags}" + ("" if status.done else " --follow")
    if "/hyperparameterTuningJobs/" in name:
        found["trialsCommand"] = f"vertexdist trials {name}{flags}"
    if on_vertex:
        from vertexdist.backends.vertex.logs import where_logs_are

        link = where_logs_are(status)
        if link:
            found["logsUrl"] = link
    return found


def where_lines(status: JobStatus, name: str, *, on_vertex: bool, flags: str = "") -> list[str]:
    found = where(status, name, on_vertex=on_vertex, flags=flags)
    labels = {
        "outputs": "outputs:",
        "outputsCommand": "",
        "logsCommand": "logs:",
        "trialsCommand": "trials:",
        "logsUrl": "log viewer:",
    }
    return [f"  {labels[key]:<13} {value}" for key, value in found.items()]


def print_chunk(chunk: LogChunk, status: JobStatus, *, as_json: bool) -> None:
    from vertexdist.render import mask_text

    text = mask_text(chunk.text, status.secret_values)
    # Colours reach a terminal; OSC and every other escape never do, and a pipe gets plain text.
    terminal = sys.stdout.isatty() and not as_json
    text = "\n".join((terminal_line if terminal else plain)(line) for line in text.splitlines())
    if as_json:
        for line in text.splitlines() or [""]:
            record = {"replica": chunk.replica, "line": line, "severity": chunk.severity}
            if chunk.timestamp:
                record["timestamp"] = chunk.timestamp
            typer.echo(json.dumps(record))
        return
    for line in text.splitlines() or [""]:
        typer.echo(f"[{cell(chunk.replica)}] {line}")
