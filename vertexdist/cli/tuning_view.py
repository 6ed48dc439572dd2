"""What `local-run` shows while a tuning job runs: a rich live table of its trials on a terminal (parameters,
state, latest and final metric, best marked), one line per trial change otherwise, or JSON lines (`--json`).
"""

from __future__ import annotations

import json
import sys
import time
from typing import IO, Any

from vertexdist.tuning.driver import Snapshot
from vertexdist.wire.trials import Trial, trial_to_json

_STATE_STYLE = {
    "ACTIVE": "cyan",
    "STOPPING": "yellow",
    "SUCCEEDED": "green",
    "INFEASIBLE": "bold red",
}


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def trial_state(trial: Trial, snapshot: Snapshot) -> str:
    """The trial's state, with `(stopped early)` when the early-stopping rule ended it."""
    return trial.state + (" (stopped early)" if trial.id in snapshot.stopped_early else "")


def latest_value(trial: Trial, metric: str) -> tuple[float | None, int | None]:
    """The trial's final value of `metric` once it has one, else the latest it reported, and that step."""
    if trial.final_measurement is not None:
        return trial.final_measurement.values.get(metric), trial.final_measurement.step
    for m in reversed(trial.measurements):
        if metric in m.values:
            return m.values[metric], m.step
    return None, None


def reason_lines(trial: Trial, indent: str = "    ") -> list[str]:
    """A trial's infeasible reason: its first line, then the failed replica's last lines (its cause) indented
    below it."""
    first, *rest = (trial.infeasible_reason or "").splitlines() or [""]
    return [first, *(f"{indent}{line}" for line in rest)]


def failure_lines(trials: tuple[Trial, ...] | list[Trial]) -> list[str]:
    """`trial 2 INFEASIBLE: <why>` and its cause, for each trial whose job failed."""
    lines: list[str] = []
    for trial in trials:
        if trial.state == "INFEASIBLE" and trial.infeasible_reason:
            first, *cause = reason_lines(trial)
            lines += [f"trial {trial.id} INFEASIBLE: {first}", *cause]
    return lines


class TuningView:
    def start(self) -> None:
        pass

    def refresh(self, snapshot: Snapshot) -> None:
        pass

    def stop(self) -> None:
        pass


class TrialTable(TuningView):
    """A rich live table: one row per trial, the best one marked, under the job's state and time."""

    def __init__(self, job_id: str, metric: str, parameters: list[str]) -> None:
        from rich.console import Console
        from rich.live import Live

        self._job_id = job_id
        self._metric = metric
        self._parameters = parameters
        self._started = time.monotonic()
        self._live = Live(console=Console(), refresh_per_second=4, transient=False)
        self._told: set[str] = set()  # trials whose failure is printed

    def start(self) -> None:
        self._live.start()

    def _render(self, snapshot: Snapshot) -> Any:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        table = Table(expand=False, show_edge=False, pad_edge=False)
        for column in ("trial", "state", *self._parameters, self._metric, "step"):
            table.add_column(column, no_wrap=True, justify="right" if column in ("trial", "step") else "left")
        for trial in snapshot.trials:
            values = trial.parameter_values
            value, step = latest_value(trial, self._metric)
            best = trial.id == snapshot.best
            table.add_row(
                Text(trial.id + (" *" if best else ""), style="bold" if best else ""),
                Text(trial_state(trial, snapshot), style=_STATE_STYLE.get(trial.state, "")),
                *(_format(values.get(name)) for name in self._parameters),
                _number(value),
                "" if step is None else str(step),
            )
        header = Text.assemble(
            ("tuning job ", ""),
            (self._job_id, "bold"),
            f"  {snapshot.outcome}  {len(snapshot.trials)} trials  {time.monotonic() - self._started:.1f}s",
        )
        return Group(header, table)

    def refresh(self, snapshot: Snapshot) -> None:
        from rich.text import Text

        for trial in snapshot.trials:
            if trial.state == "INFEASIBLE" and trial.id not in self._told:
                self._told.add(trial.id)
                for line in failure_lines([trial]):  # above the table, where they stay
                    self._live.console.print(Text(line, style="red" if line.startswith("trial") else ""))
        self._live.update(self._render(snapshot))

    def stop(self) -> None:
        self._live.stop()


def _format(value: object) -> str:
    return _number(value) if isinstance(value, float) else ("" if value is None else str(value))


class TrialLines(TuningView):
    """`trial 3 ACTIVE lr=0.01 batch-size=32`, then `trial 3 SUCCEEDED val_accuracy 0.78 (step 4)`."""

    def __init__(self, out: IO[str], metric: str) -> None:
        self._out = out
        self._metric = metric
        self._seen: dict[str, str] = {}

    def refresh(self, snapshot: Snapshot) -> None:
        for trial in snapshot.trials:
            state = trial_state(trial, snapshot)
            if self._seen.get(trial.id) == state:
                continue
            self._seen[trial.id] = state
            if trial.state == "ACTIVE":
                values = " ".join(f"{k}={_format(v)}" for k, v in trial.parameters)
                line = f"trial {trial.id} {state} {values}"
            else:
                value, step = latest_value(trial, self._metric)
                line = f"trial {trial.id} {state}"
                if value is not None:
                    line += f" {self._metric} {_number(value)} (step {step})"
                if trial.infeasible_reason:
                    first, *cause = reason_lines(trial)
                    line = "\n".join([f"{line}: {first}", *cause])
            self._out.write(line + "\n")
            self._out.flush()


class TrialJson(TuningView):
    """One JSON object per trial change: `{"event": "trial", ...Vertex's trial shape}`."""

    def __init__(self, out: IO[str], job_id: str) -> None:
        self._out = out
        self._job_id = job_id
        self._seen: dict[str, str] = {}

    def refresh(self, snapshot: Snapshot) -> None:
        for trial in snapshot.trials:
            body = json.dumps(trial_to_json(trial), sort_keys=True)
            if self._seen.get(trial.id) == body:
                continue
            self._seen[trial.id] = body
            event = {"event": "trial", "job_id": self._job_id, **trial_to_json(trial)}
            self._out.write(json.dumps(event) + "\n")
            self._out.flush()


def choose_view(
    job_id: str, metric: str, parameters: list[str], *, json_events: bool, out: IO[str] | None = None
) -> TuningView:
    stream = out or sys.stdout
    if json_events:
        return TrialJson(stream, job_id)
    if stream.isatty():
        return TrialTable(job_id, metric, parameters)
    return TrialLines(stream, metric)
