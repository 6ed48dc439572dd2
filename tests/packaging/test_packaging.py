"""The trainer sdist: reproducible bytes, the SDK's layout, and a local install of it."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from vertexdist.packaging import (
    SCRIPT_PACKAGE,
    PackagingError,
    build_sdist,
    install_package,
    package_uri,
)
from vertexdist.shipped import LAUNCHER_DIR
from vertexdist.shipped.vertexdist_launcher import health
from vertexdist.shipped.vertexdist_launcher.health import SOURCE_FILE


@dataclass
class Trainer:
    package: Path | None = None
    script: Path | None = None
    requirements: list[str] = field(default_factory=list)


def _make_package(root: Path, name: str = "mytrainer") -> Path:
    pkg = root / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "task.py").write_text("import sys\nprint('task ran', sys.argv[1:])\n")
    (pkg / "config.json").write_text('{"lr": 0.1}\n')
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "task.cpython-311.pyc").write_bytes(b"junk")
    return pkg


def test_same_sources_give_the_same_bytes_whatever_the_file_times(tmp_path: Path) -> None:
    first = build_sdist(Trainer(package=_make_package(tmp_path / "a")), tmp_path / "out1")
    pkg_b = _make_package(tmp_path / "b")
    for path in pkg_b.rglob("*"):
        os.utime(path, (1_000_000_000, 1_000_000_000))
    second = build_sdist(Trainer(package=pkg_b), tmp_path / "out2")
    assert first.digest == second.digest
    assert first.path.read_bytes() == second.path.read_bytes()
    assert first.filename == "mytrainer-0.1.tar.gz"


def test_a_changed_file_changes_the_digest(tmp_path: Path) -> None:
    pkg = _make_package(tmp_path)
    before = build_sdist(Trainer(package=pkg), tmp_path / "out")
    (pkg / "task.py").write_text("print('changed')\n")
    after = build_sdist(Trainer(package=pkg), tmp_path / "out")
    assert before.digest != after.digest


def test_sdist_layout_skips_caches_and_carries_requirements(tmp_path: Path) -> None:
    built = build_sdist(Trainer(package=_make_package(tmp_path), requirements=["pyyaml>=6"]), tmp_path / "o")
    with tarfile.open(built.path) as tar:
        names = tar.getnames()
        pkg_info = tar.extractfile("mytrainer-0.1/PKG-INFO").read().decode()  # type: ignore[union-attr]
    assert names == sorted(names)
    assert "mytrainer-0.1/mytrainer/task.py" in names
    assert "mytrainer-0.1/mytrainer/config.json" in names
    assert not any("__pycache__" in name for name in names)
    assert "Requires-Dist: pyyaml>=6" in pkg_info


def test_a_script_is_packaged_like_the_sdk_does(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('hello from script')\n")
    built = build_sdist(Trainer(script=script), tmp_path / "o")
    assert built.dist_name == SCRIPT_PACKAGE
    with tarfile.open(built.path) as tar:
        assert f"{SCRIPT_PACKAGE}-0.1/{SCRIPT_PACKAGE}/task.py" in tar.getnames()
        # the user's own file name, for the health watcher to name its frames by (train.py, not task.py)
        source = tar.extractfile(f"{SCRIPT_PACKAGE}-0.1/{SCRIPT_PACKAGE}/{SOURCE_FILE}")
        assert source is not None and source.read() == b"train.py"
    assert health.SCRIPT_PACKAGE == SCRIPT_PACKAGE


@pytest.mark.parametrize("kind", ["package", "script"])
def test_every_sdist_carries_the_shipped_launcher_as_a_top_level_package(tmp_path: Path, kind: str) -> None:
    script = tmp_path / "train.py"
    script.write_text("")
    trainer = Trainer(package=_make_package(tmp_path)) if kind == "package" else Trainer(script=script)
    built = build_sdist(trainer, tmp_path / "o")
    prefix = f"{built.dist_name}-0.1/vertexdist_launcher/"
    with tarfile.open(built.path) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
        shipped = {m.name.removeprefix(prefix): tar.extractfile(m).read() for m in members}  # type: ignore[union-attr]
    expected = {p.name: p.read_bytes() for p in LAUNCHER_DIR.glob("*.py")}
    assert shipped == expected and {"__main__.py", "torchrun_args.py", "worker.py"} <= set(shipped)


def test_a_trainer_cannot_take_the_launcher_s_name(tmp_path: Path) -> None:
    with pytest.raises(PackagingError, match="the name of the launcher"):
        build_sdist(Trainer(package=_make_package(tmp_path, "vertexdist_launcher")), tmp_path / "o")


def test_package_uri_is_content_addressed(tmp_path: Path) -> None:
    built = build_sdist(Trainer(package=_make_package(tmp_path)), tmp_path / "o")
    uri = package_uri("gs://bucket/staging/", built)
    assert uri == f"gs://bucket/staging/vertexdist/packages/{built.digest[:16]}/mytrainer-0.1.tar.gz"


def test_bad_sources_get_clear_errors(tmp_path: Path) -> None:
    (tmp_path / "notapkg").mkdir()
    with pytest.raises(PackagingError, match=r"no __init__\.py"):
        build_sdist(Trainer(package=tmp_path / "notapkg"), tmp_path / "o")
    with pytest.raises(PackagingError, match="not found"):
        build_sdist(Trainer(script=tmp_path / "missing.py"), tmp_path / "o")


@pytest.mark.integration
def test_install_runs_the_installed_copy_and_is_reused(tmp_path: Path) -> None:
    built = build_sdist(Trainer(package=_make_package(tmp_path / "src")), tmp_path / "o")
    site = install_package(built.path, tmp_path / "cache")
    assert (site / "mytrainer" / "config.json").is_file()
    result = subprocess.run(
        [sys.executable, "-m", "mytrainer.task", "--epochs", "1"],
        env={**os.environ, "PYTHONPATH": str(site)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "task ran ['--epochs', '1']" in result.stdout
    # The launcher is importable from the install alone: `python -m vertexdist_launcher` answers.
    launcher = subprocess.run(
        [sys.executable, "-m", "vertexdist_launcher", "torchrun"],
        env={**os.environ, "PYTHONPATH": str(site)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert launcher.returncode == 2 and "usage: python -m vertexdist_launcher" in launcher.stderr
    marker = site / ".vertexdist-installed"
    stamp = marker.stat().st_mtime_ns
    assert install_package(built.path, tmp_path / "cache") == site
    assert marker.stat().st_mtime_ns == stamp


@pytest.mark.integration
def test_a_broken_package_fails_install_with_the_pip_message(tmp_path: Path) -> None:
    pkg = _make_package(tmp_path / "src")
    built = build_sdist(Trainer(package=pkg, requirements=["not a valid requirement !!"]), tmp_path / "o")
    with pytest.raises(PackagingError, match=r"installing mytrainer-0\.1\.tar\.gz failed"):
        install_package(built.path, tmp_path / "cache")
    assert not any(p.name.startswith(".install-") for p in (tmp_path / "cache").iterdir())


def test_render_names_the_package_submit_will_upload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from vertexdist.cli import main
    from vertexdist.packaging import planned_package_uri, sdist_bytes

    pkg = _make_package(tmp_path)
    template = tmp_path / "job.yaml"
    template.write_text(
        "display_name: pkg-job\nproject: my-project\nlocation: us-central1\nstaging_bucket: gs://my-bucket/stage\n"
        "machine_type: n1-standard-4\ntrainer:\n  package: mytrainer\n"
    )
    with pytest.raises(SystemExit) as exit_info:
        main.run(["render", str(template), "--format", "json"])
    assert exit_info.value.code in (0, None)
    spec = json.loads(capsys.readouterr().out)
    uri = spec["workerPoolSpecs"][0]["pythonPackageSpec"]["packageUris"][0]
    assert uri == planned_package_uri(Trainer(package=pkg), "gs://my-bucket/stage")
    assert sdist_bytes(Trainer(package=pkg))[0].digest[:16] in uri


def _names(built_path: Path) -> list[str]:
    with tarfile.open(built_path) as tar:
        return tar.getnames()


def test_the_build_contexts_exclusions_apply_to_the_sdist(tmp_path: Path) -> None:
    pkg = _make_package(tmp_path)
    for secret in (".env", ".env.prod", "credentials-x.json", "svc-key.json"):
        (pkg / secret).write_text("SECRET=hunter2\n")
    for folder in (".git", ".venv", ".hypothesis", "old-env"):
        (pkg / folder).mkdir()
        (pkg / folder / "inside.py").write_text("x = 1\n")
    (pkg / "old-env" / "pyvenv.cfg").write_text("home = /usr\n")
    names = _names(build_sdist(Trainer(package=pkg), tmp_path / "o").path)
    assert "mytrainer-0.1/mytrainer/task.py" in names
    assert not [n for n in names if "env" in n or "key" in n or "credentials" in n or ".git" in n]
    assert not [n for n in names if ".hypothesis" in n]


def test_a_link_to_a_file_outside_the_package_is_an_error_naming_both(tmp_path: Path) -> None:
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n")
    pkg = _make_package(tmp_path / "src")
    (pkg / "users.txt").symlink_to(passwd)
    with pytest.raises(PackagingError) as caught:
        build_sdist(Trainer(package=pkg), tmp_path / "o")
    message = caught.value.message
    assert str(pkg / "users.txt") in message and str(passwd) in message and "outside the package" in message
    assert not (tmp_path / "o").exists()


def test_a_link_to_a_folder_outside_the_package_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "data.py").write_text("x = 1\n")
    pkg = _make_package(tmp_path / "src")
    (pkg / "vendored").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(PackagingError, match=r"vendored .*outside the package"):
        build_sdist(Trainer(package=pkg), tmp_path / "o")


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda pkg: (pkg / "loop.py").symlink_to("loop.py"), r"loop\.py -> loop\.py is a symlink loop"),
        (lambda pkg: (pkg / "a").symlink_to("b") or (pkg / "b").symlink_to("a"), "is a symlink loop"),
        (lambda pkg: (pkg / "again").symlink_to("."), r"again -> \. is a symlink loop"),
        (lambda pkg: (pkg / "gone.py").symlink_to("missing.py"), r"gone\.py -> missing\.py is a dangling"),
    ],
    ids=["self-loop", "two-link-loop", "folder-loop", "dangling"],
)
def test_looping_and_dangling_links_are_errors_naming_the_link(
    tmp_path: Path, make: Any, expected: str
) -> None:
    pkg = _make_package(tmp_path)
    make(pkg)
    with pytest.raises(PackagingError, match=expected):
        build_sdist(Trainer(package=pkg), tmp_path / "o")


def test_a_link_inside_the_package_ships_its_content_reproducibly(tmp_path: Path) -> None:
    linked = _make_package(tmp_path / "a")
    (linked / "alias.py").symlink_to("task.py")
    (linked / "conf").mkdir()
    (linked / "conf" / "base.json").write_text("{}\n")
    (linked / "conf-link").symlink_to("conf", target_is_directory=True)
    (linked / "settings.txt").symlink_to(".env")  # a harmless name for a secret is still the secret
    (linked / ".env").write_text("TOKEN=x\n")
    copied = _make_package(tmp_path / "b")
    (copied / "alias.py").write_bytes((copied / "task.py").read_bytes())
    (copied / "conf").mkdir()
    (copied / "conf" / "base.json").write_text("{}\n")
    (copied / "conf-link").mkdir()
    (copied / "conf-link" / "base.json").write_text("{}\n")
    first = build_sdist(Trainer(package=linked), tmp_path / "o1")
    second = build_sdist(Trainer(package=copied), tmp_path / "o2")
    assert first.path.read_bytes() == second.path.read_bytes()
    with tarfile.open(first.path) as tar:
        assert all(member.isfile() for member in tar.getmembers())
        assert "mytrainer-0.1/mytrainer/conf-link/base.json" in tar.getnames()
        assert "mytrainer-0.1/mytrainer/settings.txt" not in tar.getnames()


def _package_template(tmp_path: Path) -> Path:
    template = tmp_path / "job.yaml"
    template.write_text(
        "display_name: pkg-job\nproject: my-project\nlocation: us-central1\nstaging_bucket: gs://my-bucket/stage\n"
        "machine_type: n1-standard-4\ntrainer:\n  package: mytrainer\n"
    )
    return template


@pytest.mark.parametrize("command", [["render", "--request"], ["local-run", "--plan"]])
@pytest.mark.parametrize("link", ["outside", "loop", "dangling"])
def test_a_bad_link_is_one_error_line_through_the_cli(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: list[str],
    link: str,
) -> None:
    from vertexdist.cli import main

    pkg = _make_package(tmp_path)
    (tmp_path / "passwd").write_text("root:x:0:0\n")
    target = {"outside": str(tmp_path / "passwd"), "loop": "bad.txt", "dangling": "missing.txt"}[link]
    (pkg / "bad.txt").symlink_to(target)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main.run([command[0], str(_package_template(tmp_path)), *command[1:]])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and str(pkg / "bad.txt") in errors[0], err
    assert "internal error" not in err and "Traceback" not in err


def test_the_setuptools_floor_builds_wheels_without_the_wheel_package() -> None:
    # install_package builds the sdist with the environment's setuptools (--no-build-isolation); before
    # 70.1 that needed the separate `wheel` package ("invalid command 'bdist_wheel'"). Checked by hand:
    # 69.5.1 without wheel fails, 70.1.0 and 77.0.3 build it.
    from packaging.requirements import Requirement

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    floors = [
        Requirement(r)
        for r in pyproject["build-system"]["requires"] + pyproject["project"]["dependencies"]
        if r.startswith("setuptools")
    ]
    assert len(floors) == 2
    for requirement in floors:
        assert not requirement.specifier.contains("70.0.0") and requirement.specifier.contains("77.0.3")
    assert isinstance(pyproject["project"]["license"], str)  # an SPDX expression (setuptools >= 77)
