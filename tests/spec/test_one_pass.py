"""One `validate` pass reports every independent problem (issue 27, item 9): a field that fails its own check
does not hide the rules about the other fields, and a rule that would read the broken field stays silent."""

from __future__ import annotations

import copy as copy_module
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from vertexdist.errors import Problem
from vertexdist.spec import catalog, inspect_file

from .conftest import REPO_ROOT, WriteTemplate

_HEAD = "display_name: x\nproject: vertexdist-demo\nstaging_bucket: gs://bkt/s\n"


def _found(path: Path) -> list[tuple[str, str]]:
    template, problems = inspect_file(path)
    assert template is None
    return [(p.path, p.message) for p in problems]


def _paths(problems: list[Problem] | list[tuple[str, str]]) -> list[str]:
    return [p.path if isinstance(p, Problem) else p[0] for p in problems]


def test_a_bad_duration_does_not_hide_the_accelerator_count(write_template: WriteTemplate) -> None:
    text = _HEAD + (
        "machine_type: n1-standard-4\naccelerator_type: NVIDIA_TESLA_T4\naccelerator_count: 3\n"
        "timeout: 1 hour\n"
    )
    found = _found(write_template(text=text))
    assert _paths(found) == ["accelerator_count", "timeout"]
    assert "not 3" in found[0][1]


_TUNING = _HEAD + (
    "tuning:\n"
    "  metric_spec: {acc: max}\n"
    "  parameter_spec:\n"
    "    lr: {type: float, min: 0.1, max: 0.01, scale: log}\n"
    "    bs: {type: discrete, values: [32, 16]}\n"
    "    c: {type: categorical, values: [a, a]}\n"
    "  max_trial_count: 2\n"
    "  parallel_trial_count: 4\n"
    "  max_failed_trial_count: 5\n"
)


def test_enum_typos_do_not_hide_the_other_tuning_errors(write_template: WriteTemplate) -> None:
    _, problems = inspect_file(write_template(text=_TUNING))
    assert _paths(problems) == [
        "tuning.metric_spec.acc",
        "tuning.parameter_spec.lr.type",
        "tuning.parameter_spec.bs.values",
        "tuning.parameter_spec.c.values",
        "tuning.parallel_trial_count",
        "tuning.max_failed_trial_count",
    ]
    hints = {p.path: p.hint for p in problems}
    assert hints["tuning.metric_spec.acc"] == "did you mean `maximize`?"
    assert hints["tuning.parameter_spec.lr.type"] == "did you mean `double`?"


def test_a_rule_that_needs_the_broken_field_stays_silent(write_template: WriteTemplate) -> None:
    # accelerator_count fails its own check; the machine rule would otherwise say "type without a count".
    text = _HEAD + "machine_type: n1-standard-4\naccelerator_type: NVIDIA_TESLA_T4\naccelerator_count: two\n"
    assert _paths(_found(write_template(text=text))) == ["accelerator_count"]


def test_a_broken_parameter_does_not_skew_the_grid_size(write_template: WriteTemplate) -> None:
    # The grid rule needs every parameter: with `a` unreadable it says nothing rather than a wrong size.
    text = _HEAD + (
        "tuning:\n  metric_spec: {acc: maximize}\n  search_algorithm: grid\n  parameter_spec:\n"
        "    a: {type: integr, min: 1, max: 4}\n    b: {type: discrete, values: [1, 2]}\n"
        "  max_trial_count: 2\n  parallel_trial_count: 1\n"
    )
    _, problems = inspect_file(write_template(text=text))
    assert _paths(problems) == ["tuning.parameter_spec.a.type"]
    assert problems[0].hint == "did you mean `integer`?"


def test_a_missing_required_field_does_not_hide_the_rules(write_template: WriteTemplate) -> None:
    text = "display_name: x\nstaging_bucket: gs://bkt/s\nlocation: us-centrall\n"
    assert _paths(_found(write_template(text=text))) == ["project", "location"]


def test_errors_found_once_the_first_are_set_aside_are_reported(write_template: WriteTemplate) -> None:
    # trainer.env fails a field check; the trainer's own cross-field check (module outside the package)
    # only runs once env is set aside.
    text = _HEAD + "trainer:\n  package: pkg\n  module: other.task\n  env: {1BAD: x}\n"
    path = write_template(text=text)
    (path.parent / "pkg").mkdir()
    (path.parent / "pkg" / "__init__.py").write_text("")
    assert _paths(_found(path)) == ["trainer", "trainer.env"]


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("NVIDIA_TESLA_L4", "NVIDIA_L4"),
        ("NVIDIA_A100_40GB", "NVIDIA_TESLA_A100"),
        ("TESLA_H200", "NVIDIA_H200_141GB"),
    ],
)
def test_accelerator_did_you_mean_matches_the_distinctive_part(typed: str, meant: str) -> None:
    hint = catalog.did_you_mean(typed, list(catalog.ACCELERATORS), described=catalog.ACCELERATORS)
    assert hint == f"did you mean {meant!r}?"


