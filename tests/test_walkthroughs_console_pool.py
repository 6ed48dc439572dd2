"""The walk-throughs of the console's and the pool's pages, run as written against one started emulator.

A `console` block after `<!-- walkthrough-emulator: NAME [slow] -->` on one of PAGES runs as
`tests/test_walkthroughs.py` runs a `console` block (its helpers, reused: each `$ ` line in one bash session,
each shown output line checked in order), in one working folder shared by these pages, whose
`.vertexdist/emulator` one `vertexdist emulator start` serves for the module (started as the page says: "in
another shell of this folder"), so the `--emulator` commands and plain `vertexdist ui` find it. Neither
VERTEX_API_ENDPOINT nor STORAGE_EMULATOR_HOST is set.

`vertexdist ui` serves until stopped: here it is started on a free port, its lines are printed as they would
be on the port asked for (`--port`, default 8686), one page is fetched (with the token, beyond loopback), and
it is stopped (`python tests/test_walkthroughs_console_pool.py ui-once ARGS`).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve()


def _ui_once(args: list[str]) -> int:
    """`vertexdist ui ARGS` until it serves, its lines as on the asked port, one page fetched; exit 0 when
    the page answered 200."""
    import http.cookiejar
    import urllib.request

    asked = "8686"
    if "--port" in args:
        at = args.index("--port")
        asked = args[at + 1]
        args = args[:at] + args[at + 2 :]
    process = subprocess.Popen(
        [sys.executable, "-m", "vertexdist", "ui", *args, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    url = None
    try:
        for line in process.stdout:
            found = re.match(r"vertexdist console: (http://(.+):(\d+)/\S*)", line)
            if found:
                url = found.group(1).replace("://0.0.0.0:", "://127.0.0.1:")
                line = line.replace(f":{found.group(3)}/", f":{asked}/", 1)
            print(line, end="", flush=True)
            if line.startswith("Ctrl-C stops it"):
                break
        if url is None:
            print(f"ui-once: vertexdist ui printed no URL (exit {process.poll()})")
            return 1
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        with opener.open(url, timeout=30) as answer:  # the token (if any) moves into a cookie on the way
            status = answer.status
        if status != 200:
            print(f"ui-once: {url} answered {status}")
            return 1
        return 0
    finally:
        process.terminate()
        process.wait(15)


if __name__ == "__main__" and sys.argv[1:2] == ["ui-once"]:
    sys.exit(_ui_once(sys.argv[2:]))

import pytest  # noqa: E402

# The helpers and fixtures of tests/test_walkthroughs.py (not importable by name in importlib mode).
_spec = importlib.util.spec_from_file_location("walkthrough_helpers", HERE.with_name("test_walkthroughs.py"))
assert _spec is not None and _spec.loader is not None
walk = sys.modules.setdefault(_spec.name, importlib.util.module_from_spec(_spec))
if not hasattr(walk, "REPO"):
    _spec.loader.exec_module(walk)
folders, emulators = walk.folders, walk.emulators  # its module-scoped fixtures, here too

PAGES = [walk.REPO / "docs" / "guide" / "console.md", walk.REPO / "docs" / "commands" / "ui.md",
         walk.REPO / "docs" / "commands" / "pool.md"]  # fmt: skip
MARKER = re.compile(r"^<!-- walkthrough-emulator: ([\w-]+)((?: slow)?) -->$")  # slow: as in test_walkthroughs
SHARED = walk.REPO / "docs"  # the key of the one working folder these pages share


def emulator_walkthroughs() -> list[walk.Block]:
    found = []
    for page in PAGES:
        lines = page.read_text().splitlines()
        for block in walk.blocks(page):
            marker = MARKER.match(lines[block.line - 2]) if block.line >= 2 else None
            if marker:
                options = frozenset(marker.group(2).split())
                found.append(dataclasses.replace(block, name=marker.group(1), options=options))
    return found


def _with_ui_once(block: walk.Block) -> walk.Block:
    """The block with each `$ vertexdist ui ...` line run by `_ui_once` (the shown lines unchanged)."""
    prefix = f"$ {sys.executable} {HERE} ui-once"
    body = tuple(prefix + line[len("$ vertexdist ui") :] if line.startswith("$ vertexdist ui") else line
                 for line in block.body)  # fmt: skip
    return dataclasses.replace(block, body=body)


def test_every_page_has_its_walkthrough() -> None:
    pages = {block.page for block in emulator_walkthroughs()}
    assert pages == set(PAGES)
    assert all(block.lang == "console" for block in emulator_walkthroughs())


@pytest.mark.integration
@pytest.mark.timeout(300)
@pytest.mark.parametrize("block", [walk._param(b) for b in emulator_walkthroughs()])
def test_the_walkthrough_runs_as_written_against_a_started_emulator(
    block: walk.Block,
    folders: dict[Path, Path],
    emulators: dict[str, object],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    cwd = walk._folder(folders, SHARED, tmp_path_factory)
    walk._emulator(emulators, cwd / ".vertexdist" / "emulator")
    walk._run_console(_with_ui_once(block), cwd)
