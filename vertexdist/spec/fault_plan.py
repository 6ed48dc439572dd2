"""Fault plans: the capacity faults `emulator start --fault-plan` and `local-run --fault-plan` inject.

A fault plan is a YAML list; each entry has a `kind` and that kind's fields:

- `preempt`: a Spot VM reclaimed: SIGTERM to `replica`, SIGKILL after `grace`, `after` it started, or once
  its local rank 0 has made `after_step` steps (that rank then waits there for the signal, so the fault
  lands at that very step however fast the machine is).
- `stockout`: the job fails the way Vertex fails it when the region has no capacity.
- `quota`: the create call answers 429 RESOURCE_EXHAUSTED.
- `maintenance`: Vertex restarts `replica` on another VM with the same hostname, `after` it started or
  after `after_step` steps (SIGTERM, SIGKILL after `grace`).
- `flex_wait`: a FLEX_START job waits `wait` for capacity (`never`: past its max_wait_duration).
- `hang`: `local_rank` (default 0) of `replica` blocks after `after_step` steps (or `after` it started), as
  if its data read never returned.
- `slow`: `local_rank` of `replica` takes `delay` longer for each step: a straggler.

- `scattered_start`: each replica starts up to `max_delay` late (seeded), as Vertex starts each replica when
  its VM is ready.

`hang` and `slow` act inside the rank, through the shipped launcher's health watcher (its step hook), so they
reach an unchanged script.

Each applies to the first `times` jobs it matches. Pure: reading the file is the only I/O. Bad input is one
`FaultPlanError` naming the file, line, entry and field of every problem.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from vertexdist.errors import Problem, TemplateError, VertexdistError
from vertexdist.spec import catalog, limits
from vertexdist.spec.durations import parse_duration
from vertexdist.spec.yaml_source import SourceMap, YamlSourceError, load_yaml_document

GCE_PREEMPTION_GRACE_S = 30.0
_REPLICA = re.compile(r"^workerpool[0-3]-\d+$")
_ENTRY_LIMIT = 1000


class FaultPlanError(TemplateError):
    """A fault plan that cannot be used; each problem names the entry and field. Its message lists every
    problem, one a line with its hint, as `validate` lists a template's."""

    def __post_init__(self) -> None:
        if len(self.problems) <= 1:
            super().__post_init__()
            return
        lines = [f"the fault plan has {len(self.problems)} problems:"]
        for problem in self.problems:
            lines.append(f"  {problem.one_line()}")
            if problem.hint:
                lines.append(f"    hint: {problem.hint}")
        VertexdistError.__init__(self, "\n".join(lines), None)


def _duration(value: object) -> float:
    if isinstance(value, float) and value > 0:  # built in code (tests, the emulator's own plans)
        return value
    return parse_duration(value)


def _region(value: str | None) -> str | None:
    if value is not None and not catalog.known_region(value):
        hint = catalog.did_you_mean(value, list(catalog_regions()))
        raise ValueError(f"{value!r} is not a Vertex AI training region{'; ' + hint if hint else ''}")
    return value


class _Fault(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)

    times: int = Field(default=1, ge=1, description="How many matching jobs this fault hits.")


class _ReplicaFault(_Fault):
    replica: str = Field(default="workerpool0-0", description="The replica, e.g. workerpool1-0.")
    after: float = Field(default=0.0, description="How long after that replica started.")

    @field_validator("replica")
    @classmethod
    def _replica_name(cls, value: str) -> str:
        if not _REPLICA.match(value):
            raise ValueError(
                f"{value!r} is not a replica name; write workerpool<POOL>-<INDEX>, e.g. workerpool1-0"
            )
        return value

    @field_validator("after", mode="before")
    @classmethod
    def _after(cls, value: object) -> float:
        if value == 0 or value == "0s":
            return 0.0
        return _duration(value)


