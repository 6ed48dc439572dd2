"""`submit --managed` refuses what it cannot do with a clear error, before anything is recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from vertexdist.cli import main

HEAD = """\
display_name: demo
project: my-project
location: us-central1
staging_bucket: gs://my-bucket/stage
machine_type: a2-highgpu-1g
accelerator_type: NVIDIA_TESLA_A100
accelerator_count: 1
scheduling_strategy: SPOT
"""


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        main.run(list(args))
    out = capsys.readouterr()
    code = info.value.code
    return (code if isinstance(code, int) else 1), out.out, out.err


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_bad_fallback_entry_is_refused_naming_it_and_nothing_is_recorded(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = here / "job.yaml"
    path.write_text(HEAD + "recovery:\n  fallback:\n    - machine_type: a2-highgpu-8g\n")
    code, out, err = run(capsys, "submit", str(path), "--managed")
    assert code != 0 and "managed:" not in out
    assert "recovery.fallback[0]" in err and "Traceback" not in err
    code, out, _ = run(capsys, "managed", "list")
    assert code == 0 and out.strip() == ""


@pytest.mark.parametrize(
    ("flag", "words"),
    [
        ("--emulator", "vertexdist emulator start"),
        ("--dry-run", "--dry-run"),
        ("--resume-from=x", "managed resume"),
    ],
)
def test_flags_that_do_not_go_with_managed(
    here: Path, capsys: pytest.CaptureFixture[str], flag: str, words: str
) -> None:
    path = here / "job.yaml"
    path.write_text(HEAD)
    code, out, err = run(capsys, "submit", str(path), "--managed", flag)
    assert code != 0
    assert "--managed" in err and words in err and "managed:" not in out
