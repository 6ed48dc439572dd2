"""Property tests: whatever a template file holds, the loader raises nothing but TemplateError."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vertexdist.errors import TemplateError
from vertexdist.spec import JobTemplate, load_template

from .conftest import BASE, REPO_ROOT

SHIPPED_TEXTS = [p.read_text() for p in sorted((REPO_ROOT / "job_templates").glob("*.yaml"))]
NESTED = ["trainer.args", "trainer.env", "trainer.package", "trainer.module", "build.repository"]
FIELDS = [*JobTemplate.model_fields, *NESTED, "unknown_key"]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(
        ["n1-standard-4", "a2-highgpu-4g", "NVIDIA_L4", "gs://b/x", "24h", "-1", "0", "SPOT", "."]
    ),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)

SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _load_must_only_raise_template_error(path: Path) -> None:
    try:
        load_template(path)
    except TemplateError as exc:
        assert exc.problems
        for problem in exc.problems:
            assert problem.line >= 1 and problem.col >= 1 and problem.message


@SETTINGS
@given(field=st.sampled_from(FIELDS), value=values)
def test_mutated_field_only_raises_template_error(tmp_path: Path, field: str, value: Any) -> None:
    data: dict[str, Any] = {**BASE}
    if "." in field:
        parent, child = field.split(".")
        data[parent] = {child: value}
    else:
        data[field] = value
    path = tmp_path / "mutated.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    _load_must_only_raise_template_error(path)


@SETTINGS
@given(
    source=st.sampled_from(SHIPPED_TEXTS),
    position=st.integers(min_value=0, max_value=10_000),
    length=st.integers(min_value=0, max_value=40),
    insert=st.text(alphabet=st.sampled_from(list(":-[]{}#&*!|>'\"%@` \n\tx1.")), max_size=12),
)
def test_mutated_text_only_raises_template_error(
    tmp_path: Path, source: str, position: int, length: int, insert: str
) -> None:
    position %= len(source) + 1
    text = source[:position] + insert + source[position + length :]
    path = tmp_path / "mutated.yaml"
    path.write_text(text)
    _load_must_only_raise_template_error(path)


@SETTINGS
@given(data=st.dictionaries(st.text(max_size=20), values, max_size=6))
def test_arbitrary_mappings_only_raise_template_error(tmp_path: Path, data: dict[str, Any]) -> None:
    path = tmp_path / "random.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    _load_must_only_raise_template_error(path)


@SETTINGS
@given(raw=st.binary(max_size=200))
def test_arbitrary_bytes_only_raise_template_error(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "bytes.yaml"
    path.write_bytes(raw)
    _load_must_only_raise_template_error(path)
