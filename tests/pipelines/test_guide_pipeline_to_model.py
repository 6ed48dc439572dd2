"""The guide "From a pipeline to a registered model" (docs/guide/pipeline-to-model.md), run as written against
one `vertexdist emulator start`, its two variables exported as the page says.

The blocks, their rules and the working folder are tests/test_walkthroughs.py's; its `console` block marked
`emulator` is run here, not there.
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

pytest.importorskip("kfp")
PAGE = REPO / "docs" / "guide" / "pipeline-to-model.md"


def guide_walkthroughs() -> list[Block]:
    return [block for block in blocks(PAGE) if block.name]


@pytest.mark.integration
@pytest.mark.parametrize("block", [_param(b) for b in guide_walkthroughs() if runs_elsewhere(b)])
def test_the_pipeline_guide_runs_as_written_on_the_emulator(
    block: Block,
    folders: dict[Path, Path],  # noqa: F811
    done: set[tuple[Path, int]],  # noqa: F811
    emulators: dict[str, object],  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    cwd = _folder(folders, block.page, tmp_path_factory)
    for earlier in guide_walkthroughs():  # the page's set-up script before this block, once
        if earlier.line < block.line and earlier.lang == "bash" and (earlier.page, earlier.line) not in done:
            _run_script(earlier, cwd, _env(), ["bash", "-e"])
            done.add((earlier.page, earlier.line))
    emulator = _emulator(emulators, tmp_path_factory.mktemp("emulator-data"))  # type: ignore[arg-type]
    _run_console(block, cwd, emulator.env)
