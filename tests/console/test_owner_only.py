"""Only the user who started the console reads it (issue 35): another local user's connection to uvicorn's
loopback console is closed as it is accepted (issue 41; `app.OwnerOnly`'s 403 stands behind it), the
console's own user (and the browser it opens) still gets the page."""

from __future__ import annotations

import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")

from vertexdist.console.app import build_app
from vertexdist.console.jobs import Console

pytestmark = [pytest.mark.integration]

GET = (
    "import http.client, sys, urllib.request, urllib.error\n"
    "try:\n"
    "    print(urllib.request.urlopen(sys.argv[1], timeout=20).status)\n"
    "except urllib.error.HTTPError as error:\n"
    "    print(error.code, error.read().decode().strip())\n"
    "except (ConnectionError, http.client.RemoteDisconnected, urllib.error.URLError) as error:\n"
    "    print('closed', type(error).__name__)\n"
)


def test_another_user_gets_403_from_the_console(tmp_path: Path, kit: Any, nobody: Any) -> None:
    (tmp_path / "runs").mkdir()
    console = Console(tmp_path / "runs", cache_dir=tmp_path / "cache")
    with kit.serving(build_app(console, allowed_hosts=["127.0.0.1", "localhost"])) as base:
        with urllib.request.urlopen(f"{base}/api/jobs", timeout=20) as mine:
            assert mine.status == 200
        theirs = subprocess.run(
            nobody.argv(nobody.python, "-c", GET, f"{base}/api/jobs"),
            env=nobody.env(),
            cwd="/",
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert theirs.returncode == 0, theirs.stderr
    # Closed as it is accepted (issue 41, part 7): no answer, not a byte of the request read.
    assert theirs.stdout.startswith("closed"), theirs.stdout
