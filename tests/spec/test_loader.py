"""The loader: safe YAML, one clear problem per bad input with file, line, column and field path."""

from __future__ import annotations

from pathlib import Path

import pytest

from vertexdist.errors import Problem, TemplateError, UsageError
from vertexdist.spec import JobTemplate, check_paths, inspect_file, load_template, template_files
from vertexdist.spec.catalog_data import DEFAULT_CONTAINER_URI
from vertexdist.spec.loader import find_templates
from vertexdist.spec.models import bundled_trainer_dir

from .conftest import WriteTemplate


def _errors(path: Path) -> list[Problem]:
    with pytest.raises(TemplateError) as info:
        load_template(path)
    assert all(p.severity == "error" for p in info.value.problems)
    return info.value.problems


def test_valid_template_loads_with_defaults(write_template: WriteTemplate) -> None:
    path = write_template()
    template = load_template(path)
    assert isinstance(template, JobTemplate)
    assert template.source_path == path.resolve()
    assert template.container_uri == DEFAULT_CONTAINER_URI
    assert template.trainer.package == bundled_trainer_dir()
    assert template.trainer.module == "trainer_pkg.task"
    assert template.boot_disk_type == "pd-ssd"
    assert "source_path" not in template.model_dump()


def test_template_is_frozen(write_template: WriteTemplate) -> None:
    template = load_template(write_template())
    with pytest.raises(Exception, match="frozen"):
        template.replica_count = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "line", "col", "fragment"),
    [
        ("display_name: [unclosed\n", 2, 1, "invalid YAML"),
        ("", 1, 1, "empty"),
        ("# only a comment\n", 1, 1, "empty"),
        ("- display_name: x\n", 1, 1, "top level must be a mapping"),
        ("just a string\n", 1, 1, "top level must be a mapping"),
        ("display_name: !!python/object/apply:os.system ['touch /tmp/pwned']\n", 1, 15, "invalid YAML"),
        ("display_name: a\ndisplay_name: b\n", 2, 1, "duplicate key"),
        ("display_name: a\n  bad: indent\n", 2, 6, "invalid YAML"),
    ],
)
def test_bad_yaml_gets_one_positioned_problem(
    write_template: WriteTemplate, text: str, line: int, col: int, fragment: str
) -> None:
    path = write_template(text=text)
    [problem] = _errors(path)
    assert (problem.line, problem.col) == (line, col)
    assert fragment in problem.message
    assert problem.file == str(path)
    assert problem.hint


