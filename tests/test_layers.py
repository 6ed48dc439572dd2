"""The rooms of the package and which may import which (design.md "Parts and their rooms").

The pure core's ban on cloud SDKs, torch, rich and ray is a ruff rule (pyproject.toml, TID251); these tests
check that the rule really fails lint there and only there, and read every module's imports to hold the
other walls: no backend imports another, `container/` builds images and knows nothing of running them, the
local backend's parts know no backend or emulator, and the trainer never imports vertexdist.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RUFF = Path(sys.executable).with_name("ruff")
PURE_FILES = (
    "vertexdist/spec/probe.py",
    "vertexdist/render.py",
    "vertexdist/wire/probe.py",
    "vertexdist/estimate/probe.py",
    "vertexdist/render_tuning.py",
)
BANNED = ("google.cloud.aiplatform", "google.cloud.storage", "torch", "rich.console", "ray")


def _lint(filename: str, code: str) -> str:
    result = subprocess.run(
        [
            str(RUFF),
            "check",
            "--select",
            "TID251",
            "--stdin-filename",
            filename,
            "--output-format",
            "concise",
            "-",
        ],
        input=code,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    return result.stdout


@pytest.mark.parametrize("filename", PURE_FILES)
@pytest.mark.parametrize("module", BANNED)
def test_the_pure_core_may_not_import_heavy_or_screen_libraries(filename: str, module: str) -> None:
    # Lazy imports too: an import inside a function still loads the library when it runs.
    assert "TID251" in _lint(filename, f"def f() -> None:\n    import {module}\n")
    assert "TID251" in _lint(filename, f"from {module.rsplit('.', 1)[0]} import x\n")


@pytest.mark.parametrize("filename", ["vertexdist/cli/probe.py", "vertexdist/backends/vertex/probe.py"])
def test_the_edges_may(filename: str) -> None:
    assert "TID251" not in _lint(filename, "import torch\nimport rich\nimport google.cloud.aiplatform\n")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


# room (a path prefix) -> module prefixes it must not import
WALLS: dict[str, tuple[str, ...]] = {
    "vertexdist/spec/": ("vertexdist.backends", "vertexdist.local", "vertexdist.emulator", "vertexdist.cli"),
    "vertexdist/wire/": ("vertexdist.backends", "vertexdist.local", "vertexdist.emulator", "vertexdist.cli"),
    "vertexdist/render.py": (
        "vertexdist.backends",
        "vertexdist.local",
        "vertexdist.emulator",
        "vertexdist.cli",
    ),
    "vertexdist/estimate/": (
        "vertexdist.backends",
        "vertexdist.local",
        "vertexdist.emulator",
        "vertexdist.cli",
    ),
    "vertexdist/backends/vertex/": ("vertexdist.backends.local", "vertexdist.local", "vertexdist.emulator"),
    "vertexdist/backends/local.py": ("vertexdist.backends.vertex", "vertexdist.emulator"),
    "vertexdist/local/": ("vertexdist.backends", "vertexdist.emulator", "vertexdist.cli"),
    "vertexdist/container/": (
        "vertexdist.local",
        "vertexdist.backends",
        "vertexdist.emulator",
        "vertexdist.cli",
    ),
    "vertexdist/emulator/": ("vertexdist.backends.vertex", "vertexdist.backends.local", "vertexdist.cli"),
    "trainer_pkg/": ("vertexdist",),
    # The console reads jobs through the backends only: no second reader of run folders or the emulator.
    "vertexdist/console/": (
        "vertexdist.local.events",
        "vertexdist.local.log_records",
        "vertexdist.local.runner",
        "vertexdist.emulator",
        "vertexdist.cli",
    ),
    # Shipped with every job and run where vertexdist is not installed.
    "vertexdist/shipped/": ("vertexdist",),
    "vertexdist/render_tuning.py": (
        "vertexdist.backends",
        "vertexdist.local",
        "vertexdist.emulator",
        "vertexdist.cli",
        "vertexdist.tuning",
    ),
    "vertexdist/backends/local_tuning.py": ("vertexdist.backends.vertex", "vertexdist.emulator"),
    # The tuning study is shared by local-run and the emulator: it knows neither, nor any backend; its pure
    # parts (all but the loop and the local launcher) do not start processes either.
    "vertexdist/tuning/": ("vertexdist.backends", "vertexdist.emulator", "vertexdist.cli"),
    **{
        f"vertexdist/tuning/{pure}.py": ("vertexdist.local", "vertexdist.backends", "vertexdist.emulator")
        for pure in ("space", "search", "stopping", "hypertune", "study", "trials", "driver")
    },
}


def test_no_room_imports_through_its_walls() -> None:
    crossings = []
    for path in sorted([*REPO.glob("vertexdist/**/*.py"), *REPO.glob("trainer_pkg/**/*.py")]):
        rel = path.relative_to(REPO).as_posix()
        for room, banned in WALLS.items():
            if rel.startswith(room):
                crossings += [f"{rel} imports {m}" for m in _imports(path) if m.startswith(banned)]
    assert not crossings, "\n".join(crossings)


def test_the_shipped_launcher_needs_only_the_standard_library() -> None:
    # torch only in the torchrun mode, ray only in the ray mode's GCS client: on replicas that have them.
    allowed = {
        "vertexdist/shipped/vertexdist_launcher/torchrun.py": ("torch",),
        "vertexdist/shipped/vertexdist_launcher/ray_gcs.py": ("ray",),
    }
    foreign = []
    for path in sorted(REPO.glob("vertexdist/shipped/**/*.py")):
        rel = path.relative_to(REPO).as_posix()
        for module in _imports(path):
            top = module.split(".")[0]
            if top not in sys.stdlib_module_names and top != "__future__" and top not in allowed.get(rel, ()):
                foreign.append(f"{rel} imports {module}")
    assert not foreign, "\n".join(foreign)


def test_the_walls_are_checked_against_real_rooms() -> None:
    for room in WALLS:
        assert (REPO / room).exists(), room
