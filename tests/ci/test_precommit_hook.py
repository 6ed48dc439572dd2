"""The `vertexdist-validate` pre-commit hook (`.pre-commit-hooks.yaml`), run through pre-commit itself.

A temporary project repository with a good and a bad template uses this repository as its hook repository,
as a user's `.pre-commit-config.yaml` would. pre-commit builds the hook's environment from the repository
(`pip install .`) once per session; that is the slow part (less so without pip's byte-compiling).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PRE_COMMIT = Path(sys.executable).with_name("pre-commit")
GOOD = (REPO / "job_templates" / "cpu-small.yaml").read_text()
BAD = GOOD.replace("machine_type: n1-standard-4", "machine_type: n1-standrd-4")

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.email=ci@vertexdist.dev", "-c", "user.name=ci", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """This working tree's tracked files as one commit of a repository of their own (what a tag would be)."""
    root = tmp_path_factory.mktemp("hook-repo")
    for rel in _git(REPO, "ls-files").splitlines():
        source = REPO / rel
        if source.is_file():
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "snapshot")
    return root, _git(root, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture
def project(tmp_path: Path, hook_repo: tuple[Path, str]) -> Iterator[Path]:
    _git(tmp_path, "init", "-q")
    (tmp_path / "job_templates").mkdir()
    (tmp_path / "job_templates" / "good.yaml").write_text(GOOD)
    (tmp_path / "job_templates" / "bad.yaml").write_text(BAD)
    (tmp_path / "notes.yaml").write_text(BAD)  # outside job_templates/: not a template by default
    yield tmp_path


def _config(project: Path, hook_repo: tuple[Path, str], **hook: object) -> None:
    path, rev = hook_repo
    config = {"repos": [{"repo": str(path), "rev": rev, "hooks": [{"id": "vertexdist-validate", **hook}]}]}
    (project / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    _git(project, "add", "-A")


def _run(project: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # PIP_COMPILE=0 (pip --no-compile): pip byte-compiles every file it installs by default, which was most
    # of the hook environment's install (google-cloud-aiplatform alone: 86 s with, 8 s without, on 2 busy
    # cores); the hook imports a few of them, compiled as they are imported. What is installed is the same.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "PRE_COMMIT_HOME": str(home), "PIP_COMPILE": "0"}
    return subprocess.run(
        [str(PRE_COMMIT), "run", *args], cwd=project, capture_output=True, text=True, env=env, timeout=900
    )


def test_the_hook_fails_on_a_bad_template_and_names_its_line(
    project: Path, hook_repo: tuple[Path, str], pre_commit_home: Path
) -> None:
    _config(project, hook_repo)
    result = _run(project, pre_commit_home, "--all-files")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "vertexdist validate" in result.stdout and "Failed" in result.stdout
    assert "job_templates/bad.yaml:" in result.stdout and "n1-standrd-4" in result.stdout
    assert "notes.yaml" not in result.stdout  # only files under job_templates/ are templates


def test_the_hook_passes_good_templates(
    project: Path, hook_repo: tuple[Path, str], pre_commit_home: Path
) -> None:
    _config(project, hook_repo)
    result = _run(project, pre_commit_home, "--files", "job_templates/good.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Passed" in result.stdout


def test_where_templates_live_is_configurable(
    project: Path, hook_repo: tuple[Path, str], pre_commit_home: Path
) -> None:
    (project / "job_templates" / "bad.yaml").unlink()
    _config(project, hook_repo, files=r"^(job_templates/.*|notes)\.ya?ml$")
    result = _run(project, pre_commit_home, "--all-files")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "notes.yaml:" in result.stdout