def test_python_tag_is_never_executed(write_template: WriteTemplate, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    path = write_template(text=f"display_name: !!python/object/apply:os.system ['touch {marker}']\n")
    [problem] = _errors(path)
    assert "!!python" in (problem.hint or "")
    assert not marker.exists()


def test_unknown_key_points_at_the_key_with_did_you_mean(write_template: WriteTemplate) -> None:
    path = write_template(
        text="display_name: x\nproject: vertexdist-demo\nstaging_bucket: gs://bkt/s\nmachine_typ: n1\n"
    )
    [problem] = _errors(path)
    assert (problem.line, problem.col, problem.path) == (4, 1, "machine_typ")
    assert problem.message == "unknown field 'machine_typ'"
    assert problem.hint == "did you mean `machine_type`?"


def test_sdk_name_gets_the_template_name(write_template: WriteTemplate) -> None:
    [problem] = _errors(write_template({"reduction_server_replica_count": 4}))
    assert problem.path == "reduction_server_replica_count"
    assert "reduction_server_count" in (problem.hint or "")


def test_nested_unknown_key(write_template: WriteTemplate) -> None:
    [problem] = _errors(write_template({"trainer": {"agrs": ["--x"]}}))
    assert problem.path == "trainer.agrs"
    assert problem.hint == "did you mean `args`?"


def test_wrong_type_names_value_and_field(write_template: WriteTemplate) -> None:
    path = write_template(
        text="display_name: x\nproject: vertexdist-demo\nstaging_bucket: gs://bkt/s\nreplica_count: two\n"
    )
    [problem] = _errors(path)
    assert (problem.line, problem.col, problem.path) == (4, 16, "replica_count")
    assert "whole number" in problem.message and "'two'" in problem.message


@pytest.mark.parametrize(
    ("changes", "field", "fragment"),
    [
        ({"replica_count": 0}, "replica_count", "greater than or equal to 1"),
        ({"boot_disk_size_gb": 50}, "boot_disk_size_gb", "greater than or equal to 100"),
        ({"boot_disk_size_gb": 64001}, "boot_disk_size_gb", "less than or equal to 64000"),
        ({"accelerator_count": -1}, "accelerator_count", "greater than or equal to 0"),
        ({"timeout": "90 minutes"}, "timeout", "not a duration"),
        ({"display_name": "x" * 129}, "display_name", "at most 128"),
        ({"project": "My_Project"}, "project", "not a project id"),
        ({"restart_job_on_worker_restart": "maybe"}, "restart_job_on_worker_restart", "true or false"),
        ({"labels": ["a"]}, "labels", "expected a mapping"),
        ({"trainer": {"args": "--epochs 3"}}, "trainer.args", "expected a list"),
        ({"trainer": {"env": {"DEBUG": True}}}, "trainer.env.DEBUG", "expected a string"),
        ({"trainer": {"env": {"BAD NAME": "1"}}}, "trainer.env", "not a valid environment variable name"),
        ({"display_name": None}, "display_name", "required field 'display_name' is missing"),
    ],
)
def test_out_of_range_and_wrong_values(
    write_template: WriteTemplate, changes: dict[str, object], field: str, fragment: str
) -> None:
    problems = _errors(write_template(changes))
    assert [p.path for p in problems] == [field]
    assert fragment in problems[0].message


def test_env_numbers_become_strings(build_template: object, write_template: WriteTemplate) -> None:
    template = load_template(
        write_template({"trainer": {"env": {"OMP_NUM_THREADS": 4}, "args": ["--lr", 0.1]}})
    )
    assert template.trainer.env == {"OMP_NUM_THREADS": "4"}
    assert template.trainer.args == ["--lr", "0.1"]


def test_yaml_booleans_in_env_get_a_quoting_hint(write_template: WriteTemplate) -> None:
    [problem] = _errors(
        write_template(
            text="display_name: x\nproject: vertexdist-demo\nstaging_bucket: gs://bkt/s\n"
            "trainer:\n  env:\n    USE_X: yes\n"
        )
    )
    assert (problem.line, problem.path) == (6, "trainer.env.USE_X")
    assert "quote" in (problem.hint or "")


def test_several_errors_all_reported_in_line_order(write_template: WriteTemplate) -> None:
    text = "display_name: x\nproject: vertexdist-demo\nstaging_bucket: gs://bkt/s\nreplica_count: 0\nfoo: 1\n"
    problems = _errors(write_template(text=text))
    assert [(p.line, p.path) for p in problems] == [(4, "replica_count"), (5, "foo")]


def test_relative_package_resolves_against_the_template(
    tmp_path: Path, write_template: WriteTemplate
) -> None:
    package = tmp_path / "mytrainer"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "task.py").write_text("")
    template = load_template(write_template({"trainer": {"package": "mytrainer", "args": ["--x=1"]}}))
    assert template.trainer.package == package.resolve()
    assert template.trainer.module == "mytrainer.task"


def test_script_gets_the_sdk_module(tmp_path: Path, write_template: WriteTemplate) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    template = load_template(write_template({"trainer": {"script": "train.py"}}))
    assert template.trainer.script == (tmp_path / "train.py").resolve()
    assert template.trainer.package is None
    assert template.trainer.module == "aiplatform_custom_trainer_script.task"


