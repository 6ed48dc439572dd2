"""The PipelineSpec's DAGs as data: which task may start, what it gets as inputs, what a DAG gives back.

All pure: the runner (`run`) calls these with what finished tasks produced. Shapes are kfp's IR
(kfp-pipeline-spec `pipeline_spec.proto`, as JSON): `dependentTasks`, `inputs.parameters[k]` as
`runtimeValue.constant`, `componentInputParameter`, `taskOutputParameter`, `taskFinalStatus`;
`inputs.artifacts[k]` as `componentInputArtifact` or `taskOutputArtifact`; a sub-DAG's
`dag.outputs` as `valueFromParameter`/`valueFromOneof` and `artifactSelectors`; a ParallelFor as a task with
`parameterIterator`/`artifactIterator` whose outputs are the iterations' collected (`dsl.Collected`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

Artifacts = dict[str, list[dict[str, Any]]]
SUCCEEDED = "SUCCEEDED"
FAILED = "FAILED"
SKIPPED = "SKIPPED"  # a cache hit: the outputs are an earlier run's
NOT_TRIGGERED = "NOT_TRIGGERED"  # its condition was false, or an upstream task did not succeed
CANCELLED = "CANCELLED"
DONE_OK = frozenset({SUCCEEDED, SKIPPED, NOT_TRIGGERED})


class SpecError(ValueError):
    """A PipelineSpec the runner cannot follow (a missing component, a cycle, an unknown input kind)."""


@dataclass
class Result:
    """A finished task: its state, outputs, and (if failed) why."""

    state: str
    parameters: dict[str, Any] = field(default_factory=dict)
    artifacts: Artifacts = field(default_factory=dict)
    error: str = ""
    task_name: str = ""


@dataclass
class Scope:
    """What a DAG's tasks can read: the DAG's own inputs and its finished tasks."""

    parameters: dict[str, Any]
    artifacts: Artifacts
    results: dict[str, Result] = field(default_factory=dict)


def topological_order(tasks: dict[str, Any]) -> list[str]:
    """Task names so that each comes after those it depends on; a cycle or unknown name is an error."""
    order: list[str] = []
    placed: set[str] = set()
    remaining = dict(tasks)
    while remaining:
        ready = sorted(n for n, t in remaining.items() if set(t.get("dependentTasks", [])) <= placed)
        if not ready:
            unknown = {d for t in remaining.values() for d in t.get("dependentTasks", []) if d not in tasks}
            if unknown:
                raise SpecError(f"tasks depend on tasks the DAG does not have: {sorted(unknown)}")
            raise SpecError(f"the tasks {sorted(remaining)} depend on each other in a cycle")
        for name in ready:
            order.append(name)
            placed.add(name)
            del remaining[name]
    return order


def waits_for_all(task: dict[str, Any]) -> bool:
    """An exit handler's task runs once its upstream tasks end, whatever their state."""
    return task.get("triggerPolicy", {}).get("strategy") == "ALL_UPSTREAM_TASKS_COMPLETED"


def may_start(task: dict[str, Any], results: dict[str, Result]) -> bool | None:
    """None while a dependency runs; then whether the task's upstream lets it run."""
    deps = task.get("dependentTasks", [])
    if any(d not in results for d in deps):
        return None
    if waits_for_all(task):
        return True
    return all(results[d].state in DONE_OK for d in deps)


def _producer(scope: Scope, name: str, what: str) -> Result:
    found = scope.results.get(name)
    if found is None:
        raise SpecError(f"{what} comes from task {name!r}, which has not run in this DAG")
    return found


def resolve_parameters(
    task: dict[str, Any], scope: Scope, job_name: str, task_names: dict[str, str]
) -> dict[str, Any]:
    """The task's input parameter values."""
    values: dict[str, Any] = {}
    for key, source in task.get("inputs", {}).get("parameters", {}).items():
        if "runtimeValue" in source:
            values[key] = source["runtimeValue"].get("constant")
        elif "componentInputParameter" in source:
            name = source["componentInputParameter"]
            if name in scope.parameters:
                values[key] = scope.parameters[name]
        elif "taskOutputParameter" in source:
            ref = source["taskOutputParameter"]
            producer = _producer(scope, ref["producerTask"], f"input {key!r}")
            if ref["outputParameterKey"] in producer.parameters:
                values[key] = producer.parameters[ref["outputParameterKey"]]
            elif producer.state == SUCCEEDED:
                producer_name, output = ref["producerTask"], ref["outputParameterKey"]
                raise SpecError(f"input {key!r}: task {producer_name!r} gave no output {output!r}")
        elif "taskFinalStatus" in source:
            producer_name = source["taskFinalStatus"]["producerTask"]
            producer = _producer(scope, producer_name, f"input {key!r}")
            values[key] = {
                "state": producer.state if producer.state != NOT_TRIGGERED else SUCCEEDED,
                "error": {"code": 0 if producer.state in DONE_OK else 2, "message": producer.error},
                "pipelineJobResourceName": job_name,
                "pipelineTaskName": task_names.get(producer_name, producer_name),
            }
        else:
            raise SpecError(f"input {key!r} has a source the runner does not know: {sorted(source)}")
        selector = source.get("parameterExpressionSelector")
        if selector and key in values:
            values[key] = _select(values[key], selector)
    return values


