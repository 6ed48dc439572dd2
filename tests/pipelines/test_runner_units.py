"""The pipeline runner's pure parts: conditions, DAG order, input resolution, loops, install preambles."""

from __future__ import annotations

import pytest

from vertexdist.emulator.pipeline_runner import dag
from vertexdist.emulator.pipeline_runner.conditions import ConditionError, evaluate
from vertexdist.emulator.pipeline_runner.task_process import packages_to_install, without_install_preamble


def test_conditions_read_the_cel_kfp_writes() -> None:
    values = {"pipelinechannel--pick-Output": 0.7, "coin": "heads", "n": "3"}
    assert evaluate("inputs.parameter_values['pipelinechannel--pick-Output'] > 0.5", values)
    assert not evaluate("inputs.parameter_values['coin'] == 'tails'", values)
    assert evaluate(
        "!(inputs.parameter_values['coin'] == 'tails') && int(inputs.parameter_values['n']) == 3", values
    )
    assert evaluate("inputs.parameter_values['coin'] != 'a&&b' || false", values)


def test_conditions_refuse_code_and_unknown_inputs() -> None:
    with pytest.raises(ConditionError, match="outside the CEL subset"):
        evaluate("__import__('os').system('true')", {})
    with pytest.raises(ConditionError, match="'missing'"):
        evaluate("inputs.parameter_values['missing'] > 1", {})


def test_topological_order_and_cycles() -> None:
    tasks = {"c": {"dependentTasks": ["a", "b"]}, "b": {"dependentTasks": ["a"]}, "a": {}}
    assert dag.topological_order(tasks) == ["a", "b", "c"]
    with pytest.raises(dag.SpecError, match="cycle"):
        dag.topological_order({"a": {"dependentTasks": ["b"]}, "b": {"dependentTasks": ["a"]}})
    with pytest.raises(dag.SpecError, match="does not have"):
        dag.topological_order({"a": {"dependentTasks": ["ghost"]}})


def test_may_start_waits_then_follows_the_trigger_strategy() -> None:
    task = {"dependentTasks": ["a"]}
    exit_handler = {"dependentTasks": ["a"], "triggerPolicy": {"strategy": "ALL_UPSTREAM_TASKS_COMPLETED"}}
    assert dag.may_start(task, {}) is None
    failed = {"a": dag.Result(dag.FAILED)}
    assert dag.may_start(task, failed) is False
    assert dag.may_start(exit_handler, failed) is True
    assert dag.may_start(task, {"a": dag.Result(dag.NOT_TRIGGERED)}) is True


def test_inputs_come_from_constants_parents_producers_and_final_status() -> None:
    scope = dag.Scope(
        {"pipelinechannel--n": 3},
        {"data": [{"uri": "gs://b/d"}]},
        {
            "prep": dag.Result(dag.SUCCEEDED, {"Output": "x"}, {"out": [{"uri": "gs://b/o"}]}),
            "body": dag.Result(dag.FAILED, error="boom"),
        },
    )
    task = {
        "inputs": {
            "parameters": {
                "k": {"runtimeValue": {"constant": 1.5}},
                "n": {"componentInputParameter": "pipelinechannel--n"},
                "s": {"taskOutputParameter": {"producerTask": "prep", "outputParameterKey": "Output"}},
                "status": {"taskFinalStatus": {"producerTask": "body"}},
            },
            "artifacts": {
                "a": {"componentInputArtifact": "data"},
                "b": {"taskOutputArtifact": {"producerTask": "prep", "outputArtifactKey": "out"}},
            },
        }
    }
    params = dag.resolve_parameters(task, scope, "projects/p/locations/l/pipelineJobs/j", {})
    assert params["k"] == 1.5 and params["n"] == 3 and params["s"] == "x"
    assert params["status"]["state"] == "FAILED" and params["status"]["error"]["message"] == "boom"
    artifacts = dag.resolve_artifacts(task, scope)
    assert artifacts == {"a": [{"uri": "gs://b/d"}], "b": [{"uri": "gs://b/o"}]}


