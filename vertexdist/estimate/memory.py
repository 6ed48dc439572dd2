"""Model-state memory per GPU under DDP and ZeRO stages 1-3 (FSDP), against the GPU's memory.

The model of Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models"
(SC 2020, arXiv:1910.02054), §3.1 and Figure 1. Mixed-precision training with Adam keeps, per parameter,
2 bytes of fp16/bf16 parameters, 2 bytes of fp16/bf16 gradients and K = 12 bytes of optimizer state (an fp32
copy of the parameters, Adam's momentum and variance, 4 bytes each). With Ψ parameters over Nd data-parallel
ranks, each GPU holds:

    DDP               (2 + 2 + K) Ψ           every rank holds everything
    ZeRO-1  (P_os)    2Ψ + 2Ψ + KΨ / Nd       optimizer states sharded
    ZeRO-2  (P_os+g)  2Ψ + (2 + K) Ψ / Nd     and gradients
    ZeRO-3  (P_os+g+p) (2 + 2 + K) Ψ / Nd     and parameters (PyTorch FSDP's full sharding)

Tensor and pipeline parallelism split the model first: each of their tp x pp groups holds Ψ / (tp·pp)
parameters, and the data-parallel size is the job's GPUs / (tp·pp) (the paper's §8, ZeRO with MP).

Model states are not all of a GPU's memory: activations, temporary buffers, fragmentation and the CUDA
context take the rest (the paper's residual states). The planner does not model them; it keeps a stated share
of each GPU for them (the headroom, 20% unless told) and calls a strategy a fit when its model states fit in
the remainder. Sizes are in GB of 10^9 bytes, as in the paper's Table 1 and the GPUs' names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vertexdist.estimate.advice import Advice
from vertexdist.spec import catalog

if TYPE_CHECKING:
    from vertexdist.spec.models import JobTemplate

STRATEGIES: tuple[str, ...] = ("ddp", "zero1", "zero2", "zero3")
LABELS: dict[str, str] = {"ddp": "DDP", "zero1": "ZeRO-1", "zero2": "ZeRO-2", "zero3": "ZeRO-3/FSDP"}
PARAM_BYTES = 2  # fp16/bf16 parameters
GRAD_BYTES = 2  # fp16/bf16 gradients
ADAM_MIXED_PRECISION_K = 12  # fp32 parameters, momentum and variance
DEFAULT_HEADROOM = 0.20
GB = 1e9


class PlanError(ValueError):
    """Parallel sizes that do not fit the job; `hint` says which would."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


@dataclass(frozen=True)
class Parts:
    """One GPU's model states in bytes: parameters, gradients, optimizer states."""

    params: float
    grads: float
    optimizer: float

    @property
    def total(self) -> float:
        return self.params + self.grads + self.optimizer


def model_states(
    params: float, data_parallel: int, strategy: str, k: float = ADAM_MIXED_PRECISION_K
) -> Parts:
    """Bytes of model states on one GPU for `params` parameters over `data_parallel` ranks (Figure 1)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; one of {', '.join(STRATEGIES)}")
    nd = data_parallel
    p, g, o = PARAM_BYTES * params, GRAD_BYTES * params, k * params
    return Parts(
        params=p / nd if strategy == "zero3" else p,
        grads=g / nd if strategy in ("zero2", "zero3") else g,
        optimizer=o if strategy == "ddp" else o / nd,
    )


@dataclass(frozen=True)
class Layout:
    """The job's GPUs and how they are split: tensor x pipeline model parallelism, the rest data parallel."""

    gpus_per_node: int
    nodes: int
    tensor: int = 1
    pipeline: int = 1

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def model_parallel(self) -> int:
        return self.tensor * self.pipeline

    @property
    def data_parallel(self) -> int:
        return self.gpus // self.model_parallel

    def describe(self) -> str:
        """`64 GPUs (8 per machine x 8 machines): data parallel 16 x tensor 4`."""
        shape = f"{self.gpus} GPU{'s' * (self.gpus != 1)} ({self.gpus_per_node} per machine x {self.nodes})"
        split = f"data parallel {self.data_parallel}"
        if self.tensor > 1:
            split += f" x tensor {self.tensor}"
        if self.pipeline > 1:
            split += f" x pipeline {self.pipeline}"
        return f"{shape}: {split}"