class _StepAimed(_ReplicaFault):
    after_step: int | None = Field(
        default=None,
        ge=1,
        description="Once the replica's local rank 0 has made this many steps (instead of `after`).",
    )

    @model_validator(mode="after")
    def _one_moment(self) -> _StepAimed:
        if self.after_step is not None and self.after:
            raise ValueError("give `after_step` or `after`, not both")
        return self


class PreemptFault(_StepAimed):
    """A Spot VM reclaimed: SIGTERM to the replica, SIGKILL after `grace`."""

    kind: Literal["preempt"] = "preempt"
    grace: float = Field(default=GCE_PREEMPTION_GRACE_S, description="SIGTERM to SIGKILL (GCE: 30 s).")
    outcome: Literal["job_fails", "worker_restarts"] = Field(
        default="job_fails",
        description="job_fails (the conservative reading of Vertex's docs) or worker_restarts.",
    )

    @field_validator("grace", mode="before")
    @classmethod
    def _grace(cls, value: object) -> float:
        return _duration(value)


class MaintenanceFault(_StepAimed):
    """Vertex restarts the replica on another VM with the same hostname: SIGTERM, SIGKILL after `grace`."""

    kind: Literal["maintenance"] = "maintenance"
    grace: float = Field(default=GCE_PREEMPTION_GRACE_S, description="SIGTERM to SIGKILL (GCE: 30 s).")

    @field_validator("grace", mode="before")
    @classmethod
    def _grace(cls, value: object) -> float:
        return _duration(value)


class StockoutFault(_Fault):
    """The job fails: "Resources are insufficient in region: <region>"."""

    kind: Literal["stockout"] = "stockout"
    location: str | None = Field(default=None, description="Only jobs in this region.")
    machine_type: str | None = Field(default=None, description="Only jobs on this machine type.")

    @field_validator("location")
    @classmethod
    def _location(cls, value: str | None) -> str | None:
        return _region(value)

    @field_validator("machine_type")
    @classmethod
    def _machine(cls, value: str | None) -> str | None:
        if value is not None and catalog.machine(value) is None:
            hint = catalog.did_you_mean(value, catalog_machines())
            raise ValueError(f"{value!r} is not a Vertex AI machine type{'; ' + hint if hint else ''}")
        return value


class QuotaFault(_Fault):
    """The create call answers 429 RESOURCE_EXHAUSTED, naming the job's GPU quota metric."""

    kind: Literal["quota"] = "quota"
    location: str | None = Field(default=None, description="Only creates in this region.")

    @field_validator("location")
    @classmethod
    def _location(cls, value: str | None) -> str | None:
        return _region(value)


class FlexWaitFault(_Fault):
    """A FLEX_START job waits `wait` for capacity; `never` (or past max_wait_duration): it expires."""

    kind: Literal["flex_wait"] = "flex_wait"
    wait: float | None = Field(description="How long until capacity arrives, or `never`.")

    @field_validator("wait", mode="before")
    @classmethod
    def _wait(cls, value: object) -> float | None:
        if isinstance(value, str) and value.strip().lower() == "never":
            return None
        return _duration(value)


class _RankFault(_Fault):
    replica: str = Field(default="workerpool0-0", description="The replica, e.g. workerpool1-0.")
    local_rank: int = Field(default=0, ge=0, description="The local rank on that replica (default 0).")

    @field_validator("replica")
    @classmethod
    def _replica_name(cls, value: str) -> str:
        return _ReplicaFault._replica_name(value)

    def to_worker(self) -> dict[str, object]:
        """What the rank's watcher reads (`vertexdist_launcher.health`, VERTEXDIST_HEALTH_FAULTS)."""
        return self.model_dump(exclude={"times"})