def _select(value: Any, selector: str) -> Any:
    """`parseJson(string_value)["field"]`, the one selector shape kfp writes for a struct's field."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    field_name = selector.rsplit("[", 1)[-1].strip("]\"'") if "[" in selector else ""
    return value.get(field_name, value) if isinstance(value, dict) and field_name else value


def resolve_artifacts(task: dict[str, Any], scope: Scope) -> Artifacts:
    found: Artifacts = {}
    for key, source in task.get("inputs", {}).get("artifacts", {}).items():
        if "componentInputArtifact" in source:
            name = source["componentInputArtifact"]
            if name in scope.artifacts:
                found[key] = scope.artifacts[name]
        elif "taskOutputArtifact" in source:
            ref = source["taskOutputArtifact"]
            producer = _producer(scope, ref["producerTask"], f"input artifact {key!r}")
            if ref["outputArtifactKey"] in producer.artifacts:
                found[key] = producer.artifacts[ref["outputArtifactKey"]]
        else:
            raise SpecError(f"input artifact {key!r} has a source the runner does not know: {sorted(source)}")
    return found


def loop_items(
    task: dict[str, Any], parameters: dict[str, Any], artifacts: Artifacts
) -> tuple[str, list[Any], bool]:
    """A ParallelFor task's (item input name, items, items are artifacts)."""
    if "parameterIterator" in task:
        iterator = task["parameterIterator"]
        items = iterator.get("items", {})
        if "raw" in items:
            values = json.loads(items["raw"])
        else:
            values = parameters.get(items.get("inputParameter", ""))
            if isinstance(values, str):
                values = json.loads(values)
        if not isinstance(values, list):
            raise SpecError(f"ParallelFor items are not a list: {values!r}")
        return str(iterator["itemInput"]), values, False
    iterator = task["artifactIterator"]
    listed = artifacts.get(iterator.get("items", {}).get("inputArtifact", ""), [])
    return str(iterator["itemInput"]), [[a] for a in listed], True


def iteration_inputs(
    item_input: str, item: Any, parameters: dict[str, Any], component: dict[str, Any]
) -> dict[str, Any]:
    """One iteration's parameters: the item, and the item's fields where kfp split them out
    (`<itemInput>-subvar-<field>`)."""
    values = dict(parameters)
    values[item_input] = item
    prefix = f"{item_input}-subvar-"
    for name in component.get("inputDefinitions", {}).get("parameters", {}):
        if name.startswith(prefix) and isinstance(item, dict):
            values[name] = item.get(name[len(prefix) :])
    return values


def dag_outputs(component: dict[str, Any], results: dict[str, Result]) -> tuple[dict[str, Any], Artifacts]:
    """What a finished sub-DAG gives its parent (`dag.outputs`)."""
    outputs = component.get("dag", {}).get("outputs", {})
    parameters: dict[str, Any] = {}
    for key, source in outputs.get("parameters", {}).items():
        selectors = (
            [source["valueFromParameter"]]
            if "valueFromParameter" in source
            else source.get("valueFromOneof", {}).get("parameterSelectors", [])
        )
        for selector in selectors:
            producer = results.get(selector["producerSubtask"])
            if producer is not None and selector["outputParameterKey"] in producer.parameters:
                parameters[key] = producer.parameters[selector["outputParameterKey"]]
                break
    artifacts: Artifacts = {}
    for key, source in outputs.get("artifacts", {}).items():
        for selector in source.get("artifactSelectors", []):
            producer = results.get(selector["producerSubtask"])
            if producer is not None and selector["outputArtifactKey"] in producer.artifacts:
                artifacts[key] = producer.artifacts[selector["outputArtifactKey"]]
                break
    return parameters, artifacts


def collect(iterations: list[tuple[dict[str, Any], Artifacts]]) -> tuple[dict[str, Any], Artifacts]:
    """A ParallelFor's outputs: each key as the list of its iterations' values (`dsl.Collected`)."""
    parameters: dict[str, Any] = {}
    artifacts: Artifacts = {}
    for params, arts in iterations:
        for key, value in params.items():
            parameters.setdefault(key, []).append(value)
        for key, listed in arts.items():
            artifacts.setdefault(key, []).extend(listed)
    return parameters, artifacts
