"""Vertex AI Experiments as `vertexdist experiments` and the console's comparison page read them: through the
SDK (`aiplatform.Experiment.list`, `get_experiment_df`, `ExperimentRun.get_time_series_data_frame`) on Vertex
or the emulator, at the place `vertexdist models` resolves (`jobs.models.open_models`'s `reach` and
`project_backend`); or local-run's `experiment_run.json` records under a runs folder.

A run is a plain dict: {"run_name", "state", "params", "metrics", "time_series_metrics"} (`runs_of_frame`
turns `get_experiment_df`'s `param.X` / `metric.X` / `time_series_metric.X` columns into it).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vertexdist.errors import VertexdistError
from vertexdist.jobs.where import JobPlace, open_places, open_project

if TYPE_CHECKING:
    from vertexdist.backends.config import Target

NO_PROJECT_HINT = (
    "pass --project PROJECT or set GOOGLE_CLOUD_PROJECT; for the emulator's experiments, add --emulator;"
    " for local-run's, --local"
)
EXPERIMENT_RUN = "experiment_run.json"  # local-run's record (backends.local.experiment_record)
_PREFIXES = (("param.", "params"), ("metric.", "metrics"), ("time_series_metric.", "time_series_metrics"))


def _plain(value: Any) -> Any:
    """A frame cell as JSON: numpy scalars as Python ones; NaN (a column another run has) as None."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def runs_of_frame(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`get_experiment_df(...).to_dict("records")` as runs; a run's missing columns are left out."""
    runs = []
    for record in records:
        run: dict[str, Any] = {
            "run_name": str(record.get("run_name", "")),
            "state": str(record.get("state", "")),
            "params": {},
            "metrics": {},
            "time_series_metrics": {},
        }
        for column, value in record.items():
            for prefix, key in _PREFIXES:
                if str(column).startswith(prefix) and _plain(value) is not None:
                    run[key][str(column)[len(prefix) :]] = _plain(value)
                    break
        runs.append(run)
    return runs


def local_records(runs_dir: Path) -> list[dict[str, Any]]:
    """Every readable `experiment_run.json` under the runs folder, newest run folder last."""
    found = []
    if not runs_dir.is_dir():
        return []
    for path in sorted(runs_dir.glob(f"*/{EXPERIMENT_RUN}"), key=lambda p: p.stat().st_mtime):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and record.get("experiment"):
            found.append({**record, "job": path.parent.name})
    return found


def local_experiments(runs_dir: Path) -> list[str]:
    return sorted({str(r["experiment"]) for r in local_records(runs_dir)})


def local_runs(runs_dir: Path, experiment: str) -> list[dict[str, Any]]:
    """An experiment's runs from local-run's records (each written when its job ended: COMPLETE)."""
    runs = []
    for record in local_records(runs_dir):
        if record["experiment"] != experiment:
            continue
        series = record.get("time_series") or {}
        runs.append(
            {
                "run_name": str(record.get("experiment_run", "")),
                "state": "COMPLETE",
                "params": dict(record.get("params") or {}),
                "metrics": dict(record.get("metrics") or {}),
                "time_series_metrics": {k: v[-1][1] for k, v in series.items() if v},
                "time_series": {k: [list(p) for p in v] for k, v in series.items()},
                "job": record["job"],
            }
        )
    return runs


class Experiments:
    """One project and location's experiments through the SDK (`aiplatform.init` for the target)."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self._credentials: Any = None

    @property
    def aiplatform(self) -> Any:
        from google.cloud import aiplatform

        from vertexdist.backends.vertex.clients import credentials_for, quiet_sdk_logging

        # The SDK's configuration is global: set it for this target before each use, so another init in
        # the same process (a test's, another target's) never sends these calls elsewhere.
        if self._credentials is None:
            quiet_sdk_logging()
            self._credentials = credentials_for(self.target)
        extra = {"api_endpoint": self.target.api_endpoint} if self.target.api_endpoint else {}
        aiplatform.init(
            project=self.target.project,
            location=self.target.location,
            credentials=self._credentials,
            api_transport=self.target.api_transport,
            **extra,
        )
        return aiplatform

    def _call(self, doing: str, call: Any) -> Any:
        from google.api_core.exceptions import GoogleAPIError, NotFound

        try:
            return call()
        except NotFound as exc:
            raise VertexdistError(
                f"{doing}: not found in {self.target.parent}",
                hint="its experiments: vertexdist experiments list (with the same flags)",
            ) from exc
        except GoogleAPIError as exc:
            raise VertexdistError(f"{doing} in {self.target.parent} failed: {exc}") from exc
        except ValueError as exc:  # the SDK's own check of a name it formed (a run's display name)
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise VertexdistError(f"{doing} in {self.target.parent} failed: {message}") from exc

    def names(self) -> list[str]:
        found = self._call("listing the experiments", lambda: self.aiplatform.Experiment.list())
        return sorted(str(e.name) for e in found)

    def runs(self, experiment: str) -> list[dict[str, Any]]:
        def read() -> Any:
            try:
                return self.aiplatform.get_experiment_df(experiment)
            except ValueError:
                # The SDK could not read a run's time series: it names a run's TensorBoard run after the
                # run's display name, which another client may have set to no resource id ("My run #2").
                # Every run's params and metrics still read; `time_series` says which run's series do not.
                return self.aiplatform.get_experiment_df(experiment, include_time_series=False)

        frame = self._call(f"reading experiment {experiment}", read)
        return runs_of_frame(frame.to_dict("records"))

    def time_series(self, experiment: str, run: str) -> dict[str, list[list[float]]]:
        """A run's time series as [step, value] pairs per metric (none: {})."""
        frame = self._call(
            f"reading run {run} of experiment {experiment}",
            lambda: self.aiplatform.ExperimentRun(run, experiment=experiment).get_time_series_data_frame(),
        )
        if frame is None or frame.empty:
            return {}
        columns = frame.to_dict("list")
        steps = [_plain(s) for s in columns.get("step", [])]
        series: dict[str, list[list[float]]] = {}
        for name, values in columns.items():
            if name in ("step", "wall_time"):
                continue
            points = [[s, _plain(v)] for s, v in zip(steps, values, strict=False)]
            series[str(name)] = [p for p in points if p[1] is not None]
        return series


@contextmanager
def open_experiments(place: JobPlace, env: Mapping[str, str] = os.environ) -> Iterator[Experiments]:
    """The experiments of the place's project and location, usable until the `with` ends."""
    with open_project(place, env, no_project_hint=NO_PROJECT_HINT) as backend:
        yield Experiments(backend.target)


@contextmanager
def open_experiments_at(
    places: list[JobPlace], env: Mapping[str, str] = os.environ
) -> Iterator[list[Experiments]]:
    """The experiments of each place (`jobs.registry_place.experiment_places`), until the `with` ends."""
    with open_places(places, env, no_project_hint=NO_PROJECT_HINT) as backends:
        yield [Experiments(backend.target) for backend in backends]
