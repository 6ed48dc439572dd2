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
    "vertexdist/render/probe.py",
    "vertexdist/wire/probe.py",
    "vertexdist/estimate/probe.py",
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
    # render knows no tuning study either: a tuning job's request is data the study reads.
    "vertexdist/render/": (
        "vertexdist.backends",
        "vertexdist.local",
        "vertexdist.emulator",
        "vertexdist.cli",
        "vertexdist.jobs",
        "vertexdist.tuning",
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
    # The managed-job controller is a caller of the service and the backends, like the CLI: it never prints,
    # and it reaches jobs through a backend, never the local runtime or the emulator directly.
    "vertexdist/managed/": ("vertexdist.cli", "rich", "vertexdist.local", "vertexdist.emulator"),
    "vertexdist/container/": (
        "vertexdist.local",
        "vertexdist.backends",
        "vertexdist.emulator",
        "vertexdist.cli",
    ),
    "vertexdist/emulator/": ("vertexdist.backends.vertex", "vertexdist.backends.local", "vertexdist.cli"),
    # Reading heartbeats: the verdict is pure, the folder reader reads files; neither knows a backend.
    "vertexdist/health/": (
        "vertexdist.backends",
        "vertexdist.local",
        "vertexdist.emulator",
        "vertexdist.cli",
    ),
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


def test_no_part_of_vertexdist_but_the_shipped_launcher_writes_the_environment() -> None:
    # vertexdist is a library too (the service, the managed controller, the console call it in one process):
    # what a job needs goes into the environment it is given, never into this process's. Only the shipped
    # launcher, which is the replica's own process, sets variables for the code it starts; so does the warm
    # pool's forked child (`_run_child`), a replica's own process too, and only there.
    pool = REPO / "vertexdist/local/warm_pool.py"
    writes = [
        f"{path.relative_to(REPO)} {where}"
        for path in sorted(REPO.glob("vertexdist/**/*.py"))
        if not path.is_relative_to(REPO / "vertexdist/shipped") and path != pool
        for where in _writes_environ(path)
    ]
    child = next(
        node
        for node in ast.walk(ast.parse(pool.read_text()))
        if isinstance(node, ast.FunctionDef) and node.name == "_run_child"
    )
    outside = [
        w for w in _writes_environ(pool) if not child.lineno <= int(w.split()[1]) <= (child.end_lineno or 0)
    ]
    assert not outside, outside
    assert not writes, "\n".join(writes)


SERVER_CLASSES = {"HTTPServer", "ThreadingHTTPServer", "TCPServer", "ThreadingTCPServer"}


def _takes_a_server(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom) and node.module in ("http.server", "socketserver"):
        return any(alias.name in SERVER_CLASSES for alias in node.names)
    if isinstance(node, ast.Import):
        return any(alias.name == "socketserver" for alias in node.names)
    return isinstance(node, ast.Attribute) and node.attr in SERVER_CLASSES


def _servers_made(path: Path) -> list[str]:
    """Where a module takes a server class of http.server or socketserver (to subclass or make one)."""
    tree = ast.parse(path.read_text(), str(path))
    return [f"line {getattr(node, 'lineno', 0)}" for node in ast.walk(tree) if _takes_a_server(node)]


def test_one_threaded_server_base() -> None:
    # Every HTTP server of vertexdist (the emulator's Vertex and Cloud Storage APIs, a local job's metadata
    # server) is a LoopbackServer: loopback only, started and stopped one way.
    made = [
        f"{path.relative_to(REPO)} {where}"
        for path in sorted(REPO.glob("vertexdist/**/*.py"))
        if path != REPO / "vertexdist/loopback_server.py"
        for where in _servers_made(path)
    ]
    assert not made, "\n".join(made) + "\nsubclass vertexdist.loopback_server.LoopbackServer instead"


def test_the_server_check_sees_each_way_in(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    for line in (
        "from http.server import ThreadingHTTPServer",
        "from http.server import BaseHTTPRequestHandler, HTTPServer",
        "import socketserver",
        "import http.server\nclass S(http.server.ThreadingHTTPServer): pass",
    ):
        probe.write_text(line + "\n")
        assert _servers_made(probe), line
    probe.write_text("from http.server import BaseHTTPRequestHandler\n")
    assert not _servers_made(probe)


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
        "vertexdist/shipped/vertexdist_launcher/worker_fork.py": ("torch",),  # torchrun's worker handler
        "vertexdist/shipped/vertexdist_launcher/rendezvous_store.py": ("torch",),  # torchrun's store
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


def _module_imports(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of `package` it imports (at the top or inside a function; what is imported
    only for type checking does not count, nor does the running of parent packages' __init__)."""
    modules = {}
    for path in root.glob(f"{package}/**/*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        typing_only = {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for stmt in node.body
            for inner in ast.walk(stmt)
        }
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = here.split(".")[: len(here.split(".")) - node.level + 1]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                for alias in node.names:
                    found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_of_vertexdist_imports_itself_round_a_circle() -> None:
    graph = _module_imports(REPO, "vertexdist")
    circles = [
        " -> ".join(c) + "  (" + "; ".join(f"{m} imports {sorted(graph[m] & set(c))}" for m in c) + ")"
        for c in _cycles(graph)
    ]
    assert not circles, "\n".join(circles)


def test_the_circle_finder_finds_a_lazy_circle_and_ignores_type_checking(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text("def f() -> None:\n    from .. import c\n")
    (package / "c.py").write_text("import pkg.a\n")
    (package / "d.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n"
    )
    (package / "e.py").write_text("from pkg import d\n")
    graph = _module_imports(tmp_path, "pkg")
    assert _cycles(graph) == [["pkg.a", "pkg.c", "pkg.sub.b"]]
    assert graph["pkg.d"] == set() and graph["pkg.e"] == {"pkg.d"}


def _unguarded_handlers(path: Path) -> list[str]:
    """Classes of a module that answer HTTP straight from http.server's handler, not through the guard."""
    tree = ast.parse(path.read_text(), str(path))
    return [
        f"line {node.lineno}: class {node.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        for base in node.bases
        if (isinstance(base, ast.Name) and base.id == "BaseHTTPRequestHandler")
        or (isinstance(base, ast.Attribute) and base.attr == "BaseHTTPRequestHandler")
    ]


def test_every_request_handler_stands_on_the_guard(tmp_path: Path) -> None:
    # Who may drive a loopback server (its user; its own Host and Origin; the content types of its writes)
    # is checked in one place, GuardedHandler (docs/security.md): a handler beside it would skip it.
    unguarded = [
        f"{path.relative_to(REPO)} {where}"
        for path in sorted(REPO.glob("vertexdist/**/*.py"))
        if path != REPO / "vertexdist/loopback_server.py"
        for where in _unguarded_handlers(path)
    ]
    assert not unguarded, "\n".join(unguarded) + "\nsubclass vertexdist.loopback_server.GuardedHandler"
    probe = tmp_path / "probe.py"
    probe.write_text("import http.server\nclass H(http.server.BaseHTTPRequestHandler): pass\n")
    assert _unguarded_handlers(probe)