class HangFault(_RankFault):
    """That rank blocks after its `after_step`-th step (or `after` it started), as if its data read never
    returned; injected by the watcher's step hook, so an unchanged script meets it."""

    kind: Literal["hang"] = "hang"
    after_step: int | None = Field(default=None, ge=0, description="Block after this many steps.")
    after: float | None = Field(default=None, description="Block at the first step this long after start.")

    @field_validator("after", mode="before")
    @classmethod
    def _after(cls, value: object) -> float | None:
        if value is None or value == 0 or value == "0s":
            return None if value is None else 0.0
        return _duration(value)

    @model_validator(mode="after")
    def _one_moment(self) -> HangFault:
        if self.after_step is not None and self.after is not None:
            raise ValueError("give `after_step` or `after`, not both")
        if self.after_step is None and self.after is None:
            return self.model_copy(update={"after_step": 1})
        return self


class SlowFault(_RankFault):
    """That rank's every step takes `delay` longer: a straggler (the watcher's step hook sleeps)."""

    kind: Literal["slow"] = "slow"
    delay: float = Field(description="Added to each step: seconds (0.2) or a duration (1s).")

    @field_validator("delay", mode="before")
    @classmethod
    def _delay(cls, value: object) -> float:
        if isinstance(value, float | int) and not isinstance(value, bool) and 0 < value <= 3600:
            return float(value)
        return _duration(value)


class ScatteredStartFault(_Fault):
    """Vertex starts each replica as soon as its VM is ready: each replica's start is delayed by a random
    amount up to `max_delay`, the same for the same `seed`."""

    kind: Literal["scattered_start"] = "scattered_start"
    max_delay: float = Field(description="The longest delay of a replica's start, e.g. 120s.")
    seed: int = Field(default=0, description="The random delays' seed: the same seed, the same delays.")

    @field_validator("max_delay", mode="before")
    @classmethod
    def _max_delay(cls, value: object) -> float:
        return _duration(value)

    def delays(self, replicas: Iterable[str]) -> dict[str, float]:
        """Each replica's delay, in seconds (pure: seeded)."""
        chooser = random.Random(self.seed)
        return {name: round(chooser.uniform(0.0, self.max_delay), 3) for name in sorted(replicas)}


Fault = (
    PreemptFault
    | StockoutFault
    | QuotaFault
    | MaintenanceFault
    | FlexWaitFault
    | HangFault
    | SlowFault
    | ScatteredStartFault
)
RankFault = HangFault | SlowFault
KINDS: dict[str, type[_Fault]] = {
    "preempt": PreemptFault,
    "stockout": StockoutFault,
    "quota": QuotaFault,
    "maintenance": MaintenanceFault,
    "flex_wait": FlexWaitFault,
    "hang": HangFault,
    "slow": SlowFault,
    "scattered_start": ScatteredStartFault,
}


def catalog_regions() -> tuple[str, ...]:
    from vertexdist.spec.catalog_data import REGIONS

    return REGIONS


def catalog_machines() -> list[str]:
    from vertexdist.spec.catalog_data import MACHINES

    return list(MACHINES)


@dataclass(frozen=True)
class FaultPlan:
    """The faults of one plan file, in file order."""

    faults: tuple[Fault, ...]
    source: str = ""


def _entry_name(index: int, kind: object) -> str:
    return f"entry {index} ({kind})" if isinstance(kind, str) and kind in KINDS else f"entry {index}"


def _problem_message(error: Any) -> tuple[str, str | None]:  # (message, hint)
    kind = error["type"]
    value = error.get("input")
    if kind == "extra_forbidden":
        return f"unknown field {error['loc'][-1]!r}", None
    if kind == "missing":
        return f"required field {error['loc'][-1]!r} is missing", None
    if kind == "value_error":
        return str(error["msg"]).removeprefix("Value error, "), None
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"expected a whole number, got {value!r}", None
    if kind == "literal_error":
        return f"{value!r} is not one of {error['ctx']['expected']}", None
    return f"{error['msg']} (got {value!r})", None


