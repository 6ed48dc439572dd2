"""PipelineJobs through google-cloud-aiplatform, on Vertex or the emulator: compile, submit, follow, list.

`compiled(FILE)` takes a compiled PipelineSpec (.yaml/.json) as it is, or compiles the one `@dsl.pipeline`
function a .py file defines (kfp's compiler). `PipelineRuns.submit` makes the SDK's `PipelineJob` and
submits it. The SDK's own pipeline-root bucket check runs on Vertex and on the emulator alike: against the
emulator its storage and Resource Manager clients are pointed at the emulator for the submit.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from vertexdist.backends.config import Target
from vertexdist.errors import UsageError, VertexdistError

TERMINAL = ("PIPELINE_STATE_SUCCEEDED", "PIPELINE_STATE_FAILED", "PIPELINE_STATE_CANCELLED")


def compiled(path: Path, out_dir: Path, templates: set[Path] | None = None) -> Path:
    """A PipelineSpec file for PATH: itself if compiled, else its pipeline function compiled into out_dir.
    `templates` gets the templates its `training_step`s name (for their packages to be staged)."""
    if not path.is_file():
        raise UsageError(f"{path}: no such file", hint="give a pipeline .py file or a compiled .yaml/.json")
    if path.suffix in (".yaml", ".yml", ".json"):
        return path
    if path.suffix != ".py":
        raise UsageError(
            f"{path}: not a pipeline file", hint="a .py file with a @dsl.pipeline function, or .yaml"
        )
    try:
        from kfp import compiler
        from kfp.dsl.graph_component import GraphComponent
    except ImportError:
        raise UsageError(
            "compiling a pipeline needs kfp", hint="pip install 'vertexdist[pipelines]'"
        ) from None
    spec = importlib.util.spec_from_file_location(f"vertexdist_pipeline_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent.resolve()))
    from vertexdist.pipelines.step import recording

    try:
        with recording() as used:
            spec.loader.exec_module(module)
        if templates is not None:
            templates.update(used)
    except Exception as exc:
        raise VertexdistError(f"{path}: importing it failed: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.path.remove(str(path.parent.resolve()))
    found = [v for v in vars(module).values() if isinstance(v, GraphComponent)]
    if len(found) != 1:
        names = ", ".join(sorted(f.name for f in found)) or "none"
        raise UsageError(
            f"{path}: defines {len(found)} @dsl.pipeline functions ({names})",
            hint="keep exactly one pipeline function in the file",
        )
    out = out_dir / f"{path.stem}.yaml"
    compiler.Compiler().compile(found[0], str(out))
    return out


def parse_params(pairs: list[str]) -> dict[str, Any]:
    """--param K=V pairs; V as JSON when it reads as JSON (numbers, true, lists), else a string (pure)."""
    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--param {pair!r} is not KEY=VALUE", hint="e.g. --param lr=0.01")
        try:
            params[key] = json.loads(value)
        except ValueError:
            params[key] = value
    return params


class PipelineRuns:
    """One project and location's PipelineJobs through the SDK."""

    def __init__(self, target: Target) -> None:
        self.target = target

    @property
    def aiplatform(self) -> Any:
        from google.cloud import aiplatform

        from vertexdist.backends.vertex.clients import credentials_for, quiet_sdk_logging

        quiet_sdk_logging()
        extra = {"api_endpoint": self.target.api_endpoint} if self.target.api_endpoint else {}
        aiplatform.init(
            project=self.target.project,
            location=self.target.location,
            credentials=credentials_for(self.target),
            api_transport=self.target.api_transport,
            **extra,
        )
        return aiplatform

    def submit(
        self,
        spec_file: Path,
        *,
        params: dict[str, Any],
        pipeline_root: str | None,
        enable_caching: bool | None,
        experiment: str | None,
        display_name: str | None = None,
    ) -> Any:
        aiplatform = self.aiplatform
        job = aiplatform.PipelineJob(
            display_name=display_name or spec_file.stem,
            template_path=str(spec_file),
            pipeline_root=pipeline_root,
            parameter_values=params,
            enable_caching=enable_caching,
        )
        with self._sdk_on_emulator():
            job.submit(experiment=experiment)
        return job

    @contextlib.contextmanager
    def _sdk_on_emulator(self) -> Iterator[None]:
        """Against the emulator, the clients `PipelineJob.submit()` makes for itself point at it too.

        submit() checks the pipeline root's bucket (makes it if missing) with a `storage.Client` of its
        own (`utils/gcs_utils.py`), and its owner against Resource Manager's number for the project with a
        `ProjectsClient` built with no options. The emulator serves both: for this call only, both clients
        are given the emulator's endpoints (this process's environment is left as it is).
        """
        if not self.target.is_emulator:
            yield
            return
        import functools

        from google.cloud import resourcemanager
        from google.cloud.aiplatform.utils import gcs_utils

        projects = resourcemanager.ProjectsClient
        storage = gcs_utils.storage
        resourcemanager.ProjectsClient = functools.partial(  # type: ignore[misc,assignment]
            projects, transport="rest", client_options={"api_endpoint": self.target.api_endpoint}
        )
        if self.target.storage_endpoint:
            gcs_utils.storage = _StorageAt(storage, self.target.storage_endpoint)
        try:
            yield
        finally:
            resourcemanager.ProjectsClient = projects  # type: ignore[misc]
            gcs_utils.storage = storage

    def stage(self, templates: set[Path]) -> list[str]:
        """Upload each template's trainer package to its staging bucket unless it is there (as `submit`
        does before its job; a pipeline's step makes its job later). On the emulator a missing bucket is
        made. The packages' URIs."""
        from google.cloud import storage  # type: ignore[attr-defined]

        from vertexdist.backends.vertex.clients import credentials_for
        from vertexdist.pipelines.stage import stage_package

        if not templates:
            return []
        options = {"api_endpoint": self.target.storage_endpoint} if self.target.storage_endpoint else None
        client = storage.Client(
            project=self.target.project,
            credentials=credentials_for(self.target) if self.target.is_emulator else None,
            client_options=options,
        )
        staged = [stage_package(t, client, create_bucket=self.target.is_emulator) for t in sorted(templates)]
        return [uri for uri in staged if uri]

    def get(self, name: str) -> Any:
        return self.aiplatform.PipelineJob.get(name)

    def list(self) -> list[Any]:
        return list(self.aiplatform.PipelineJob.list())

    def follow(self, name: str, show: Callable[[str], None], poll_s: float | None = None) -> str:
        """Print each task's state as it changes until the run ends; the final state. Polls back off
        from 0.1 s to `poll_s` (0.5 s on the emulator, whose Gets are local; 5 s on Vertex) while nothing
        changes, and start again short after a change."""
        if poll_s is None:
            poll_s = 0.5 if self.target.is_emulator else 5.0
        seen: dict[str, str] = {}
        wait = 0.1
        while True:
            job = self.get(name)
            lines = task_lines(job.gca_resource, seen)
            for line in lines:
                show(line)
            state = job.state.name
            if state in TERMINAL:
                return str(state)
            wait = 0.1 if lines else min(wait * 2, poll_s)
            time.sleep(wait)  # an emulator with --hold-get long-polls Gets; Vertex answers at once


class _StorageAt:
    """google.cloud.storage as the SDK's gcs_utils uses it, its `Client`s made against `endpoint`."""

    def __init__(self, module: Any, endpoint: str) -> None:
        self._module = module
        self._endpoint = endpoint

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)

    def Client(self, *args: Any, **kwargs: Any) -> Any:  # the module's own name
        kwargs.setdefault("client_options", {"api_endpoint": self._endpoint})
        return self._module.Client(*args, **kwargs)


def task_lines(resource: Any, seen: dict[str, str]) -> list[str]:
    """One line per task whose state changed since `seen` (which it updates): name, state, times, job."""
    lines: list[str] = []
    for task in resource.job_detail.task_details:
        state = task.state.name
        if seen.get(task.task_id and str(task.task_id)) == state:
            continue
        seen[str(task.task_id)] = state
        job = task.executor_detail.custom_job_detail.job
        start = task.start_time.isoformat() if task.start_time else ""
        end = task.end_time.isoformat() if task.end_time else ""
        extra = f"  {job}" if job else ""
        lines.append(f"{task.task_name:<32} {state:<14} {start} {end}{extra}".rstrip())
    return lines
