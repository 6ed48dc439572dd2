"""`vertexdist estimate TEMPLATE`: what a job costs and how fast its gradients move, offline, before it runs.

Prices come from the table in `vertexdist.spec.prices_data`; the all-reduce model from
`vertexdist.estimate.formulas`; the tables are `estimate_view`'s. Never imports google-cloud-aiplatform or
torch.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer

if TYPE_CHECKING:
    from vertexdist.estimate.memory import MemoryPlan
    from vertexdist.estimate.report import Gradients
    from vertexdist.spec.models import JobTemplate

T = TypeVar("T")
FORMATS = ("table", "json")


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


def _spot_inputs(loaded: Any, rate: float | None) -> dict[str, Any]:
    """The expected Spot cost's inputs: the flag's rate; else this project's failure history for the
    template's machine type and region on Spot (`vertexdist.goodput.history`: its preemptions per hour, the
    start-up and the recomputed time each one cost), where it holds an interruption; else the defaults."""
    from vertexdist.estimate.spot import DEFAULT_PREEMPTIONS_PER_HOUR

    if rate is not None:
        return {"preemptions_per_hour": rate, "spot_from": "--preemptions-per-hour"}
    from vertexdist.goodput.history import load, summary

    seen = summary(load(), loaded.machine_type, loaded.location, "SPOT")
    if seen is None or not seen.interruptions or seen.per_hour is None:
        return {"preemptions_per_hour": DEFAULT_PREEMPTIONS_PER_HOUR}
    found: dict[str, Any] = {
        "preemptions_per_hour": round(seen.per_hour, 6),
        "restart_minutes": seen.startup_s_per_attempt / 60.0,
        "spot_from": f"this project's history ({seen.attempts} attempts, {seen.running_hours:.2f} h)",
    }
    if seen.recomputed_s_per_interruption is not None:
        found["recomputed_minutes"] = seen.recomputed_s_per_interruption / 60.0
    return found


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
    preemptions_per_hour: float | None = typer.Option(
        None,
        "--preemptions-per-hour",
        min=0.0,
        help="Spot preemptions per hour for the expected Spot cost (default: this project's failure history"
        " for the template's machines, else 0.1, our figure).",
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
    result = build_estimate(
        loaded, gradients, compute_s, hours, plan, **_spot_inputs(loaded, preemptions_per_hour)
    )
    if output_format == "json":
        typer.echo(json.dumps(to_json(result), indent=2))
        return
    from rich.console import Console

    from vertexdist.cli.estimate_view import print_estimate

    print_estimate(result, Console(width=None if Console().is_terminal else 120))


def register(app: typer.Typer) -> None:
    app.command("estimate")(estimate)
