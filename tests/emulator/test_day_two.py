"""Back to a job after `submit --emulator` (issue 27, item 6): every job command takes `--emulator` (the
emulator over .vertexdist/emulator: the one `emulator start` runs there, else one for the command), finds a
bare id there without `--project`, and every command a hint prints works as printed."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from vertexdist.emulator import Emulator

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]

TRIAL_SCRIPT = Path(__file__).parents[1] / "tuning" / "objective_trial.py"
Cli = Callable[..., tuple[int, str, str]]


def commands_in(text: str) -> list[str]:
    """Every `vertexdist ...` command a message names (up to the end of its line, a `;` or a `)`)."""
    found = re.findall(r"vertexdist (?:[^\s;,)`]+ ?)+", text)
    return [c.strip() for c in found if not c.startswith("vertexdist-")]


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """A user with neither a project nor an endpoint set: all the emulator needs is the local folder."""
    for name in (
        "VERTEX_API_ENDPOINT",
        "STORAGE_EMULATOR_HOST",
        "GOOGLE_CLOUD_PROJECT",
        "GOOGLE_CLOUD_REGION",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def submitted(offline: None, cli: Cli, write_template: Any) -> tuple[str, str]:
    code, out, err = cli("submit", str(write_template(name="day-two-job")), "--emulator")
    assert code == 0, err
    return out.splitlines()[0], err


def _runs(cli: Cli, command: str) -> tuple[int, str, str]:
    args = command.split()[1:]
    args = ["/tmp/day-two-download" if a == "DIR" else a for a in args]
    return cli(*args)


def test_every_command_submit_printed_works(submitted: tuple[str, str], cli: Cli) -> None:
    name, err = submitted
    commands = commands_in(err)
    assert f"vertexdist status {name} --emulator" in commands
    assert f"vertexdist logs {name} --emulator" in commands
    for command in commands:
        code, out, err = _runs(cli, command)
        assert code == 0, (command, err)
        assert out or err, command  # each says something: a download of no files says so
    shutil.rmtree("/tmp/day-two-download", ignore_errors=True)


def test_a_bare_id_needs_no_project_against_the_emulator(submitted: tuple[str, str], cli: Cli) -> None:
    name, _ = submitted
    bare = name.rsplit("/", 1)[1]
    code, out, err = cli("status", bare, "--emulator")
    assert code == 0, err
    assert out.startswith(f"{name}\n") and "state:        SUCCEEDED" in out
    assert out.count("outputs:") == 1
    code, out, err = cli("logs", bare, "--emulator")
    assert code == 0 and "hello from day-two-job" in out, err
    code, out, err = cli("outputs", bare, "--emulator")
    assert code == 0, err


def test_list_takes_the_emulator_and_has_a_header(submitted: tuple[str, str], cli: Cli) -> None:
    name, _ = submitted
    code, out, err = cli("list", "--emulator")
    assert code == 0, err
    header, *rows = out.splitlines()
    assert header.split() == ["STATE", "CREATED", "DISPLAY", "NAME", "NAME"]
    assert any(row.endswith(name) and row.startswith("SUCCEEDED") for row in rows)


def test_status_and_logs_hints_of_an_emulator_job_say_emulator(submitted: tuple[str, str], cli: Cli) -> None:
    name, _ = submitted
    _, out, _ = cli("status", name, "--emulator")
    assert len(commands_in(out)) == 2, out  # its outputs' and its logs'
    for command in commands_in(out):
        assert command.endswith("--emulator") or "--emulator " in command, command
        ran = _runs(cli, command)
        assert ran[0] == 0, (command, ran[2])
    shutil.rmtree("/tmp/day-two-download", ignore_errors=True)


def test_without_a_project_the_hints_are_commands_that_work(offline: None, cli: Cli) -> None:
    for args in (("trials", "123"), ("status", "123"), ("list",)):
        code, _, err = cli(*args)
        assert code == 2 and "no Google Cloud project given" in err, err
        hint = next(line for line in err.splitlines() if line.startswith("hint:"))
        assert "template" not in hint, hint
        assert "--emulator" in hint and "--project" in hint
    # ... and the option it names is there: the emulator's folder has no job 123, and says so.
    code, _, err = cli("trials", "123", "--emulator")
    assert code == 1 and "no job 123 in the emulator's folder" in err, err  # not there: 1, as a 404
    assert "hint: its jobs: vertexdist list --emulator" in err
    code, _, err = cli("list", "--emulator")
    assert code == 0 and "no jobs in the emulator's folder" in err


def test_a_tuning_job_names_vertexdist_trials(offline: None, cli: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "tune"
    folder.mkdir()
    shutil.copy(TRIAL_SCRIPT, folder / "trial.py")
    (folder / "job.yaml").write_text(
        "display_name: day-two-tune\nproject: test-proj\nstaging_bucket: gs://test-bucket/staging\n"
        "container_uri: us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest\n"
        "trainer: {script: trial.py, args: ['--steps=1']}\n"
        "tuning:\n  metric_spec: {score: maximize}\n"
        "  parameter_spec: {x: {type: double, min: 0.0, max: 1.0}}\n"
        "  max_trial_count: 2\n  parallel_trial_count: 2\n"
    )
    code, out, err = cli("submit", str(folder / "job.yaml"), "--emulator")
    assert code == 0, err
    name = out.splitlines()[0]
    assert f"vertexdist trials {name} --emulator" in commands_in(err)
    code, out, err = cli("trials", name.rsplit("/", 1)[1], "--emulator")
    assert code == 0, err
    assert out.splitlines()[0] == f"{name}  SUCCEEDED  2 trials"


@pytest.fixture
def serving(
    offline: None, write_template: Any, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Emulator, str]]:
    """`vertexdist emulator start` over the folder (here, in this process), with a job in it."""
    data = Path(".vertexdist/emulator").resolve()
    with Emulator(data_dir=data) as emu:
        with monkeypatch.context() as env:
            env.setenv("STORAGE_EMULATOR_HOST", emu.storage_endpoint)
            code, out, err = cli(
                "submit", str(write_template(name="served")), "--endpoint", emu.vertex_endpoint, "--detach"
            )
        assert code == 0, err
        yield emu, out.splitlines()[0]


def test_the_emulator_serving_the_folder_answers(serving: tuple[Emulator, str], cli: Cli) -> None:
    # A second emulator cannot open the folder while this one serves it: --emulator must find this one.
    _, name = serving
    code, out, err = cli("status", name.rsplit("/", 1)[1], "--emulator")
    assert code in (0, 1), err
    assert out.startswith(name)
    code, out, err = cli("list", "--emulator")
    assert code == 0 and name in out, err
