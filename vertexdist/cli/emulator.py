"""`vertexdist emulator start`: a local Vertex API and Cloud Storage on loopback, until stopped."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from types import FrameType

import typer

DEFAULT_DATA_DIR = Path(".vertexdist/emulator")

emulator_app = typer.Typer(
    help="A local Vertex AI API (custom training) and Cloud Storage.", no_args_is_help=True
)


@emulator_app.command("start")
def start(
    port: int = typer.Option(0, "--port", min=0, max=65535, help="Vertex API port (0: any free one)."),
    gcs_port: int = typer.Option(
        0, "--gcs-port", min=0, max=65535, help="Cloud Storage port (0: any free one)."
    ),
    data_dir: Path = typer.Option(DEFAULT_DATA_DIR, "--data-dir", help="Jobs, logs and buckets live here."),
    procs_per_replica: int | None = typer.Option(
        None,
        "--procs-per-replica",
        min=1,
        help="Worker processes per replica (default: the machine's GPUs, 1 without; as local-run).",
    ),
    hold_get: float = typer.Option(
        0.0,
        "--hold-get",
        min=0.0,
        help="Answer a Get of an unfinished job only when it ends or after this many s.",
    ),
    verbose: bool = typer.Option(False, "--verbose", help="Log every request on stderr."),
    fault_plan: Path | None = typer.Option(
        None,
        "--fault-plan",
        help="YAML list of capacity faults to inject: preempt, stockout, quota, flex_wait.",
    ),
    provision_delay: str = typer.Option(
        "0",
        "--provision-delay",
        help="Keep each job PENDING this long before its replicas start, as Vertex provisioning machines"
        " (e.g. 2s, 1m; 0: none); a job on an existing persistent resource starts without it.",
    ),
    warm: int = typer.Option(
        0,
        "--warm",
        min=0,
        help="Fork replicas from a warm pool of this emulator's (torch, the trainer and the launcher"
        " imported), with N children forked ahead; stopped with the emulator (0: cold starts).",
    ),
) -> None:
    """Serve until stopped; prints VERTEX_API_ENDPOINT=... and STORAGE_EMULATOR_HOST=..., one per line."""
    from vertexdist.emulator import Emulator
    from vertexdist.spec.fault_plan import load_fault_plan

    delay_s = _provision_delay_s(provision_delay)
    plan = load_fault_plan(fault_plan) if fault_plan is not None else None
    emu = Emulator(
        port=port,
        gcs_port=gcs_port,
        data_dir=data_dir,
        procs_per_replica=procs_per_replica,
        hold_get_s=hold_get,
        verbose=verbose,
        fault_plan=plan,
        warm=warm,
        provision_delay_s=delay_s,
    )
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    emu.start()
    try:
        typer.echo(f"VERTEX_API_ENDPOINT={emu.vertex_endpoint}")
        typer.echo(f"STORAGE_EMULATOR_HOST={emu.storage_endpoint}")
        typer.echo(f"serving jobs from {emu.data_dir}; Ctrl-C stops", err=True)
        if emu.warm_pool is not None:
            typer.echo(f"warm pool: pid {emu.warm_pool.pid}, {warm} replicas forked ahead", err=True)
        while not stop.wait(0.5):
            pass
    finally:
        emu.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _provision_delay_s(text: str) -> float:
    """--provision-delay in seconds (0 for none); a bad value is a usage error naming the option."""
    from vertexdist.spec.durations import parse_duration

    if text.strip() in ("0", "0s"):
        return 0.0
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--provision-delay") from None


def register(app: typer.Typer) -> None:
    app.add_typer(emulator_app, name="emulator")