def test_parallel_for_items_and_collected_outputs() -> None:
    task = {"parameterIterator": {"itemInput": "item", "items": {"raw": "[1, 2]"}}}
    assert dag.loop_items(task, {}, {}) == ("item", [1, 2], False)
    from_input = {"parameterIterator": {"itemInput": "item", "items": {"inputParameter": "xs"}}}
    assert dag.loop_items(from_input, {"xs": '["a"]'}, {})[1] == ["a"]
    component = {"inputDefinitions": {"parameters": {"item-subvar-lr": {}}}}
    assert dag.iteration_inputs("item", {"lr": 0.1}, {}, component)["item-subvar-lr"] == 0.1
    collected = dag.collect([({"o": 1}, {"m": [{"uri": "1"}]}), ({"o": 2}, {"m": [{"uri": "2"}]})])
    assert collected == ({"o": [1, 2]}, {"m": [{"uri": "1"}, {"uri": "2"}]})


def test_install_preamble_packages_leave_kfp_out() -> None:
    script = (
        "\nPIP_DISABLE_PIP_VERSION_CHECK=1 python3 -m pip install --quiet --no-warn-script-location 'six'"
        " 'attrs>=1'  &&  python3 -m pip install --quiet --no-warn-script-location 'kfp==2.17.3' '--no-deps'"
        ' \'typing-extensions>=3.7.4,<5; python_version<"3.9"\' && "$0" "$@"\n'
    )
    command = ["sh", "-c", script, "sh", "-ec", "run"]
    assert packages_to_install(command) == ["six", "attrs>=1"]
    assert without_install_preamble(command) == ["sh", "-c", '"$0" "$@"', "sh", "-ec", "run"]
    assert packages_to_install(["sh", "-c", "echo hi"]) == []


def test_cache_keys_change_with_inputs_and_component() -> None:
    from vertexdist.emulator.pipeline_runner.cache import cache_key

    component = {"inputDefinitions": {"parameters": {"x": {}}}}
    executor = {"image": "python:3.11", "command": ["python"]}
    base = cache_key(component, executor, {"x": 1}, {"d": [{"uri": "gs://b/1"}]})
    assert base == cache_key(component, executor, {"x": 1}, {"d": [{"uri": "gs://b/1"}]})
    assert base != cache_key(component, executor, {"x": 2}, {"d": [{"uri": "gs://b/1"}]})
    assert base != cache_key(component, executor, {"x": 1}, {"d": [{"uri": "gs://b/2"}]})
    assert base != cache_key(
        component, {**executor, "image": "other"}, {"x": 1}, {"d": [{"uri": "gs://b/1"}]}
    )


def test_the_upload_launcher_call_reads_as_a_model_upload() -> None:
    from vertexdist.emulator.pipeline_runner.custom_job_step import UPLOAD_MODULE, upload_call

    command = ["python3", "-u", "-m", UPLOAD_MODULE, "--type", "UploadModel", "--project", "p"]
    payload = '{"display_name": "m", "artifact_uri": "gs://b/x/model", "labels": {"my_key": "v"}}'
    call = upload_call([*command, "--payload", payload, "--location", "l", "--gcp_resources", "/o"])
    assert call.model == {"displayName": "m", "artifactUri": "gs://b/x/model", "labels": {"my_key": "v"}}
    assert (call.project, call.location, call.parent_model, call.gcp_resources) == ("p", "l", "", "/o")
    with pytest.raises(ValueError, match="artifact_uri"):
        upload_call(
            [*command, "--payload", '{"display_name": "m"}', "--location", "l", "--gcp_resources", "/o"]
        )
    with pytest.raises(ValueError, match="--gcp_resources"):
        upload_call([*command, "--payload", payload, "--location", "l"])
