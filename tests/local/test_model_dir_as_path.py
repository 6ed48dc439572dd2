"""A script that takes AIP_MODEL_DIR (a gs:// URI) for a path (issue 36, item 13): it writes into a folder
named `gs:` in its working folder. `validate` warns where the script's text shows it, the local run's
summary names the folder it wrote, and `outputs` on the ended job says it has none, not "nothing yet"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from vertexdist.spec.loader import inspect_file
from vertexdist.spec.script_rules import uri_used_as_path

WRONG = """\
import os
os.makedirs(os.environ["AIP_MODEL_DIR"], exist_ok=True)
with open(os.path.join(os.environ["AIP_MODEL_DIR"], "model.txt"), "w") as handle:
    handle.write("weights")
"""
TEMPLATE = {
    "display_name": "model-dir-as-path",
    "project": "my-project",
    "staging_bucket": "gs://my-bucket/staging",
    "trainer": {"script": "train.py", "launcher": "python"},
    "replica_count": 1,
    "timeout": "60s",
}


def test_the_text_check_finds_a_uri_used_as_a_path_and_passes_over_a_converted_one() -> None:
    assert uri_used_as_path(WRONG) == [(2, "AIP_MODEL_DIR"), (3, "AIP_MODEL_DIR")]
    fine = [
        'root = os.environ["AIP_MODEL_DIR"].replace("gs://", "/gcs/", 1)',
        'torch.save(state, os.path.join(root, "model.pt"))',
        'parser.add_argument("--model-dir", default=os.environ.get("AIP_MODEL_DIR", "models"))',
        '# open(os.environ["AIP_MODEL_DIR"])',
        'writer = SummaryWriter(os.environ["AIP_TENSORBOARD_LOG_DIR"])',
    ]
    assert uri_used_as_path("\n".join(fine)) == []
    assert uri_used_as_path('torch.save(m, os.getenv("AIP_CHECKPOINT_DIR") + "/c.pt")') == [
        (1, "AIP_CHECKPOINT_DIR")
    ]


def _job(folder: Path) -> Path:
    (folder / "train.py").write_text(WRONG)
    template = folder / "job.yaml"
    template.write_text(yaml.safe_dump(TEMPLATE))
    return template


def test_validate_warns_where_the_script_shows_it(tmp_path: Path) -> None:
    template, problems = inspect_file(_job(tmp_path))
    assert template is not None  # a warning, not an error
    [first, _second] = problems
    assert first.severity == "warning" and first.path == "trainer.script"
    assert "train.py:2 uses AIP_MODEL_DIR as a local path" in first.message
    assert first.hint is not None and first.hint.startswith(
        "AIP_MODEL_DIR is a gs:// URI; write under /gcs/... (`/gcs/` + the rest)"
    )


def _cli(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_GCE_CHECK": "true"}
    return subprocess.run(
        [sys.executable, "-m", "vertexdist", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_summary_names_the_gs_folder_and_outputs_says_the_ended_job_has_none(tmp_path: Path) -> None:
    template = _job(tmp_path)
    ran = _cli(tmp_path, "local-run", str(template))
    assert ran.returncode == 0, ran.stderr[-3000:]
    [warning] = [line for line in ran.stdout.splitlines() if line.startswith("warning:")]
    assert "a folder named `gs:`" in warning and "/replicas/" in warning
    assert "AIP_MODEL_DIR is a gs:// URI; write under /gcs/... (`/gcs/` + the rest)" in warning
    [run] = [p for p in (tmp_path / ".vertexdist" / "runs").iterdir() if p.is_dir()]
    shown = _cli(tmp_path, "outputs", run.name)
    assert shown.returncode == 0, shown.stderr
    assert "nothing yet" not in shown.stderr
    assert "(none: the job ended SUCCEEDED without writing any." in shown.stderr
