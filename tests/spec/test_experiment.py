"""The template's `experiment:` section: a name and an optional run, both ML Metadata context ids, each
error on its line."""

from __future__ import annotations

from pathlib import Path

from vertexdist.spec.loader import inspect_file, load_template

HEAD = """\
display_name: demo
project: my-project
staging_bucket: gs://my-bucket/stage
"""


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(HEAD + body)
    return path


def _errors(path: Path) -> list[str]:
    return [f"{p.line}:{p.path}: {p.message}" for p in inspect_file(path)[1] if p.severity == "error"]


def test_an_experiment_section_loads(tmp_path: Path) -> None:
    template = load_template(_write(tmp_path, "experiment:\n  name: lr-sweep\n  experiment_run: lr-0-1\n"))
    assert template.experiment is not None
    assert (template.experiment.name, template.experiment.experiment_run) == ("lr-sweep", "lr-0-1")
    assert template.experiment.run_context_id("lr-0-1") == "lr-sweep-lr-0-1"
    assert load_template(_write(tmp_path, "")).experiment is None


def test_bad_names_are_errors_on_their_lines(tmp_path: Path) -> None:
    path = _write(tmp_path, "experiment:\n  name: LR_Sweep\n  experiment_run: -run\n")
    (name_error, run_error) = sorted(_errors(path))
    assert (
        name_error.startswith("5:experiment.name:") and "lowercase letters, digits and hyphens" in name_error
    )
    assert run_error.startswith("6:experiment.experiment_run:") and "starting with a letter" in run_error
    too_long = _write(tmp_path, f"experiment:\n  name: {'e' * 129}\n")
    assert any("129 characters; at most 128" in e for e in _errors(too_long))
    together = _write(tmp_path, f"experiment:\n  name: {'e' * 64}\n  experiment_run: {'r' * 64}\n")
    assert any("over 128 characters" in e for e in _errors(together))
    unknown = _write(tmp_path, "experiment:\n  nme: x\n")
    assert any("nme" in e for e in _errors(unknown))


def test_render_names_the_experiment_and_run_contexts(tmp_path: Path) -> None:
    from vertexdist.render import render_job_spec

    contexts = "projects/my-project/locations/us-central1/metadataStores/default/contexts"
    template = load_template(_write(tmp_path, "experiment:\n  name: lr-sweep\n  experiment_run: lr-0-1\n"))
    spec = render_job_spec(template)
    assert (spec["experiment"], spec["experimentRun"]) == (
        f"{contexts}/lr-sweep",
        f"{contexts}/lr-sweep-lr-0-1",
    )
    unnamed = render_job_spec(load_template(_write(tmp_path, "experiment:\n  name: lr-sweep\n")))
    assert unnamed["experiment"] == f"{contexts}/lr-sweep" and "experimentRun" not in unnamed
    assert "experiment" not in render_job_spec(load_template(_write(tmp_path, "")))


def test_an_experiment_written_as_its_name_alone_is_that_experiment(tmp_path: Path) -> None:
    # Issue 42: `experiment: lr-sweep` got the field's description back instead of being taken.
    template = load_template(_write(tmp_path, "experiment: lr-sweep\n"))
    assert template.experiment is not None
    assert (template.experiment.name, template.experiment.experiment_run) == ("lr-sweep", None)
    (error,) = _errors(_write(tmp_path, "experiment: LR_Sweep\n"))
    assert error.startswith("4:experiment") and "lowercase letters, digits and hyphens" in error, error