@pytest.mark.parametrize(
    ("trainer", "fragment"),
    [
        ({"package": "missing"}, "does not exist"),
        ({"package": "nopkg"}, "has no __init__.py"),
        ({"script": "missing.py"}, "does not exist"),
        ({"script": "notes.txt"}, "must be a .py file"),
        ({"package": "pkg", "script": "train.py"}, "not both"),
        ({"package": "pkg", "module": "other.task"}, "not inside package"),
        ({"package": "pkg", "module": "pkg.nothere"}, "has no file"),
        ({"script": "train.py", "module": "mine.task"}, "always"),
    ],
)
def test_trainer_code_rules(
    tmp_path: Path, write_template: WriteTemplate, trainer: dict[str, str], fragment: str
) -> None:
    (tmp_path / "nopkg").mkdir()
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "task.py").write_text("")
    (tmp_path / "train.py").write_text("")
    (tmp_path / "notes.txt").write_text("")
    [problem] = _errors(write_template({"trainer": trainer}))
    assert problem.path.startswith("trainer")
    assert fragment in problem.message


def test_load_template_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        load_template(tmp_path / "nope.yaml")


def test_template_files_and_check_paths(tmp_path: Path, write_template: WriteTemplate) -> None:
    write_template(name="a.yaml")
    write_template({"replica_count": 0}, name="b.yml")
    (tmp_path / "notes.txt").write_text("not a template")
    assert [p.name for p in template_files([tmp_path])] == ["a.yaml", "b.yml"]
    problems = check_paths([tmp_path])
    assert [(Path(p.file).name, p.path) for p in problems] == [("b.yml", "replica_count")]
    with pytest.raises(UsageError):
        check_paths([tmp_path / "missing"])


def test_warnings_do_not_stop_loading(write_template: WriteTemplate) -> None:
    path = write_template({"restart_job_on_worker_restart": False})
    template, problems = inspect_file(path)
    assert template is not None
    assert [(p.severity, p.path) for p in problems] == [("warning", "restart_job_on_worker_restart")]
    assert load_template(path).replica_count == 2


def test_rule_errors_are_placed_on_their_line(write_template: WriteTemplate) -> None:
    text = (
        "display_name: x\nproject: vertexdist-demo\nstaging_bucket: gs://bkt/s\n"
        "machine_type: a2-highgpu-4g\naccelerator_type: NVIDIA_TESLA_A100\naccelerator_count: 3\n"
    )
    [problem] = _errors(write_template(text=text))
    assert (problem.line, problem.col, problem.path) == (6, 20, "accelerator_count")


def test_label_key_problem_points_at_the_key(write_template: WriteTemplate) -> None:
    text = "display_name: x\nproject: vertexdist-demo\nstaging_bucket: gs://bkt/s\nlabels:\n  Team: ml\n"
    [problem] = _errors(write_template(text=text))
    assert (problem.line, problem.col, problem.path) == (5, 3, "labels.Team")


