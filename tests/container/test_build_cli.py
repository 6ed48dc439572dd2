"""`vertexdist build`: --dry-run output, exit codes and messages."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from vertexdist.cli import main
from vertexdist.container.cloudbuild import validate_request


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main.run([*args])
        raise SystemExit(0)
    out, err = capsys.readouterr()
    code = info.value.code
    return (code if isinstance(code, int) else 1), out, err


def test_dry_run_prints_files_hash_and_the_build_request(
    built_template: Callable[..., Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = built_template()
    (tmp_path / "ctx/.env").write_text("TOKEN=secret\n")
    code, out, _ = run_cli(capsys, "build", str(path), "--dry-run", "--json")
    assert code == 0
    report = json.loads(out)
    assert [f["path"] for f in report["files"]] == ["Dockerfile", "app/__init__.py", "app/task.py"]
    assert {"path": ".env", "reason": "always excluded (secret)"} in report["excluded"]
    digest = report["content_hash"].removeprefix("sha256:")
    assert report["image"].endswith(":ctx-" + digest[:20])
    assert validate_request(report["request"]).build.substitutions["_TAG"] == "ctx-" + digest[:20]


def test_dry_run_text_and_local(
    built_template: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(built_template())
    code, out, _ = run_cli(capsys, "build", path, "--dry-run")
    assert code == 0
    assert "files (3, " in out and "content hash: sha256:" in out and '"projectId": "vertexdist-demo"' in out
    code, out, _ = run_cli(capsys, "build", path, "--dry-run", "--local")
    assert code == 0
    assert (
        "docker build --file Dockerfile --tag us-central1-docker.pkg.dev/" in out and "projectId" not in out
    )


def test_dry_run_twice_prints_the_same(
    built_template: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(built_template())
    first = run_cli(capsys, "build", path, "--dry-run", "--json")
    assert run_cli(capsys, "build", path, "--dry-run", "--json") == first


def test_oversized_context_fails_naming_the_largest_file(
    built_template: Callable[..., Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = built_template()
    (tmp_path / "ctx/data.bin").write_bytes(b"\x00" * 200_000)
    code, _, err = run_cli(capsys, "build", str(path), "--dry-run", "--max-context-size", "100K")
    assert code == 1
    assert err.startswith("error: the build context")
    assert "data.bin (195.3 KiB)" in err and "hint: " in err and "Traceback" not in err


def test_template_without_build_is_a_usage_error(
    built_template: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = built_template()
    text = path.read_text()
    path.write_text(text[: text.index("build:")])
    code, _, err = run_cli(capsys, "build", str(path), "--dry-run")
    assert code == 2
    assert "no `build` section" in err


def test_local_without_daemon_exits_1_with_a_hint(
    built_template: Callable[..., Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    code, out, err = run_cli(capsys, "build", str(built_template()), "--local")
    assert code == 1
    assert "error: no Docker daemon answers" in err and "drop --local" in err
    assert out == ""