def _check_entry(
    index: int, entry: object, source: SourceMap, file: str
) -> tuple[Fault | None, list[Problem]]:
    where = source.find((index,))
    if not isinstance(entry, dict):
        return None, [
            Problem(
                file,
                where.line,
                where.col,
                f"entry {index}",
                "each entry must be a mapping",
                "write `- kind: preempt`",
            )
        ]
    kind = entry.get("kind")
    if kind not in KINDS:
        pos = source.find((index, "kind"))
        shown = "no `kind`" if kind is None else f"kind {kind!r} is not one of {', '.join(KINDS)}"
        kind_hint = catalog.did_you_mean(str(kind), list(KINDS)) if isinstance(kind, str) else ""
        return None, [
            Problem(
                file,
                pos.line,
                pos.col,
                f"entry {index}.kind",
                shown,
                kind_hint or "kind: " + " | ".join(KINDS),
            ),
            *_unknown_fields(index, entry, source, file),
        ]
    try:
        return KINDS[kind].model_validate(entry), []  # type: ignore[return-value]
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False):
            loc = tuple(error["loc"])
            pos = source.find((index, *loc), prefer_key=error["type"] == "extra_forbidden")
            message, hint = _problem_message(error)
            if error["type"] == "extra_forbidden":
                fields = [f for f in KINDS[kind].model_fields if f != "kind"]
                close = catalog.did_you_mean(str(loc[-1]), fields)
                hint = close or (f"a {kind} fault takes: " + ", ".join(fields))
            field = ".".join(str(p) for p in loc)
            problems.append(
                Problem(file, pos.line, pos.col, f"{_entry_name(index, kind)}.{field}", message, hint)
            )
        return None, problems


def _unknown_fields(index: int, entry: dict[Any, Any], source: SourceMap, file: str) -> list[Problem]:
    """With no valid kind to check against: the fields that no kind takes (`tims`), each a problem."""
    known = sorted({f for model in KINDS.values() for f in model.model_fields})
    problems = []
    for key in entry:
        if key == "kind" or key in known:
            continue
        pos = source.find((index, key), prefer_key=True)
        close = catalog.did_you_mean(str(key), known)
        problems.append(
            Problem(
                file,
                pos.line,
                pos.col,
                f"entry {index}.{key}",
                f"unknown field {key!r}: no fault kind takes it",
                close or "the fields are: " + ", ".join(known),
            )
        )
    return problems


def parse_fault_plan(text: str, file: str = "<fault plan>") -> FaultPlan:
    """The plan written in `text`; raises FaultPlanError naming every bad entry and field."""
    try:
        data, source = load_yaml_document(text, max_values=limits.YAML_VALUES, max_depth=limits.YAML_DEPTH)
    except YamlSourceError as exc:
        raise FaultPlanError(
            [Problem(file, exc.position.line, exc.position.col, exc.path, exc.message, exc.hint)]
        ) from None
    if data is None:
        return FaultPlan((), file)
    if not isinstance(data, list):
        raise FaultPlanError(
            [
                Problem(
                    file,
                    1,
                    1,
                    "",
                    "a fault plan is a YAML list of faults",
                    "start each entry with `- kind: ...`",
                )
            ]
        )
    if len(data) > _ENTRY_LIMIT:
        raise FaultPlanError([Problem(file, 1, 1, "", f"more than {_ENTRY_LIMIT} entries", None)])
    faults: list[Fault] = []
    problems: list[Problem] = []
    for index, entry in enumerate(data):
        fault, found = _check_entry(index, entry, source, file)
        problems += found
        if fault is not None:
            faults.append(fault)
    if problems:
        raise FaultPlanError(problems)
    return FaultPlan(tuple(faults), file)


def load_fault_plan(path: str | Path) -> FaultPlan:
    """Read and check one fault plan file."""
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise FaultPlanError(
            [Problem(file, 1, 1, "", f"cannot read the fault plan: {reason}", None)]
        ) from None
    return parse_fault_plan(text, file)
