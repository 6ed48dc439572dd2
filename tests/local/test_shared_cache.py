"""A shared folder whose `.vertexdist/cache` another user made first (root's, 0755): `local-run` by an
ordinary user names that folder and its owner, and installs the package into a cache of its own instead."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from vertexdist.user_cache import usable_cache_dir

TEMPLATE = """\
display_name: shared-cache
project: my-project
location: us-central1
staging_bucket: gs://my-bucket/staging
machine_type: n1-standard-4
trainer:
  script: train.py
"""


@pytest.mark.integration
def test_another_users_cache_is_named_and_this_users_own_is_used(nobody: Any) -> None:
    shared = nobody.base / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # everyone's folder
    (shared / ".vertexdist").mkdir(mode=0o777)
    (shared / ".vertexdist").chmod(0o777)
    (shared / ".vertexdist" / "cache").mkdir(mode=0o755)  # root's, made by root's first run
    (shared / "train.py").write_text("print('trained here')\n")
    (shared / "job.yaml").write_text(TEMPLATE)
    result = subprocess.run(
        nobody.argv(nobody.python, "-m", "vertexdist", "local-run", "job.yaml"),
        env=nobody.env(),
        cwd=shared,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    cache = shared / ".vertexdist" / "cache"
    assert f"{cache} belongs to root" in result.stderr, result.stderr
    own = nobody.home / ".cache" / "vertexdist"
    assert f"using your own cache {own / 'packages'}" in result.stderr
    assert stat.S_IMODE(os.stat(own).st_mode) == 0o700
    assert any((own / "packages").iterdir())  # the package went there
    assert list(cache.iterdir()) == []  # root's, untouched
    assert "may still be running" not in result.stderr


def test_a_writable_cache_is_used_as_it_is(tmp_path: Path) -> None:
    found = usable_cache_dir(tmp_path / ".vertexdist" / "cache" / "packages", env={"HOME": str(tmp_path)})
    assert found.path == tmp_path / ".vertexdist" / "cache" / "packages" and found.note is None
    assert found.path.is_dir()


def test_a_job_that_failed_before_it_was_recorded_still_has_its_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The install failed at once, so the job ended before `schedule` recorded it: its summary says FAILED
    (never "no summary ... it may still be running")."""
    import vertexdist.local.launch as launch
    from vertexdist.jobs.local_run import LocalRunRequest, start_local
    from vertexdist.spec import load_template

    def install(_sdist: Path, _cache: Path) -> Path:
        raise PermissionError(13, "Permission denied", str(_cache))

    real = launch.schedule

    def schedule_then_end(*args: Any, **kwargs: Any) -> Any:
        job = real(*args, install=install, **kwargs)
        job.wait(30)  # it ends before the backend records it
        return job

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(launch, "schedule", schedule_then_end)
    (tmp_path / "train.py").write_text("print('never')\n")
    (tmp_path / "job.yaml").write_text(TEMPLATE)
    run = start_local(LocalRunRequest(load_template(tmp_path / "job.yaml")))
    summary = run.summary()
    assert summary["state"].endswith("FAILED") and "Permission denied" in str(summary["error"])
