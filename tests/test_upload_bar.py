"""`submit` draws its upload bar only once bytes go up: a package already in the bucket gets none (issue 42,
item 13: a bar was drawn for a package that was then not uploaded)."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from vertexdist.cli import submit_view


class _Submission:
    def __init__(self, path: Path) -> None:
        self.package_path = path


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    screen = io.StringIO()
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(submit_view, "_bar_console", lambda: Console(file=screen, force_terminal=True))
    return screen


def test_no_bar_when_nothing_is_uploaded(tmp_path: Path, terminal: io.StringIO) -> None:
    package = tmp_path / "p.tar.gz"
    package.write_bytes(b"x" * 1000)
    submission: Any = _Submission(package)
    with submit_view._upload_bar(submission) as progress:
        assert progress is not None
    assert "uploading" not in terminal.getvalue()
    with submit_view._upload_bar(submission) as progress:
        assert progress is not None
        progress(500, 1000)
    assert "uploading p.tar.gz" in terminal.getvalue()
