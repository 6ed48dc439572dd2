"""`vertexdist estimate TEMPLATE`: what a job costs and how fast its gradients move, offline, before it runs.

Prices come from the table in `vertexdist.spec.prices_data`; the all-reduce model from
`vertexdist.estimate.formulas`. Never imports google-cloud-aiplatform or torch.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from vertexdist.estimate.memory import MemoryPlan
    from vertexdist.estimate.report import Estimate, Gradients
    from vertexdist.spec.models import JobTemplate

T = TypeVar("T")
FORMATS = ("table", "json")
_MARKS = {"warning": "[yellow]![/yellow]", "info": "[cyan]-[/cyan]", "ok": "[green]ok[/green]"}


def _parsed(option: str, parse: Callable[[str], T], text: str) -> T:
    """The option's value, or a usage error (exit 2) naming the option, the value and the accepted forms."""
    from vertexdist.errors import UsageError
    from vertexdist.estimate.units import UnitError

    try:
        return parse(text)
    except UnitError as exc:
        raise UsageError(f"{option}: {exc}", hint=exc.hint) from None


def _gradients(params: str | None, gradient_bytes: str | None, grad_dtype: str | None) -> Gradients | None:
    from vertexdist.errors import UsageError
    from vertexdist.estimate import units
    from vertexdist.estimate.report import Gradients

    if params is not None and gradient_bytes is not None:
        raise UsageError(
            "--params and --gradient-bytes both given",
            hint="give one: --params 350M or --gradient-bytes 1.4GB",
        )
    if gradient_bytes is not None:
        if grad_dtype is not None:
            raise UsageError(
                "--grad-dtype goes with --params", hint="--gradient-bytes already counts the bytes"
            )
        return Gradients(_parsed("--gradient-bytes", units.parse_bytes, gradient_bytes))
    if params is None:
        return None
    per_param = _parsed("--grad-dtype", units.grad_bytes_per_param, grad_dtype or "fp32")
    count = _parsed("--params", units.parse_params, params)
    return Gradients(count * per_param, params=count, bytes_per_param=per_param)


def _memory_plan(
    template: JobTemplate,
    params: float | None,
    optimizer_bytes: float,
    tensor: int,
    pipeline: int,
    headroom: str | None,
) -> MemoryPlan | None:
    """The memory plan for --params (or the template's model_params), or None when neither gives a count."""
    from vertexdist.errors import UsageError
    from vertexdist.estimate import memory, units

    if params is None:
        if (tensor, pipeline) != (1, 1):
            raise UsageError(
                "--tensor-parallel and --pipeline-parallel need a parameter count",
                hint="pass --params 7.5B or set model_params: 7.5B in the template",
            )
        return None
    share = (
        memory.DEFAULT_HEADROOM if headroom is None else _parsed("--headroom", units.parse_fraction, headroom)
    )
    try:
        shape = memory.template_layout(template, tensor, pipeline)
    except memory.PlanError as exc:
        raise UsageError(str(exc), hint=exc.hint) from None
    return memory.plan_memory(params, shape, template.accelerator_type, optimizer_bytes, share)


def _memory_table(plan: MemoryPlan) -> object:
    from rich.table import Table

    from vertexdist.estimate.memory import LABELS, STRATEGIES, format_gb
    from vertexdist.estimate.units import format_count
    from vertexdist.spec import catalog

    title = (
        f"Model states per GPU ({format_count(plan.params)} params x (2 + 2 + {plan.optimizer_bytes:g}) B;"
        f" {plan.layout.describe()})"
    )
    table = Table(title=title, title_justify="left")
    for column in ("strategy", "params", "grads", "optimizer", "total"):
        table.add_column(column, justify="left" if column == "strategy" else "right")
    room = plan.usable_gb
    if plan.accelerator_type and plan.gpu_memory_gb is not None and room is not None:
        gpu = catalog.accelerator_name(plan.accelerator_type)
        table.add_column(f"fits {gpu}? ({room:.3g} GB usable)")
    for strategy in STRATEGIES:
        parts = plan.parts(strategy)
        row = [LABELS[strategy]] + [
            f"{format_gb(v / 1e9)} GB" for v in (parts.params, parts.grads, parts.optimizer, parts.total)
        ]
        fits = plan.fits[strategy]
        if fits is not None:
            row.append("[green]yes[/green]" if fits else "[red]no[/red]")
        table.add_row(*row)
    table.caption = (
        f"ZeRO paper's model (arXiv:1910.02054): fp16/bf16 params and grads, K = {plan.optimizer_bytes:g} B"
        f" of optimizer state per param; {plan.headroom:.0%} of each GPU kept for activations and buffers"
    )
    table.caption_justify = "left"
    return table


