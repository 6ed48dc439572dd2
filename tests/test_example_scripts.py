"""The user code of examples/ is code that runs on Vertex unchanged: it knows nothing of vertexdist (no import
of it, none of its variables such as VERTEXDIST_GCS_ROOT), and it reaches Cloud Storage the way Vertex's own
samples do, through `/gcs/BUCKET/...` (issue 21). The tests that run the examples check what they wrote."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SCRIPTS = sorted(EXAMPLES.rglob("*.py"))
MENTIONS = re.compile(r"vertexdist", re.IGNORECASE)


def test_there_are_example_scripts() -> None:
    assert len(SCRIPTS) >= 9, SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_an_example_script_knows_nothing_of_vertexdist(script: Path) -> None:
    text = script.read_text()
    lines = enumerate(text.splitlines(), 1)
    found = [f"{script}:{n}: {line.strip()}" for n, line in lines if MENTIONS.search(line)]
    assert found == [], "an example that names vertexdist is not code that runs on Vertex unchanged"
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(ast.parse(text))
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")])
    }
    assert not imported & {"vertexdist", "trainer_pkg"}, imported


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_an_example_that_turns_a_gs_uri_into_a_path_uses_the_gcs_mount(script: Path) -> None:
    text = script.read_text()
    if '.replace("gs://"' not in text:
        pytest.skip("turns no gs:// URI into a path (it reads none, or hands it to a gs:// client as it is)")
    assert '"/gcs/"' in text, f"{script} turns gs:// into a path some other way than Vertex's /gcs/ idiom"
