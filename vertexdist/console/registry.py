"""What the console's Models and experiment pages show: the remote target's Model Registry (each model
with its versions and aliases, a version linked to the job that made it) and Vertex AI Experiments (runs
side by side: params, metrics and time series), read through `backends.vertex.models.RegisteredModels` and
`jobs.experiments.Experiments` (the SDK); the local side's experiments are local-run's `experiment_run.json`
records under the runs folder.

The readers are injected (`ModelReader`, `ExperimentReader`), so the shaping here is testable on its own; a
reader's failure is a page's `problem` line, never a traceback. Experiment names are checked before any
call (`EXPERIMENT_NAME`: what a metadata context id may be).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from vertexdist.console.refs import parse_ref, vertex_ref
from vertexdist.errors import VertexdistError
from vertexdist.jobs.experiments import local_experiments, local_runs

if TYPE_CHECKING:
    from vertexdist.backends.config import Target

EXPERIMENT_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,127}")
WHERES = ("local", "remote")


class ModelReader(Protocol):
    def list_models(self, filter_text: str = "") -> list[dict[str, Any]]: ...
    def versions(self, ref: str) -> list[dict[str, Any]]: ...


class ExperimentReader(Protocol):
    def names(self) -> list[str]: ...
    def runs(self, experiment: str) -> list[dict[str, Any]]: ...
    def time_series(self, experiment: str, run: str) -> dict[str, list[list[float]]]: ...


def version_row(version: dict[str, Any]) -> dict[str, Any]:
    """One version as the Models page shows it; `job` is the console path of the pipeline that made it."""
    made_by = str(version.get("trainingPipeline") or "")
    ref = vertex_ref(made_by) if made_by else None
    return {
        "version": str(version.get("versionId", "")),
        "aliases": list(version.get("versionAliases") or []),
        "created": str(version.get("versionCreateTime") or version.get("createTime") or ""),
        "artifactUri": str(version.get("artifactUri") or ""),
        "description": str(version.get("versionDescription") or ""),
        "madeBy": made_by,
        "job": ref.path if ref is not None else None,
    }


def model_rows(
    models: list[dict[str, Any]], versions_of: Callable[[str], list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Each listed model with every version, oldest first."""
    rows = []
    for model in models:
        name = str(model.get("name", ""))
        rows.append(
            {
                "name": name,
                "id": name.rsplit("/", 1)[-1],
                "displayName": str(model.get("displayName", "")),
                "defaultVersion": str(model.get("versionId", "")),
                "versions": [version_row(v) for v in versions_of(name)],
            }
        )
    return rows


def comparison(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The runs side by side: the union of their params' and metrics' names, each run's values in that order
    (None where a run has none), and each run's time series."""
    params = sorted({str(k) for run in runs for k in run.get("params") or {}})
    metrics = sorted(
        {str(k) for run in runs for group in ("metrics", "time_series_metrics") for k in run.get(group) or {}}
    )
    rows = []
    for run in runs:
        values = {**(run.get("time_series_metrics") or {}), **(run.get("metrics") or {})}
        job = run.get("job")
        rows.append(
            {
                "run": str(run.get("run_name", "")),
                "state": str(run.get("state", "")),
                "params": [(run.get("params") or {}).get(p) for p in params],
                "metrics": [values.get(m) for m in metrics],
                "series": run.get("time_series") or {},
                "job": f"local/{job}" if job and parse_ref(f"local/{job}") else None,
            }
        )
    return {"params": params, "metrics": metrics, "runs": rows}


class _Parented:
    """A reader with the `projects/P/locations/L` it reads (what EveryModel routes a model's name by)."""

    def __init__(self, parent: str, reader: Any) -> None:
        self.parent = parent
        self._reader = reader

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)


class EveryModel:
    """The models of several projects as one reader: an emulator's folder holds several (the shipped
    templates' vertexdist-demo beside the emulator's own vertexdist-local), as its job list shows them all."""

    def __init__(self, readers: list[Any]) -> None:
        self._readers = readers

    def list_models(self, filter_text: str = "") -> list[dict[str, Any]]:
        return [model for reader in self._readers for model in reader.list_models(filter_text)]

    def versions(self, ref: str) -> list[dict[str, Any]]:
        for reader in self._readers:
            if ref.startswith(f"{reader.parent}/"):
                return list(reader.versions(ref))
        return list(self._readers[0].versions(ref)) if self._readers else []


