"""The rooms of the package and which may import which (docs/architecture.md, "The walls tests enforce").

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
    # The local backend (its run folders, template jobs and tuning trials) runs on the local runtime.
    "vertexdist/backends/local/": ("vertexdist.backends.vertex", "vertexdist.emulator", "vertexdist.cli"),
    # The local runtime knows no backend (but the interface's types, below), no emulator and no CLI.
    "vertexdist/local/": ("vertexdist.backends", "vertexdist.emulator", "vertexdist.cli", "vertexdist.jobs"),
    # The CLI is flags and printing: it reaches the backends' parts through the service (vertexdist.jobs).
    "vertexdist/cli/": ("vertexdist.local",),
    # The service sits between the CLI and the backends, and never prints.
    "vertexdist/jobs/": ("vertexdist.cli", "rich"),
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
    # The tuning study is shared by local-run and the emulator: it knows neither, nor any backend, nor the
    # local runtime (trials run as local jobs through backends/local/trials.py, as CustomJobs in the
    # emulator).
    "vertexdist/tuning/": (
        "vertexdist.backends",
        "vertexdist.emulator",
        "vertexdist.cli",
        "vertexdist.local",
    ),
}


# room -> module prefixes it may import although a wall above bans them
DOORS: dict[str, tuple[str, ...]] = {
    # The job and replica states and events are the Backend interface's (backends/base.py): the runtime
    # emits them.
    "vertexdist/local/": ("vertexdist.backends.base",),
}


def test_no_room_imports_through_its_walls() -> None:
    crossings = []
    for path in sorted([*REPO.glob("vertexdist/**/*.py"), *REPO.glob("trainer_pkg/**/*.py")]):
        rel = path.relative_to(REPO).as_posix()
        doors = tuple(d for room, allowed in DOORS.items() if rel.startswith(room) for d in allowed)
        for room, banned in WALLS.items():
            if rel.startswith(room):
                crossings += [
                    f"{rel} imports {m}"
                    for m in _imports(path)
                    if m.startswith(banned) and not (doors and m.startswith(doors))
                ]
    assert not crossings, "\n".join(crossings)


def _writes_environ(path: Path) -> list[str]:
    """Where a module changes os.environ: `os.environ[...] = `, `del os.environ[...]`, or a call of one of
    its mutating methods (pop, update, setdefault, clear, __setitem__); `os.putenv` / `os.unsetenv` too."""
    tree = ast.parse(path.read_text(), str(path))

    def is_environ(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Attribute)
            and node.attr == "environ"
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        )

    found = []
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = list(node.targets) if isinstance(node, ast.Assign) else [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        if any(isinstance(t, ast.Subscript) and is_environ(t.value) for t in targets):
            found.append(f"line {node.lineno}")
        if isinstance(node, ast.Attribute) and (
            (is_environ(node.value) and node.attr in ("pop", "update", "setdefault", "clear", "__setitem__"))
            or (
                isinstance(node.value, ast.Name)
                and node.value.id == "os"
                and node.attr in ("putenv", "unsetenv")
            )
        ):
            found.append(f"line {node.lineno}")
    return found


def test_the_cli_never_writes_the_environment() -> None:
    # Where a job goes is the service's business (vertexdist.jobs): it reads the environment, never writes it.
    writes = [
        f"{path.relative_to(REPO)} {where}"
        for path in sorted(REPO.glob("vertexdist/cli/**/*.py"))
        for where in _writes_environ(path)
    ]
    assert not writes, "\n".join(writes)


def test_the_environment_check_sees_each_kind_of_write(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    for line in (
        'os.environ["A"] = "1"',
        'del os.environ["A"]',
        'os.environ.pop("A", None)',
        "os.environ.update(A='1')",
        'os.putenv("A", "1")',
    ):
        probe.write_text(f"import os\n{line}\n")
        assert _writes_environ(probe), line
    probe.write_text('import os\nx = os.environ.get("A")\ny = os.environ["A"]\n')
    assert not _writes_environ(probe)


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
