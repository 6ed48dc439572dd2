"""The guides' own templates work as their next step says (issue 42, item 13: the template of
docs/guide/registered-model.md had no `project:`, so its `render --request` step failed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vertexdist.cli import main

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _first_template(page: Path) -> str:
    blocks = re.findall(r"```yaml\n(.*?)```", page.read_text(), flags=re.S)
    return next(b for b in blocks if "display_name:" in b and "staging_bucket:" in b)


def test_the_registered_model_guides_template_renders_its_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.yaml").write_text(_first_template(DOCS / "guide" / "registered-model.md"))
    (tmp_path / "train.py").write_text("import os\nprint(os.environ['AIP_MODEL_DIR'])\n")
    with pytest.raises(SystemExit) as ended:
        main.run(["render", "job.yaml", "--request"])
    out, err = capsys.readouterr()
    assert ended.value.code in (0, None), err
    assert "modelToUpload:" in out