def test_the_l4_hint_in_a_template(write_template: WriteTemplate) -> None:
    text = _HEAD + "machine_type: g2-standard-24\naccelerator_type: NVIDIA_TESLA_L4\naccelerator_count: 2\n"
    [problem] = inspect_file(write_template(text=text))[1]
    assert (problem.hint or "").startswith("did you mean 'NVIDIA_L4'?")


def test_machine_typos_still_get_the_nearest_spelling() -> None:
    from vertexdist.spec.catalog_data import MACHINES

    assert catalog.close_match("n1-standrad-4", list(MACHINES)) == "n1-standard-4"


def test_a_misspelt_script_gets_the_file_beside_it(write_template: WriteTemplate) -> None:
    path = write_template(text=_HEAD + "trainer:\n  script: trian.py\n")
    (path.parent / "train.py").write_text("")
    [problem] = inspect_file(path)[1]
    assert problem.path == "trainer.script" and "does not exist" in problem.message
    assert problem.hint == "did you mean `train.py`?"


def test_a_misspelt_package_and_module_get_their_neighbours(write_template: WriteTemplate) -> None:
    path = write_template(text=_HEAD + "trainer:\n  package: trainr\n")
    (path.parent / "trainer").mkdir()
    (path.parent / "trainer" / "__init__.py").write_text("")
    (path.parent / "trainer" / "task.py").write_text("")
    [problem] = inspect_file(path)[1]
    assert problem.hint == "did you mean `trainer`?"
    path.write_text(_HEAD + "trainer:\n  package: trainer\n  module: trainer.tsk\n")
    [problem] = inspect_file(path)[1]
    assert problem.hint == "did you mean `trainer.task`?"


def test_a_cpu_python_job_of_your_own_gets_no_nccl_warning(write_template: WriteTemplate) -> None:
    text = _HEAD + "container_uri: us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest\n"
    path = write_template(text=text + "trainer:\n  script: train.py\nreplica_count: 2\n")
    (path.parent / "train.py").write_text("")
    template, problems = inspect_file(path)
    assert template is not None and problems == []


def test_the_bundled_trainer_on_cpu_is_warned_of_gloo_not_nccl(write_template: WriteTemplate) -> None:
    text = _HEAD + "container_uri: us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest\n"
    [problem] = inspect_file(write_template(text=text + "replica_count: 2\n"))[1]
    assert problem.path == "restart_job_on_worker_restart"
    assert "gloo" in problem.message and "NCCL" not in problem.message


def _shipped() -> list[Path]:
    return sorted(REPO_ROOT.glob("job_templates/*.yaml")) + sorted(REPO_ROOT.glob("examples/*/job.yaml"))


def _key_paths(data: dict[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for key, value in data.items():
        yield (*prefix, key)
        if isinstance(value, dict):
            yield from _key_paths(value, (*prefix, key))


def _broken_at(data: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    copy = copy_module.deepcopy(data)
    node = copy
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = [["not", "this"]]
    return copy


@pytest.mark.parametrize("template", _shipped(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_breaking_one_field_adds_its_error_and_no_finding_of_its_own(template: Path, tmp_path: Path) -> None:
    # Soundness over every field (nested ones too) of every shipped template: with one field broken,
    # validate reports that field and a subset of what it reported before (a rule needing the field says
    # nothing, none says something wrong).
    data = yaml.safe_load(template.read_text())
    copied = tmp_path / template.parent.name
    shutil.copytree(template.parent, copied, ignore=shutil.ignore_patterns("*.yaml"))
    before = {(p.path, p.message) for p in inspect_file(_written(copied, data))[1]}
    for path in _key_paths(data):
        dotted = ".".join(path)
        template_now, problems = inspect_file(_written(copied, _broken_at(data, path)))
        assert template_now is None, dotted
        own = [p for p in problems if dotted.startswith(p.path) or p.path.startswith(dotted)]
        assert own, dotted
        assert {(p.path, p.message) for p in problems if p not in own} <= before, dotted


def _written(folder: Path, data: dict[str, Any]) -> Path:
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path