def _money(value: float | None) -> str:
    return "no price" if value is None else f"${value:,.2f}"


def _cost_table(e: Estimate) -> object:
    from rich.table import Table

    costs = e.costs
    table = Table(title=f"Cost in {costs.region} (USD)", title_justify="left")
    for column in ("pool", "machines", "replicas", "on-demand /h", "Spot /h"):
        table.add_column(column, justify="right" if "/h" in column or column == "replicas" else "left")
    for p in costs.pools:
        gpus = f" ({p.accelerator_count} x {p.accelerator_type})" if p.accelerator_type else ""
        name = f"{p.pool} {p.role}"
        table.add_row(
            name,
            p.machine_type + gpus,
            str(p.replicas),
            _money(p.on_demand_per_hour),
            _money(p.spot_per_hour),
        )
    table.add_section()
    table.add_row("total per hour", "", "", _money(costs.on_demand_per_hour), _money(costs.spot_per_hour))
    on_demand, spot = costs.on_demand_per_hour, costs.spot_per_hour
    if costs.is_tuning:
        table.add_row(
            f"one trial, {costs.hours:g} h",
            f"({costs.hours_from})",
            "",
            _money(on_demand and on_demand * costs.hours),
            _money(spot and spot * costs.hours),
        )
    span = (
        f"total for {costs.trials} trials x {costs.hours:g} h"
        if costs.is_tuning
        else f"total for {costs.hours:g} h"
    )
    table.add_row(
        span,
        "" if costs.is_tuning else f"({costs.hours_from})",
        "",
        _money(costs.total_for(on_demand)),
        _money(costs.total_for(spot)),
    )
    if e.spot is not None:
        extra = (
            f"(+{e.spot.spot_hours - e.spot.hours:.1f} h redone, restarts)"
            if e.spot.spot_hours is not None
            else "(not expected to finish)"
        )
        table.add_row(
            f"Spot, {e.spot.rate_per_hour:g} preemptions/h",
            extra,
            "",
            "",
            _money(e.spot_expected_total) if e.spot.finishes else "never ends",
        )
    return table


def _tuning_line(e: Estimate) -> str | None:
    """`8 trials, 2 at a time: wall time up to 2 h (4 rounds of 0.5 h), 4 machine-hours`."""
    costs = e.costs
    if not costs.is_tuning:
        return None
    rounds = f"{costs.rounds} round{'s' * (costs.rounds != 1)} of {costs.hours:g} h"
    return (
        f"tuning: {costs.trials} trials, {costs.parallel_trials} at a time: wall time up to"
        f" {costs.wall_hours:g} h ({rounds}), {costs.machine_hours:g} machine-hours;"
        " early stopping and shorter trials end sooner"
    )


def _comm_table(e: Estimate) -> object:
    from rich.table import Table

    from vertexdist.estimate.units import format_bytes, format_count, format_seconds

    comm, g = e.comm, e.gradients
    assert comm is not None and g is not None
    what = (
        f"{format_count(g.params)} params x {g.bytes_per_param} B = "
        if g.params and g.bytes_per_param
        else ""
    )
    table = Table(title=f"All-reduce per step ({what}{format_bytes(g.size_bytes)})", title_justify="left")
    table.add_column("path")
    table.add_column("time", justify="right")

    def show(value: float | None) -> str:
        return "unknown" if value is None else format_seconds(value)

    table.add_row(f"intra-node, {comm.gpus_per_node} GPUs (NVLink/PCIe)", show(comm.intra_node_s))
    network = f"{comm.node_gbps:g} Gbps" if comm.node_gbps is not None else "bandwidth unknown"
    table.add_row(f"inter-node ring, {comm.nodes} nodes ({network})", show(comm.inter_node_ring_s))
    table.add_row("[bold]all-reduce without reduction servers[/bold]", show(comm.ring_s))
    if comm.reducers_used:
        mine = "the template's" if e.template.reduction_server_count else "recommended"
        label = (
            f"[bold]with {comm.reducers_used} reduction servers[/bold] ({mine}, {comm.reducer_machine_type})"
        )
        table.add_row(label, show(comm.reduction_server_s))
    table.add_row(f"latency floor ({comm.buckets} buckets of 25 MiB)", format_seconds(comm.latency_s))
    return table


