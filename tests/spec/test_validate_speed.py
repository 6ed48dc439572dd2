"""What keeps `vertexdist validate` fast (issue 36, item 16; bench/bench_validate.py measures it): it imports
only its own command module and the spec (no backends, no job services), builds the spec's models without
pydantic's plugin discovery, and parses each file of a folder walk once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vertexdist.spec import loader

REPO_ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import sys
from importlib import metadata
scans = []
real = metadata.entry_points
metadata.entry_points = lambda *a, **k: scans.append(1) or real(*a, **k)
from vertexdist.cli import main
try:
    main.run(["validate", "job_templates/"])
except SystemExit as exc:
    assert not exc.code, exc.code
print("LOADED=" + ",".join(sorted(m for m in sys.modules if m.startswith("vertexdist."))))
print("SCANS=" + str(len(scans)))
"""


def test_validate_imports_only_its_command_and_the_spec() -> None:
    env = {**os.environ, "NO_GCE_CHECK": "true"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    loaded = lines["LOADED"].split(",")
    assert "vertexdist.cli.validate" in loaded
    others = [
        m for m in loaded if m.startswith(("vertexdist.backends", "vertexdist.jobs", "vertexdist.wire"))
    ]
    assert others == [], others
    assert [m for m in loaded if m.startswith("vertexdist.cli.") and m != "vertexdist.cli.validate"] == [
        "vertexdist.cli.help_format",
        "vertexdist.cli.main",
        "vertexdist.cli.targets",
    ]
    assert lines["SCANS"] == "0"  # pydantic's plugin discovery never ran


def test_a_folder_walk_parses_each_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    template = (REPO_ROOT / "job_templates" / "cpu-small.yaml").read_text()
    for name in ("a.yaml", "b.yaml"):
        (tmp_path / name).write_text(template)
    (tmp_path / "notes.yaml").write_text("title: not a template\n")
    parses: list[str] = []
    real = loader.load_yaml_mapping
    monkeypatch.setattr(
        loader, "load_yaml_mapping", lambda text, **kw: parses.append(text) or real(text, **kw)
    )
    found = loader.find_templates([tmp_path])
    assert [p.name for p in found.files] == ["a.yaml", "b.yaml"]
    results = [loader.inspect_file(p) for p in found.files]
    assert all(template is not None and not problems for template, problems in results)
    assert len(parses) == 3  # a, b and notes, once each
    (tmp_path / "a.yaml").write_text(template.replace("cpu-small", "changed"))
    loader.find_templates([tmp_path])
    (tmp_path / "a.yaml").write_text(template.replace("cpu-small", "changed again"))
    changed, _ = loader.inspect_file(tmp_path / "a.yaml")  # the walk's parse is of older text: parsed anew
    assert changed is not None and changed.display_name == "changed again"
