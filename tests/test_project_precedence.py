"""Where a job's project comes from: --project, then the template's `project:`, then GOOGLE_CLOUD_PROJECT, for
every command that needs one (issue 27, item 4: a template without `project:` was refused even with
`--project my-proj`). validate takes a template without one and says where submit will find it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vertexdist.cli import main
from vertexdist.errors import VertexdistError

NO_PROJECT = (
    "display_name: noproject\n"
    "staging_bucket: gs://my-bucket/staging\n"
    "container_uri: us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest\n"
)
WITH_PROJECT = NO_PROJECT + "project: template-proj\n"
TUNING = (
    "tuning:\n  metric_spec: {acc: maximize}\n"
    "  parameter_spec:\n    lr: {type: double, min: 0.01, max: 0.1}\n"
    "  max_trial_count: 2\n  parallel_trial_count: 1\n"
)


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    monkeypatch.delenv("VERTEX_API_ENDPOINT", raising=False)
    monkeypatch.chdir(tmp_path)
    main._register()
    runner = CliRunner()

    def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
        result = runner.invoke(main.app, list(args), env=env, prog_name="vertexdist")
        if isinstance(result.exception, VertexdistError):  # what main.run reports and exits with
            error = result.exception
            return (
                error.exit_code,
                result.stdout,
                f"{result.stderr}error: {error.message}\nhint: {error.hint}",
            )
        return result.exit_code, result.stdout, result.stderr

    return run


def _template(tmp_path: Path, text: str, name: str = "job.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _parent(out: str) -> str:
    return str(json.loads(out)["parent"])


@pytest.mark.parametrize("tuning", [False, True], ids=["job", "tuning"])
def test_flag_then_template_then_environment(cli, tmp_path: Path, tuning: bool) -> None:  # type: ignore[no-untyped-def]
    extra = TUNING if tuning else ""
    bare = _template(tmp_path, NO_PROJECT + extra, "noproject.yaml")
    named = _template(tmp_path, WITH_PROJECT + extra, "named.yaml")
    env = {"GOOGLE_CLOUD_PROJECT": "env-proj"}
    for command in (("submit", "--dry-run"), ("render", "--request", "--format", "json")):
        verb, *flags = command
        code, out, err = cli(verb, bare, *flags, "--project", "my-proj")
        assert code == 0, err
        assert _parent(out) == "projects/my-proj/locations/us-central1"
        code, out, err = cli(verb, bare, *flags, env=env)
        assert code == 0, err
        assert _parent(out).startswith("projects/env-proj/")
        code, out, _ = cli(verb, named, *flags, env=env)
        assert _parent(out).startswith("projects/template-proj/")
        code, out, _ = cli(verb, named, *flags, "--project", "my-proj", env=env)
        assert _parent(out).startswith("projects/my-proj/")


def test_no_project_anywhere_says_where_to_give_one(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bare = _template(tmp_path, NO_PROJECT)
    for command in (("submit", "--dry-run"), ("render", "--request")):
        code, _, err = cli(command[0], bare, *command[1:])
        assert code == 2, err
        assert "no Google Cloud project given" in err
        assert "--project" in err and "GOOGLE_CLOUD_PROJECT" in err and "project:" in err


def test_a_bad_project_flag_is_refused_like_a_bad_template_project(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code, _, err = cli("submit", _template(tmp_path, NO_PROJECT), "--dry-run", "--project", "Not_A_Project")
    assert code == 2 and "'Not_A_Project' is not a project id" in err


def test_validate_estimate_and_render_take_a_template_without_a_project(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bare = _template(tmp_path, NO_PROJECT + "replica_count: 2\nrestart_job_on_worker_restart: true\n")
    code, out, err = cli("validate", bare)
    assert code == 0, out + err
    assert "project: note: no `project:`; submit takes it from --project, then GOOGLE_CLOUD_PROJECT" in out
    assert "0 errors, 0 warnings, 1 note" in out
    code, out, err = cli("estimate", bare)
    assert code == 0, err
    code, out, err = cli("render", bare)
    assert code == 0, err


def test_the_emulator_and_local_runs_need_no_project(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bare = _template(tmp_path, NO_PROJECT)
    code, out, err = cli("submit", bare, "--emulator", "--dry-run")
    assert code == 0, err
    assert _parent(out) == "projects/vertexdist-local/locations/us-central1"
    code, out, err = cli("local-run", bare, "--plan")
    assert code == 0, err
    assert "CLOUD_ML_PROJECT_ID=vertexdist-local" in out or '"vertexdist-local"' in out
    code, out, err = cli("local-run", bare, "--plan", env={"GOOGLE_CLOUD_PROJECT": "env-proj"})
    assert code == 0 and "vertexdist-local" not in out and "env-proj" in out