def layout(gpus_per_node: int, nodes: int, tensor: int = 1, pipeline: int = 1) -> Layout:
    """The layout, or PlanError when tensor x pipeline does not divide the job's GPUs."""
    if tensor < 1 or pipeline < 1:
        raise PlanError(
            f"--tensor-parallel and --pipeline-parallel must be at least 1, got {tensor} and {pipeline}",
            "leave them out for data parallelism alone",
        )
    shape = Layout(gpus_per_node, nodes, tensor, pipeline)
    if shape.gpus % shape.model_parallel:
        sizes = [d for d in range(2, shape.gpus + 1) if shape.gpus % d == 0]
        raise PlanError(
            f"tensor {tensor} x pipeline {pipeline} = {shape.model_parallel} does not divide the job's"
            f" {shape.gpus} GPUs ({gpus_per_node} per machine x {nodes} machines)",
            f"tensor x pipeline must divide {shape.gpus}: one of {', '.join(map(str, sizes[:8]))}"
            + (", ..." if len(sizes) > 8 else ""),
        )
    return shape


@dataclass(frozen=True)
class MemoryPlan:
    params: float
    optimizer_bytes: float
    layout: Layout
    accelerator_type: str | None
    gpu_memory_gb: float | None
    headroom: float

    def parts(self, strategy: str) -> Parts:
        """One GPU's model states under `strategy`: its model-parallel shard over the data-parallel ranks."""
        shard = self.params / self.layout.model_parallel
        return model_states(shard, self.layout.data_parallel, strategy, self.optimizer_bytes)

    @property
    def per_gpu_gb(self) -> dict[str, float]:
        return {s: self.parts(s).total / GB for s in STRATEGIES}

    @property
    def usable_gb(self) -> float | None:
        """What the model states may take of one GPU: its memory less the headroom."""
        return None if self.gpu_memory_gb is None else self.gpu_memory_gb * (1 - self.headroom)

    @property
    def fits(self) -> dict[str, bool | None]:
        usable = self.usable_gb
        return {s: None if usable is None else gb <= usable for s, gb in self.per_gpu_gb.items()}

    def gpus_for_zero3(self) -> int | None:
        """The fewest GPUs over which ZeRO-3's model states fit (it shards everything over all of them)."""
        usable = self.usable_gb
        if not usable:
            return None
        return math.ceil((PARAM_BYTES + GRAD_BYTES + self.optimizer_bytes) * self.params / GB / usable)


def plan_memory(
    params: float,
    shape: Layout,
    accelerator_type: str | None,
    optimizer_bytes: float = ADAM_MIXED_PRECISION_K,
    headroom: float = DEFAULT_HEADROOM,
) -> MemoryPlan:
    return MemoryPlan(
        params=params,
        optimizer_bytes=optimizer_bytes,
        layout=shape,
        accelerator_type=accelerator_type,
        gpu_memory_gb=catalog.gpu_memory_gb(accelerator_type),
        headroom=headroom,
    )


def format_gb(value: float) -> str:
    """3 significant digits, as the paper's Table 1: 120, 31.4, 16.6, 1.88, 0.469; whole GB from 1,000."""
    return f"{value:,.0f}" if value >= 1000 else f"{value:.3g}"


def _gpu(plan: MemoryPlan) -> str:
    assert plan.accelerator_type is not None and plan.gpu_memory_gb is not None
    name = catalog.accelerator_name(plan.accelerator_type)
    article = "an" if name[:1] in "AEFHILMNORSX" else "a"  # the letter's name: an A100, an H100, an L4
    return f"{article} {name} has {plan.gpu_memory_gb:g}"