class EveryExperiment:
    """The experiments of several projects as one reader; an experiment's runs are those of every project
    that holds one of its name."""

    def __init__(self, readers: list[Any]) -> None:
        self._readers = readers
        self._run_reader: dict[tuple[str, str], Any] = {}

    def names(self) -> list[str]:
        return sorted({name for reader in self._readers for name in reader.names()})

    def runs(self, experiment: str) -> list[dict[str, Any]]:
        found = []
        for reader in self._readers:
            if experiment not in reader.names():
                continue
            for run in reader.runs(experiment):
                self._run_reader[(experiment, str(run.get("run_name")))] = reader
                found.append(run)
        return found

    def time_series(self, experiment: str, run: str) -> dict[str, list[list[float]]]:
        reader = self._run_reader.get((experiment, run))
        return dict(reader.time_series(experiment, run)) if reader is not None else {}


@dataclass
class Registry:
    """The pages' data over a remote target (None: local only) and the local runs folder."""

    runs_dir: Path
    models_reader: ModelReader | None = None
    experiments_reader: ExperimentReader | None = None
    problem_of: Callable[[VertexdistError], str] = lambda exc: exc.message

    @classmethod
    def over(
        cls,
        target: Target | None,
        runs_dir: Path,
        problem_of: Callable[[VertexdistError], str],
        emulator_dir: Path | None = None,
    ) -> Registry:
        """The pages over `target`; with `emulator_dir` (the emulator's folder), over every project and
        location it holds models, experiments or jobs in too."""
        if target is None:
            return cls(runs_dir, problem_of=problem_of)
        from dataclasses import replace

        from vertexdist.backends.vertex.models import RegisteredModels
        from vertexdist.backends.vertex.retry import Caller, RetryPolicy
        from vertexdist.jobs.experiments import Experiments

        targets = [target]
        if emulator_dir is not None:
            from vertexdist.jobs.registry_place import registry_parents

            for parent in registry_parents(emulator_dir):
                _, project, _, location = parent.split("/")
                if parent != target.parent:
                    targets.append(replace(target, project=project, location=location))
        policy = RetryPolicy(attempts=2, initial_s=0.2, max_s=1.0)
        models = [_Parented(t.parent, RegisteredModels(t, Caller(t, policy))) for t in targets]
        experiments = [_Parented(t.parent, Experiments(t)) for t in targets]
        return cls(runs_dir, EveryModel(models), EveryExperiment(experiments), problem_of)

    def models(self) -> dict[str, Any]:
        if self.models_reader is None:
            return {"models": [], "problem": "no Vertex or emulator target: `vertexdist ui --emulator`"}
        reader = self.models_reader
        try:
            return {"models": model_rows(reader.list_models(), reader.versions), "problem": None}
        except VertexdistError as exc:
            return {"models": [], "problem": self.problem_of(exc)}

    def experiments(self) -> dict[str, Any]:
        found = [{"name": n, "where": "local"} for n in local_experiments(self.runs_dir)]
        problem = None
        if self.experiments_reader is not None:
            try:
                found += [{"name": n, "where": "remote"} for n in self.experiments_reader.names()]
            except VertexdistError as exc:
                problem = self.problem_of(exc)
        return {"experiments": found, "problem": problem}

    def experiment(self, where: str, name: str) -> dict[str, Any] | None:
        """The comparison of one experiment's runs; None: no such place or a name no experiment can have."""
        if where not in WHERES or not EXPERIMENT_NAME.fullmatch(name):
            return None
        if where == "local":
            return {
                "experiment": name,
                "where": where,
                **comparison(local_runs(self.runs_dir, name)),
                "problem": None,
            }
        reader = self.experiments_reader
        if reader is None:
            return None
        try:
            runs = reader.runs(name)
        except VertexdistError as exc:
            return {"experiment": name, "where": where, **comparison([]), "problem": self.problem_of(exc)}
        unread = []
        for run in runs:
            # One run's series that cannot be read (a display name that is no resource id) leaves the
            # others' charts and every run's params and metrics.
            try:
                run["time_series"] = reader.time_series(name, str(run["run_name"]))
            except VertexdistError:
                run["time_series"] = {}
                unread.append(str(run["run_name"]))
        problem = f"time series not readable for run(s): {', '.join(unread)}" if unread else None
        return {"experiment": name, "where": where, **comparison(runs), "problem": problem}