def test_dump_and_validate_round_trip(write_template: WriteTemplate, tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    template = load_template(
        write_template({"trainer": {"script": "train.py", "args": ["--x", 1]}, "timeout": "2h"})
    )
    again = JobTemplate.model_validate(template.model_dump(mode="json"))
    assert again.model_dump() == template.model_dump()
    assert again.source_path is None and template.source_path is not None
    assert again.timeout == 7200


def test_direct_construction_enforces_the_rules() -> None:
    with pytest.raises(ValueError, match="accelerator_count"):
        JobTemplate(
            display_name="x",
            project="vertexdist-demo",
            staging_bucket="gs://bkt/s",
            machine_type="a2-highgpu-4g",
            accelerator_type="NVIDIA_TESLA_A100",
            accelerator_count=3,
        )


def test_non_utf8_file(write_template: WriteTemplate, tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("display_name: caf\xe9\n".encode("latin-1"))
    [problem] = _errors(path)
    assert "UTF-8" in problem.message


def test_an_unknown_key_does_not_hide_the_other_problems(write_template: WriteTemplate) -> None:
    path = write_template({"replicas": 3, "accelerator_count": 3})
    problems = _errors(path)
    assert [p.path for p in problems] == ["accelerator_count", "replicas"]
    assert "not 3" in problems[0].message
    assert problems[1].hint == "did you mean `replica_count`?"


_HEAD = "display_name: x\nproject: vertexdist-demo\nstaging_bucket: gs://bkt/s\n"


def _alias_bomb(levels: int = 9) -> str:
    lines = ['  a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return _HEAD + "labels_defaults:\n" + "\n".join(lines) + f"\ntrainer:\n  args: *a{levels - 1}\n"


def test_an_alias_bomb_is_refused_before_it_expands(write_template: WriteTemplate) -> None:
    [problem] = _errors(write_template(text=_alias_bomb()))
    assert "expands to more than 100,000 values" in problem.message
    assert problem.line > 4 and "aliasing" in (problem.hint or "")


def test_aliases_that_expand_a_little_are_fine(write_template: WriteTemplate) -> None:
    text = _HEAD + "trainer:\n  args: &args ['--a', '1']\n  requirements: *args\n"
    assert load_template(write_template(text=text)).trainer.requirements == ["--a", "1"]


def test_a_recursive_alias_is_one_clear_problem(write_template: WriteTemplate) -> None:
    [problem] = _errors(write_template(text=_HEAD + "trainer:\n  args: &a [*a]\n"))
    assert "recursive alias" in problem.message and problem.line == 5


def test_deep_nesting_is_a_problem_not_a_crash(write_template: WriteTemplate) -> None:
    depth = 990  # under libyaml's own limit (1000), over Python's stack for a recursive walk
    [problem] = _errors(write_template(text=_HEAD + "trainer:\n  args: " + "[" * depth + "]" * depth + "\n"))
    assert "levels deep" in problem.message


def test_a_huge_file_is_not_read(write_template: WriteTemplate, monkeypatch: pytest.MonkeyPatch) -> None:
    from vertexdist.spec import limits

    monkeypatch.setattr(limits, "TEMPLATE_FILE_BYTES", 4096)
    text = _HEAD + "# " + "x" * 4096 + "\n"
    [problem] = _errors(write_template(text=text))
    assert "over 4.0 KiB; not read" in problem.message and problem.line == 1


def test_limit_findings_point_at_the_item(write_template: WriteTemplate) -> None:
    text = _HEAD + 'trainer:\n  args:\n  - --ok\n  - "--bad=a\\0b"\n  env:\n    MODE: "x\\x00"\n'
    problems = _errors(write_template(text=text))
    assert [(p.path, p.line, p.col) for p in problems] == [
        ("trainer.args[1]", 7, 5),
        ("trainer.env.MODE", 9, 11),
    ]
    assert all("NUL" in p.message for p in problems)


def test_looping_and_dangling_links_in_a_folder_are_problems(
    tmp_path: Path, write_template: WriteTemplate
) -> None:
    write_template(name="a.yaml")
    (tmp_path / "loop.yaml").symlink_to("loop.yaml")
    (tmp_path / "gone.yml").symlink_to("missing.yaml")
    (tmp_path / "notes.txt").symlink_to("notes.txt")  # not a template name: not ours to report
    problems = check_paths([tmp_path])
    assert [(Path(p.file).name, p.line) for p in problems] == [("gone.yml", 1), ("loop.yaml", 1)]
    assert "symlink to missing.yaml, which does not exist" in problems[0].message
    assert "symlink loop" in problems[1].message


def test_a_looping_template_path_says_it_is_a_loop(tmp_path: Path) -> None:
    (tmp_path / "loop.yaml").symlink_to("loop.yaml")
    with pytest.raises(UsageError, match="symlink loop"):
        load_template(tmp_path / "loop.yaml")
    with pytest.raises(UsageError, match="symlink loop"):
        template_files([tmp_path / "loop.yaml"])


def test_a_folder_walk_checks_templates_and_names_the_files_it_skipped(
    tmp_path: Path, write_template: WriteTemplate
) -> None:
    # Issue 27 item 9: `validate .` read cloudbuild.yaml as a template.
    write_template(name="a.yaml")
    write_template({"machine_typ": "n1-standard-4", "replicas": 2}, name="typos.yaml")  # still a template
    (tmp_path / "cloudbuild.yaml").write_text("steps:\n- name: gcr.io/x\ntimeout: 600s\noptions: {}\n")
    (tmp_path / "mkdocs.yml").write_text("site_name: x\nnav: []\n")
    (tmp_path / "hooks.yaml").write_text("- id: x\n")
    (tmp_path / "broken.yaml").write_text("display_name: [unclosed\n")  # cannot tell: checked
    (tmp_path / "job_templates").mkdir()
    (tmp_path / "job_templates" / "odd.yaml").write_text("- a list\n")  # in job_templates/: a template
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "x.yaml").write_text("display_name: x\n")  # hidden folders are not searched
    found = find_templates([tmp_path])
    assert [p.relative_to(tmp_path).as_posix() for p in found.files] == [
        "a.yaml",
        "broken.yaml",
        "job_templates/odd.yaml",
        "typos.yaml",
    ]
    assert [p.name for p in found.skipped] == ["cloudbuild.yaml", "hooks.yaml", "mkdocs.yml"]
    # A file named on the command line is always checked.
    assert find_templates([tmp_path / "cloudbuild.yaml"]).files == [tmp_path / "cloudbuild.yaml"]


@pytest.mark.parametrize(
    ("written", "count"), [("7.5B", 7.5e9), ("350M", 350e6), ("1.3e9", 1.3e9), (2e9, 2e9)]
)
def test_model_params_take_a_count_with_a_unit(
    write_template: WriteTemplate, written: object, count: float
) -> None:
    assert load_template(write_template({"model_params": written})).model_params == count


@pytest.mark.parametrize(
    ("written", "message"),
    [("7.5X", "'7.5X' has an unknown unit 'X'"), ("lots", "'lots' is not a parameter count"),
     ("14GB", "'14GB' is a size in bytes, not a parameter count"), (True, "True is not a parameter count")],
)  # fmt: skip
def test_bad_model_params_are_placed_on_their_line(
    write_template: WriteTemplate, written: object, message: str
) -> None:
    [problem] = _errors(write_template({"model_params": written}))
    assert problem.path == "model_params" and problem.message == message
    assert "e.g. 7.5B, 350M or 1.3e9" in (problem.hint or "")


def test_a_model_too_big_for_every_strategy_warns_on_its_line(write_template: WriteTemplate) -> None:
    template, problems = inspect_file(write_template({"model_params": "30B"}))
    assert template is not None
    [problem] = problems
    assert (problem.severity, problem.path) == ("warning", "model_params")
    assert problem.message.startswith("no strategy fits: DDP needs 480 GB per GPU, an A100 40GB has 40")


def test_a_mistyped_template_name_gets_the_close_ones_in_its_folder(tmp_path: Path) -> None:
    # Issue 42: `vertexdist validate job_templates/cpu-smal.yaml` said only that there is no such file.
    for name in ("cpu-small.yaml", "a2-4g-x2.yaml", "notes.txt"):
        (tmp_path / name).write_text("")
    with pytest.raises(UsageError) as raised:
        load_template(tmp_path / "cpu-smal.yaml")
    assert raised.value.hint == f"did you mean {str(tmp_path / 'cpu-small.yaml')!r}?"
    with pytest.raises(UsageError) as raised:
        template_files([str(tmp_path / "cpu_small.yml")])
    assert raised.value.hint is not None and "cpu-small.yaml" in raised.value.hint
    with pytest.raises(UsageError) as raised:
        load_template(tmp_path / "nothing-like-it.yaml")
    assert raised.value.hint == "pass the path of a .yaml template"
