"""The template's `recovery:` section: fields, did-you-mean, and each fallback checked as a whole job."""

from __future__ import annotations

from pathlib import Path

import pytest

from vertexdist.errors import TemplateError
from vertexdist.spec.loader import inspect_file, load_template
from vertexdist.spec.recovery import merged_template, places

HEAD = """\
display_name: demo
project: my-project
staging_bucket: gs://my-bucket/stage
machine_type: a2-highgpu-1g
accelerator_type: NVIDIA_TESLA_A100
accelerator_count: 1
scheduling_strategy: SPOT
"""


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(HEAD + body)
    return path


def _errors(path: Path) -> list[str]:
    return [
        f"{p.line}:{p.path}: {p.message} | {p.hint}" for p in inspect_file(path)[1] if p.severity == "error"
    ]


def test_a_good_recovery_section_loads_and_merges_each_fallback(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """recovery:
  max_preemptions: 4
  fallback:
    - location: us-east1
    - machine_type: a2-highgpu-8g
      accelerator_count: 8
      replica_count: 1
    - scheduling_strategy: STANDARD
""",
    )
    t = load_template(path)
    assert t.recovery is not None
    assert t.recovery.max_preemptions == 4
    assert t.recovery.max_restarts_on_errors == 0
    tried = places(t)
    assert [p.location for p in tried] == ["us-central1", "us-east1", "us-central1", "us-central1"]
    assert (tried[2].machine_type, tried[2].accelerator_count) == ("a2-highgpu-8g", 8)
    assert tried[3].scheduling_strategy == "STANDARD"
    assert merged_template(t, -1) is t


def test_defaults_without_a_recovery_section(tmp_path: Path) -> None:
    t = load_template(_write(tmp_path, ""))
    assert t.recovery is None
    assert places(t) == [t]


def test_an_accelerator_count_the_fallback_machine_does_not_take_is_placed_on_its_line(
    tmp_path: Path,
) -> None:
    path = _write(
        tmp_path,
        """recovery:
  fallback:
    - machine_type: a2-highgpu-8g
      accelerator_count: 3
""",
    )
    errors = _errors(path)
    assert errors == [
        "11:recovery.fallback[0].accelerator_count: a2-highgpu-8g takes 8 x NVIDIA_TESLA_A100, not 3"
        " | set accelerator_count: 8"
    ]


def test_a_fallback_machine_that_clashes_with_the_templates_gpus_names_the_entry(tmp_path: Path) -> None:
    path = _write(tmp_path, "recovery:\n  fallback:\n    - machine_type: g2-standard-8\n")
    errors = _errors(path)
    assert len(errors) == 1
    assert errors[0].startswith("10:recovery.fallback[0]")
    assert "NVIDIA_TESLA_A100" in errors[0]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("    - scheduling_strategy: STANDRD\n", "10:recovery.fallback[0].scheduling_strategy: 'STANDRD'"),
        ("    - location: us-centrl1\n", "10:recovery.fallback[0].location: 'us-centrl1' is not"),
        (
            "    - locaton: us-east1\n",
            "10:recovery.fallback[0].locaton: unknown field 'locaton' | did you mean `location`?",
        ),
        ("    - {}\n", "10:recovery.fallback[0]: a fallback entry must change at least one of"),
        ("    - staging_bucket: s3://x\n", "10:recovery.fallback[0].staging_bucket:"),
        ("    - replica_count: 0\n", "10:recovery.fallback[0].replica_count:"),
    ],
)
def test_bad_fallback_entries(tmp_path: Path, body: str, expected: str) -> None:
    errors = _errors(_write(tmp_path, "recovery:\n  fallback:\n" + body))
    assert any(e.startswith(expected) for e in errors), errors
    with pytest.raises(TemplateError):
        load_template(tmp_path / "job.yaml")


def test_unknown_and_negative_recovery_fields(tmp_path: Path) -> None:
    errors = _errors(_write(tmp_path, "recovery:\n  max_preemption: 3\n  max_restarts_on_errors: -1\n"))
    assert any(
        e.startswith("9:recovery.max_preemption: unknown field") and "max_preemptions" in e for e in errors
    )
    assert any(e.startswith("10:recovery.max_restarts_on_errors:") for e in errors)


def test_an_error_of_the_template_itself_is_not_repeated_for_each_fallback(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        HEAD.replace("accelerator_count: 1", "accelerator_count: 3")
        + "recovery:\n  fallback:\n    - location: us-east1\n"
    )
    errors = _errors(path)
    assert len(errors) == 1 and errors[0].startswith("6:accelerator_count"), errors


def test_fallbacks_with_no_preemptions_allowed_warn(tmp_path: Path) -> None:
    path = _write(tmp_path, "recovery:\n  max_preemptions: 0\n  fallback:\n    - location: us-east1\n")
    warnings = [p for p in inspect_file(path)[1] if p.severity == "warning" and p.path == "recovery.fallback"]
    assert len(warnings) == 1
