"""Issue 41, part 6: terminal escapes in job data (replica names, `where`, record paths, run params, model
names) reached the terminal raw from `ranks`, `describe`, `experiments runs` and `models list`, and piped
`logs` stripped colours but not every OSC sequence (window title, clipboard). Pure: the views' text."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from vertexdist.cli.plain_text import cell, plain, terminal_line

TITLE = "\x1b]0;owned\x07"  # sets the window title
CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x1b\\"  # writes the clipboard
OSC_8BIT = "\x9d0;owned\x9c"
CSI_8BIT = "\x9b2J"
CLEAR = "\x1b[2J\x1b[H"
HOSTILE = f"a{TITLE}b{CLIPBOARD}c{OSC_8BIT}d{CSI_8BIT}e{CLEAR}\x1b[31mf\x1b[0m\x07\x08\u202eg\x1bc"


def _clean(text: str) -> bool:
    return not any((ord(c) < 0x20 and c not in "\n") or 0x7F <= ord(c) <= 0x9F or c == "\u202e" for c in text)


def test_a_cell_has_no_escape_nor_control_character() -> None:
    assert cell(HOSTILE) == "abcdefg"
    assert cell("two\nlines\tand a tab") == "two lines and a tab"
    assert cell(42) == "42"


def test_piped_log_lines_lose_osc_in_every_form_and_a_terminal_keeps_only_colours() -> None:
    assert plain(HOSTILE) == "abcdefg"
    assert plain("progress 10%\rprogress 90%") == "progress 90%"
    assert terminal_line(HOSTILE) == "abcde\x1b[31mf\x1b[0mg"
    assert terminal_line("bar 10%\rbar 90%\t!") == "bar 10%\rbar 90%\t!"
    assert terminal_line("unterminated \x1b]0;title and more") == "unterminated "


def test_the_ranks_table_and_its_stacks_print_no_escapes(capsys: pytest.CaptureFixture[str]) -> None:
    from vertexdist.cli.ranks import _print_stacks, table

    row = {
        "rank": 0,
        "replica": f"workerpool0-0{TITLE}",
        "local_rank": 0,
        "step": 3,
        "steps_per_s": None,
        "own_step_s": None,
        "wait_share": None,
        "last_progress_s": None,
        "state": "computing",
        "where": f"train.py:3{CLIPBOARD}",
        "straggler": False,
        "slowdown": None,
    }
    text = table({"ranks": [row], "verdict": f"hung: rank 0{CLEAR}"})
    assert _clean(text) and "workerpool0-0" in text and "train.py:3" in text
    _print_stacks({0: f"rank 0\n  File {TITLE}x\n"}, [], live=False, as_json=False)
    assert _clean(capsys.readouterr().out)


def test_describe_models_and_experiments_print_no_escapes() -> None:
    from vertexdist.cli.experiments_view import table
    from vertexdist.cli.models_view import model_lines, model_table, version_table
    from vertexdist.cli.record_view import record_lines

    record: dict[str, Any] = {
        "job": f"projects/p/locations/l/trainingPipelines/1{TITLE}",
        "template": {"path": f"/home/me/job.yaml{CLIPBOARD}", "text": "x"},
        "package": {"uri": f"gs://b/p{CSI_8BIT}", "sha256": "0" * 64, "size": 1},
        "code": {"folder": f"/x{OSC_8BIT}", "commit": None},
        "attempts": [f"a{CLEAR}"],
    }
    model = {
        "name": "projects/p/locations/l/models/1",
        "displayName": f"model{TITLE}",
        "versionId": "1",
        "versionAliases": [f"default{CLEAR}"],
        "labels": {"k": f"v{CLIPBOARD}"},
        "description": f"d{OSC_8BIT}",
    }
    runs = [{"run_name": f"run{TITLE}", "state": "COMPLETE", "params": {f"lr{CLEAR}": f"0.1{CLIPBOARD}"}}]
    lines = [
        *record_lines(record),
        *model_table([model]),
        *version_table([model]),
        *model_lines(model),
        *table(runs),
    ]
    assert all(_clean(line) for line in lines), [line for line in lines if not _clean(line)]
    assert any("model" in line for line in lines) and any("lr" in line for line in lines)


@pytest.mark.parametrize("tty", [True, False])
def test_logs_keep_colours_only_on_a_terminal_and_never_osc(
    tty: bool, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from vertexdist.backends.base import JobStatus, LogChunk
    from vertexdist.cli.job_view import print_chunk

    monkeypatch.setattr(sys.stdout, "isatty", lambda: tty)
    status = JobStatus(name="j", display_name="j", state="RUNNING")
    print_chunk(
        LogChunk(replica=f"workerpool0-0{TITLE}", text=f"\x1b[32mok\x1b[0m {CLIPBOARD}{OSC_8BIT}"),
        status,
        as_json=False,
    )
    out = capsys.readouterr().out
    assert "]52;" not in out and "]0;" not in out and "\x9d" not in out
    assert ("\x1b[32m" in out) is tty
