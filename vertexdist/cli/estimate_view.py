"""`vertexdist estimate`'s table view: rich tables of an `Estimate` (vertexdist.estimate.report)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from vertexdist.estimate.memory import MemoryPlan
    from vertexdist.estimate.report import Estimate

_MARKS = {"warning": "[yellow]![/yellow]", "info": "[cyan]-[/cyan]", "ok": "[green]ok[/green]"}


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
            f"Spot, {e.spot.rate_per_hour:g} preemptions/h"
            + (f" ({e.spot_from})" if e.spot_from.startswith("this project") else ""),
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


def print_estimate(e: Estimate, console: Console) -> None:
    """The table view of `estimate`: cost, tuning and reserved lines, memory, all-reduce, advice, prices."""
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
    if e.advice:  # no heading over nothing
        advice = Table.grid(padding=(0, 1))
        advice.add_column(justify="right")
        advice.add_column()
        for item in e.advice:
            advice.add_row(_MARKS[item.level], item.message)
        console.print("[bold]Advice[/bold]")
        console.print(advice, highlight=False)
    console.print(prices.source_line(), style="dim", highlight=False, soft_wrap=True)