def memory_advice(plan: MemoryPlan, usable: tuple[str, ...] = STRATEGIES) -> list[Advice]:
    """A verdict: which strategy to use, or that none of `usable` fits and what would.

    DDP, ZeRO-1 and ZeRO-2 move the same bytes per step (the paper's §7: 2Ψ); ZeRO-3 1.5 times that. So the
    advice is DDP when it fits, else ZeRO-2 (all of ZeRO-1's saving and more, at no cost), else ZeRO-3.
    """
    gb, fits, room = plan.per_gpu_gb, plan.fits, plan.usable_gb
    shape = plan.layout
    notes = _layout_notes(plan)
    if room is None:
        what = plan.accelerator_type or "a CPU machine"
        return [
            Advice(
                "info",
                f"model states: DDP needs {format_gb(gb['ddp'])} GB per device; no GPU memory known for"
                f" {what}, so no verdict",
            ),
            *notes,
        ]
    headroom = f"{room:.3g} GB after {plan.headroom:.0%} kept for activations"
    over = f"over these {shape.data_parallel} data-parallel GPUs" if shape.data_parallel > 1 else "on 1 GPU"
    ddp = f"{LABELS['ddp']} needs {format_gb(gb['ddp'])} GB per GPU, {_gpu(plan)} ({headroom})"
    choice = next((s for s in ("ddp", "zero2", "zero3") if s in usable and fits[s]), None)
    if choice == "ddp":
        return [Advice("ok", f"model states fit: {ddp}"), *notes]
    if choice is not None:
        cost = " at 1.5x DDP's communication" if choice == "zero3" else " at DDP's communication volume"
        also = [s for s in STRATEGIES if s not in ("ddp", choice) and s in usable]
        rest = "; ".join(f"{LABELS[s]} {format_gb(gb[s])} GB" for s in also)
        return [
            Advice(
                "warning",
                f"{ddp}; {LABELS[choice]} {over} needs {format_gb(gb[choice])} GB{cost}"
                + (f" ({rest})" if rest else ""),
            ),
            *notes,
        ]
    best = min(usable, key=lambda s: gb[s])
    even = f"; {LABELS[best]} {over} still needs {format_gb(gb[best])} GB" if best != "ddp" else ""
    need = plan.gpus_for_zero3()
    if "zero3" not in usable and fits["zero3"]:
        more = f"ZeRO-3/FSDP would fit ({format_gb(gb['zero3'])} GB)"
    else:
        machines = math.ceil(need / shape.gpus_per_node) if need else 0
        like = f" ({machines} machines like these)" if shape.gpus_per_node > 1 else ""
        more = f"ZeRO-3/FSDP fits from {need} GPUs{like}" if need and need > shape.gpus else ""
    ways = [w for w in (more, "CPU offload (DeepSpeed offload_optimizer) or a smaller optimizer state") if w]
    return [Advice("warning", f"no strategy fits: {ddp}{even}; {', or '.join(ways)}"), *notes]


def template_layout(t: JobTemplate, tensor: int = 1, pipeline: int = 1) -> Layout:
    """The template's GPUs (per machine x training machines) split tensor x pipeline x data parallel."""
    per_node = t.accelerator_count or t.trainer.nproc_per_node or 1
    return layout(per_node, t.replica_count, tensor, pipeline)


def trainer_strategy(t: JobTemplate) -> str | None:
    """The bundled trainer's `--strategy` from the template's args (`ddp` when it names none)."""
    if not t.trainer.is_bundled:
        return None
    args, value = list(t.trainer.args), "ddp"
    for i, arg in enumerate(args):
        if arg.startswith("--strategy="):
            value = arg.split("=", 1)[1]
        elif arg == "--strategy" and i + 1 < len(args):
            value = args[i + 1]
    return value


def usable_strategies(t: JobTemplate) -> tuple[str, ...]:
    """What the template's code can run: the bundled trainer DDP and FSDP (ZeRO-3), other code any."""
    return ("ddp", "zero3") if t.trainer.is_bundled else STRATEGIES


def _layout_notes(plan: MemoryPlan) -> list[Advice]:
    shape, notes = plan.layout, []
    if shape.tensor > shape.gpus_per_node:
        notes.append(
            Advice(
                "warning",
                f"tensor parallel size {shape.tensor} spans machines: its per-layer all-reduces would cross"
                f" the network; keep it within a machine's {shape.gpus_per_node} GPUs",
            )
        )
    elif shape.tensor > 1 and shape.gpus_per_node % shape.tensor:
        notes.append(
            Advice(
                "warning",
                f"tensor parallel size {shape.tensor} does not divide a machine's {shape.gpus_per_node} GPUs:"
                " some tensor-parallel groups would cross machines",
            )
        )
    if shape.model_parallel > 1:
        notes.append(
            Advice(
                "info",
                f"the all-reduce figures are data parallelism's over all {shape.gpus} GPUs; with tensor x"
                f" pipeline = {shape.model_parallel}, each of the {shape.model_parallel} data-parallel groups"
                f" reduces 1/{shape.model_parallel} of the gradients over {shape.data_parallel} GPUs",
            )
        )
    if shape.pipeline > 1:
        notes.append(
            Advice(
                "info",
                "with pipeline parallelism DeepSpeed takes ZeRO-1 at most (its pipeline engine refuses"
                " ZeRO-2 and ZeRO-3)",
            )
        )
    return notes
