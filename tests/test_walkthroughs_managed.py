"""The managed-job pages' walk-throughs (docs/guide/managed-jobs.md, docs/commands/managed.md), run as written
against one `vertexdist emulator start` shared by them all, its two variables exported as the pages say.

The blocks, their rules and the working folder per page are tests/test_walkthroughs.py's; a `console` block
marked `emulator` is run here, not there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_walkthroughs import (  # noqa: F401  (the fixtures: one folder per page, one emulator)
    REPO,
    Block,
    _emulator,
    _env,
    _folder,
    _param,
    _run_console,
    _run_script,
    blocks,
    done,
    emulators,
    folders,
    runs_elsewhere,
)

PAGES = (REPO / "docs" / "guide" / "managed-jobs.md", REPO / "docs" / "commands" / "managed.md")


def managed_walkthroughs() -> list[Block]:
    return [block for page in PAGES for block in blocks(page) if block.name]


def test_each_managed_page_has_a_walkthrough_on_the_emulator() -> None:
    pages = {block.page for block in managed_walkthroughs() if runs_elsewhere(block)}
    assert pages == set(PAGES)


@pytest.mark.integration
@pytest.mark.parametrize("block", [_param(b) for b in managed_walkthroughs() if runs_elsewhere(b)])
def test_the_managed_walkthrough_runs_as_written_on_the_emulator(
    block: Block,
    folders: dict[Path, Path],  # noqa: F811
    done: set[tuple[Path, int]],  # noqa: F811
    emulators: dict[str, object],  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    cwd = _folder(folders, block.page, tmp_path_factory)
    for earlier in managed_walkthroughs():  # the page's set-up scripts before this block, once
        setup = earlier.page == block.page and earlier.line < block.line and earlier.lang == "bash"
        if setup and (earlier.page, earlier.line) not in done:
            _run_script(earlier, cwd, _env(), ["bash", "-e"])
            done.add((earlier.page, earlier.line))
    emulator = _emulator(emulators, tmp_path_factory.mktemp("emulator-data"))  # type: ignore[arg-type]
    _run_console(block, cwd, emulator.env)
