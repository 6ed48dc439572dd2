"""The backend registry: every backend named in BACKENDS is found by name, made for its target, and has the
interface's very signatures (what is backend-specific travels in SubmitOptions, never in extra keywords)."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from vertexdist.backends import BACKENDS, BackendNotFound, backend_class, create_backend
from vertexdist.backends.base import Backend
from vertexdist.backends.config import Target
from vertexdist.backends.local.prepare import LocalOptions
from vertexdist.errors import UsageError

METHODS = ("dryrun", "schedule", "describe", "replicas", "timeline", "list", "cancel", "logs", "outputs")


def _shape(function: object) -> list[tuple[str, object, object]]:
    """A method's parameters as (name, kind, default), annotations aside."""
    parameters = list(inspect.signature(function).parameters.values())  # type: ignore[arg-type]
    return [(p.name, p.kind, p.default) for p in parameters]


def test_vertex_and_local_are_registered() -> None:
    assert {"vertex", "local"} <= set(BACKENDS)


@pytest.mark.parametrize("name", sorted(BACKENDS))
@pytest.mark.parametrize("method", METHODS)
def test_every_backend_has_the_interfaces_signatures(name: str, method: str) -> None:
    assert _shape(getattr(backend_class(name), method)) == _shape(getattr(Backend, method))


def test_the_local_tuning_part_has_them_too() -> None:
    from vertexdist.backends.local.tuning import LocalTuningBackend

    for method in METHODS:
        assert _shape(getattr(LocalTuningBackend, method)) == _shape(getattr(Backend, method)), method


def test_an_unknown_backend_is_a_usage_error() -> None:
    with pytest.raises(UsageError) as caught:
        backend_class("slurm")
    assert "local" in (caught.value.hint or "") and "vertex" in (caught.value.hint or "")


def test_create_backend_makes_each_for_its_target(tmp_path: Path) -> None:
    target = Target(project="p", location="us-central1")
    vertex = create_backend("vertex", target)
    assert type(vertex).__name__ == "VertexBackend" and vertex.target == target
    local = create_backend("local", LocalOptions(runs_dir=tmp_path))
    assert local.list() == []  # no run folders there yet


def test_naming_the_backends_imports_none() -> None:
    code = (
        "import sys, vertexdist.backends as b; b.BACKENDS;"
        " print([m for m in ('vertexdist.backends.vertex', 'vertexdist.backends.local', 'vertexdist.local')"
        " if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "line", ["vertexdist.backends.local:NoSuchBackend", "vertexdist.backends.local.prepare:RUNS_DIR"]
)
def test_a_registry_line_naming_no_class_says_which(monkeypatch: pytest.MonkeyPatch, line: str) -> None:
    monkeypatch.setitem(BACKENDS, "broken", line)
    with pytest.raises(BackendNotFound) as caught:
        backend_class("broken")
    assert line in str(caught.value) and "vertexdist/backends/__init__.py" in (caught.value.hint or "")


class _EchoBackend:
    """A class outside vertexdist, standing for a new backend's package."""

    def __init__(self, target: object = None) -> None:
        self.target = target


def test_a_new_backend_is_one_registry_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(BACKENDS, "echo", f"{__name__}:_EchoBackend")
    assert backend_class("echo") is _EchoBackend
    made = create_backend("echo", "a-target")
    assert isinstance(made, _EchoBackend) and made.target == "a-target"