def _print_table(e: Estimate, console: Console) -> None:
    from rich.table import Table

    from vertexdist.estimate.reserved import reserved_cost
    from vertexdist.spec import prices

    t = e.template
    gpus = f", {t.accelerator_count} x {t.accelerator_type}" if t.accelerator_type else ""
    console.print(
        f"[bold]{t.display_name}[/bold]: {t.replica_count} x {t.machine_type}{gpus}, {e.costs.strategy}"
    )
    console.print(_cost_table(e))
    tuning = _tuning_line(e)
    if tuning:
        console.print(tuning, highlight=False)
    reserved = reserved_cost(t, e.costs)
    if reserved is not None:
        console.print(reserved.line(), highlight=False)
    if e.memory is not None:
        console.print(_memory_table(e.memory))
    if e.comm is not None:
        console.print(_comm_table(e))
    else:
        console.print("all-reduce: pass --params 350M or --gradient-bytes 1.4GB to estimate it")
    advice = Table.grid(padding=(0, 1))
    advice.add_column(justify="right")
    advice.add_column()
    for item in e.advice:
        advice.add_row(_MARKS[item.level], item.message)
    console.print("[bold]Advice[/bold]")
    console.print(advice, highlight=False)
    console.print(prices.source_line(), style="dim", highlight=False, soft_wrap=True)


def estimate(
    template: Path = typer.Argument(..., help="The job template (.yaml)."),
    params: str | None = typer.Option(
        None, "--params", help="Model parameters, e.g. 350M or 7.5B (default: the template's model_params)."
    ),
    gradient_bytes: str | None = typer.Option(
        None, "--gradient-bytes", help="Gradient bytes per step instead of --params, e.g. 1.4GB."
    ),
    grad_dtype: str | None = typer.Option(
        None, "--grad-dtype", help="fp32 (default), bf16 or fp16 gradients."
    ),
    step_compute: str | None = typer.Option(
        None, "--step-compute", help="Measured forward+backward time per step, e.g. 120ms."
    ),
    hours: float | None = typer.Option(
        None, "--hours", help="Hours to price (default: the template's timeout)."
    ),
    optimizer_bytes: float = typer.Option(
        12.0,
        "--optimizer-bytes",
        min=0,
        help="Optimizer-state bytes per parameter (K); default 12, mixed-precision Adam.",
    ),
    tensor_parallel: int = typer.Option(
        1, "--tensor-parallel", min=1, help="Tensor-parallel size: GPUs that split each layer."
    ),
    pipeline_parallel: int = typer.Option(
        1, "--pipeline-parallel", min=1, help="Pipeline-parallel size: stages the layers are split into."
    ),
    headroom: str | None = typer.Option(
        None, "--headroom", help="Share of each GPU kept for activations and buffers (default 20%)."
    ),
    preemptions_per_hour: float = typer.Option(
        0.1,
        "--preemptions-per-hour",
        min=0.0,
        help="Spot preemptions per hour for the expected Spot cost (default 0.1, our figure).",
    ),
    output_format: str = typer.Option("table", "--format", help="table (default) or json."),
) -> None:
    """Estimate TEMPLATE's cost, its all-reduce time per step, if reducers pay, and what fits in memory.

    With --params (or the template's model_params) it plans the model-state memory per GPU under DDP,
    ZeRO-1, ZeRO-2 and ZeRO-3/FSDP, over the job's data-parallel GPUs, against the GPU's memory.
    """
    from vertexdist.errors import UsageError
    from vertexdist.estimate import units
    from vertexdist.estimate.report import build_estimate, to_json
    from vertexdist.spec.loader import load_template

    if output_format not in FORMATS:
        raise UsageError(f"unknown --format {output_format!r}", hint=f"use one of {', '.join(FORMATS)}")
    if hours is not None and hours <= 0:
        raise UsageError(f"--hours must be more than zero, got {hours:g}", hint="e.g. --hours 24")
    loaded = load_template(template)
    if params is None and gradient_bytes is None and loaded.model_params is not None:
        params = f"{loaded.model_params:g}"
    gradients = _gradients(params, gradient_bytes, grad_dtype)
    compute_s = _parsed("--step-compute", units.parse_duration_s, step_compute) if step_compute else None
    count = gradients.params if gradients else None
    plan = _memory_plan(loaded, count, optimizer_bytes, tensor_parallel, pipeline_parallel, headroom)
    result = build_estimate(loaded, gradients, compute_s, hours, plan, preemptions_per_hour)
    if output_format == "json":
        typer.echo(json.dumps(to_json(result), indent=2))
        return
    from rich.console import Console

    _print_table(result, Console(width=None if Console().is_terminal else 120))


def register(app: typer.Typer) -> None:
    app.command("estimate")(estimate)
