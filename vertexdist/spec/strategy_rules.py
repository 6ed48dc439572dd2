"""Checks of what a template's args tell a training library about the job's shape (examples/ in docs).

- `--deepspeed_config FILE` (DeepSpeed's own flag name, also `--deepspeed-config`): the file must ship with
  the code (inside `trainer.package`, or beside `trainer.script`), parse as JSON, name a ZeRO stage DeepSpeed
  has (0-3), and, when it fixes `train_batch_size`, equal micro-batch x accumulation x processes — DeepSpeed
  checks that only once every replica is up; `deepspeed` must be in trainer.requirements on a prebuilt image.
- `--tensor-model-parallel-size` / `--pipeline-model-parallel-size` (Megatron-LM's names): TP x PP must
  divide the job's processes; TP larger than a machine's processes sends every layer's all-reduce over the
  network (a warning).

The job's processes: replicas x processes per replica (torchrun's nproc_per_node: the template's, else one
per GPU, else 1); `launcher: python` runs one per machine.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vertexdist.spec.findings import Finding
from vertexdist.spec.machine_rules import requested_accelerator

if TYPE_CHECKING:
    from vertexdist.spec.models import JobTemplate

DEEPSPEED_FLAGS = ("--deepspeed_config", "--deepspeed-config")
TP_FLAGS = ("--tensor-model-parallel-size", "--tensor_model_parallel_size")
PP_FLAGS = ("--pipeline-model-parallel-size", "--pipeline_model_parallel_size")
_DEEPSPEED_REQ = re.compile(r"^\s*deepspeed\s*(\[|[=<>!~;@ ]|$)", re.IGNORECASE)


def flag_value(args: Sequence[str], flags: Sequence[str]) -> tuple[int, str] | None:
    """(index of the value in args, value) of the last `--flag=value` or `--flag value`; None if absent."""
    found: tuple[int, str] | None = None
    for index, arg in enumerate(args):
        for flag in flags:
            if arg.startswith(flag + "="):
                found = (index, arg[len(flag) + 1 :])
            elif arg == flag and index + 1 < len(args):
                found = (index + 1, args[index + 1])
    return found


def processes_per_replica(t: JobTemplate) -> int:
    trainer = t.trainer
    if trainer.launcher != "torchrun":
        return 1
    if trainer.nproc_per_node is not None:
        return trainer.nproc_per_node
    gpus = t.accelerator_count if requested_accelerator(t.accelerator_type) is not None else 0
    return gpus or 1


def job_processes(t: JobTemplate) -> int:
    return t.replica_count * processes_per_replica(t)


def _shape(t: JobTemplate) -> str:
    per = processes_per_replica(t)
    return f"{job_processes(t)} processes ({t.replica_count} replicas x {per})"


def _code_folder(t: JobTemplate) -> Path | None:
    """Where a relative config path is looked up: the folder the code ships from."""
    if t.trainer.package is not None:
        return Path(t.trainer.package)
    if t.trainer.script is not None:
        return Path(t.trainer.script).parent
    return None


def _parse(text: str) -> tuple[Any, str | None]:
    """(value, None) or (None, why): JSON, else HJSON where installed (DeepSpeed reads both)."""
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        why = f"line {exc.lineno} column {exc.colno}: {exc.msg}"
    try:
        hjson = importlib.import_module("hjson")
    except ImportError:
        return None, why
    try:
        return hjson.loads(text), None
    except Exception:  # hjson raises its own HjsonDecodeError (a ValueError); report JSON's position
        return None, why


def _batch_findings(config: dict[str, Any], path: str, name: str, t: JobTemplate) -> Iterator[Finding]:
    batch = config.get("train_batch_size")
    micro = config.get("train_micro_batch_size_per_gpu")
    steps = config.get("gradient_accumulation_steps", 1)
    values = (batch, micro, steps)
    if batch is None or micro is None or not all(isinstance(v, int) and v > 0 for v in values):
        return  # DeepSpeed derives the missing one (and "auto" belongs to Hugging Face's integration)
    processes = job_processes(t)
    if batch != micro * steps * processes:
        yield Finding(
            path,
            f"{name}: train_batch_size {batch} is not train_micro_batch_size_per_gpu {micro} x"
            f" gradient_accumulation_steps {steps} x {_shape(t)} = {micro * steps * processes};"
            " DeepSpeed stops every rank on it",
            f"set train_batch_size to {micro * steps * processes}, or drop it and DeepSpeed derives it",
        )


def deepspeed_config_is_valid(t: JobTemplate) -> Iterator[Finding]:
    found = flag_value(t.trainer.args, DEEPSPEED_FLAGS)
    if found is None:
        return
    index, name = found
    path = f"trainer.args[{index}]"
    if name.startswith(("gs://", "/gcs/")):
        return  # read on the replicas; nothing here to check
    folder = _code_folder(t)
    config_file = Path(name) if Path(name).is_absolute() or folder is None else folder / name
    if not config_file.is_file():
        where = f"in {folder}" if folder is not None else "here"
        yield Finding(
            path,
            f"the DeepSpeed config {name!r} is not {where}, so it does not ship with the code",
            "put the JSON file inside trainer.package (it ships with the package) and name it relative to"
            " the package folder",
        )
        return
    value, why = _parse(config_file.read_text(encoding="utf-8", errors="replace"))
    if why is not None:
        yield Finding(path, f"the DeepSpeed config {config_file} is not valid JSON: {why}", "fix the file")
        return
    if not isinstance(value, dict):
        yield Finding(
            path,
            f"the DeepSpeed config {config_file} is a JSON {type(value).__name__}, not an object",
            'write it as {"train_micro_batch_size_per_gpu": ..., "zero_optimization": {...}}',
        )
        return
    zero = value.get("zero_optimization", {})
    stage = zero.get("stage", 0) if isinstance(zero, dict) else None
    if stage not in (0, 1, 2, 3):
        yield Finding(
            path,
            f"{config_file.name}: zero_optimization.stage is {stage!r};"
            " DeepSpeed's ZeRO stages are 0, 1, 2, 3",
            "2 partitions optimizer states and gradients, 3 the parameters too",
        )
    yield from _batch_findings(value, path, config_file.name, t)
    if t.build is None and not any(_DEEPSPEED_REQ.match(req) for req in t.trainer.requirements):
        yield Finding(
            "trainer.requirements",
            "the args name a DeepSpeed config, but Vertex's prebuilt PyTorch images do not have DeepSpeed",
            "add 'deepspeed' (pinned, e.g. 'deepspeed==0.19.8') to trainer.requirements",
            "warning",
        )


def _size(t: JobTemplate, flags: Sequence[str]) -> tuple[str, int | None] | None:
    found = flag_value(t.trainer.args, flags)
    if found is None:
        return None
    index, text = found
    try:
        return f"trainer.args[{index}]", int(text)
    except ValueError:
        return f"trainer.args[{index}]", None


def model_parallel_sizes_fit(t: JobTemplate) -> Iterator[Finding]:
    tp_found, pp_found = _size(t, TP_FLAGS), _size(t, PP_FLAGS)
    if tp_found is None and pp_found is None:
        return
    for found, flag in ((tp_found, TP_FLAGS[0]), (pp_found, PP_FLAGS[0])):
        if found is not None and (found[1] is None or found[1] < 1):
            yield Finding(found[0], f"{flag} must be a whole number of at least 1", f"e.g. {flag}=2")
            return
    tp = tp_found[1] if tp_found and tp_found[1] else 1
    pp = pp_found[1] if pp_found and pp_found[1] else 1
    path = (tp_found or pp_found or ("trainer.args", 0))[0]
    processes = job_processes(t)
    if processes % (tp * pp):
        fitting = [n for n in range(1, processes + 1) if processes % n == 0]
        yield Finding(
            path,
            f"tensor parallel {tp} x pipeline parallel {pp} = {tp * pp} does not divide the job's"
            f" {_shape(t)}; every model replica needs TP x PP processes",
            f"pick sizes whose product is one of {', '.join(map(str, fitting))}, or change the job's shape",
        )
        return
    per = processes_per_replica(t)
    if t.replica_count > 1 and tp > per:
        yield Finding(
            tp_found[0] if tp_found else path,
            f"tensor parallel {tp} is more than the {per} processes of one machine: every layer's"
            " all-reduce crosses the network between machines",
            f"keep tensor parallel within a machine (at most {per}) and use pipeline or data parallel"
            " across machines",
            "warning",
        )


RULES = (deepspeed_config_is_valid, model_parallel_sizes_fit)
