"""One way into a local run (`backends.local.prepare.prepare_run`) for template jobs and tuning jobs: the
same job id scheme, run folder, gs:// namespace and replica context, whatever the template's kind."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from vertexdist.backends.base import SubmitOptions
from vertexdist.backends.local import LocalBackend, LocalOptions
from vertexdist.backends.local.prepare import DEFAULT_OUTPUT_BUCKET, is_job_id
from vertexdist.backends.local.trials import trial_context
from vertexdist.errors import UsageError
from vertexdist.spec import load_template
from vertexdist.spec.models import JobTemplate

TUNING = {
    "metric_spec": {"score": "maximize"},
    "parameter_spec": {"x": {"type": "double", "min": 0.0, "max": 1.0}},
    "max_trial_count": 2,
    "parallel_trial_count": 1,
}


def _template(folder: Path, *, tuning: bool, launcher: str | None = None) -> JobTemplate:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.py").write_text("print('hello')\n")
    data: dict[str, object] = {
        "display_name": "same-run",
        "project": "my-project",
        "location": "europe-west4",
        "staging_bucket": "gs://my-bucket/staging",
        "container_uri": "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest",
        "machine_type": "n1-standard-4",
        "trainer": {"script": "train.py", **({"launcher": launcher} if launcher else {})},
    }
    if tuning:
        data["tuning"] = TUNING
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_template(path)


def test_template_jobs_and_tuning_jobs_get_the_same_run_context(tmp_path: Path) -> None:
    backend = LocalBackend(LocalOptions(runs_dir=tmp_path / "runs", procs_per_replica=1))
    plain_template = _template(tmp_path / "plain", tuning=False, launcher="torchrun")
    tuned_template = _template(tmp_path / "tuned", tuning=True, launcher="torchrun")
    plain = backend.dryrun(plain_template, SubmitOptions(scratch=tmp_path / "s1"))
    tuned = backend.dryrun(tuned_template, SubmitOptions(scratch=tmp_path / "s2"))
    plain.release()  # type: ignore[union-attr]
    for request in (plain, tuned):
        assert is_job_id(request.job_id)
        assert request.ctx.default_output_uri == f"{DEFAULT_OUTPUT_BUCKET}/{request.job_id}"
        assert request.ctx.gcs_root == str(request.run_dir / "gcs")
        assert not request.run_dir.exists()  # a dry run makes no run folder
    # Field for field the same context, but for what names the job itself.
    names = ("job_id", "gcs_root", "default_output_uri")
    same = {f.name for f in dataclasses.fields(plain.ctx)} - set(names)
    assert {n: getattr(plain.ctx, n) for n in same} == {n: getattr(tuned.ctx, n) for n in same}
    assert (tuned.ctx.project, tuned.ctx.region, tuned.ctx.procs_per_replica) == (
        "my-project",
        "europe-west4",
        1,
    )


def test_procs_per_replica_is_refused_for_launcher_python_user_code_in_tuning_jobs_too(
    tmp_path: Path,
) -> None:
    backend = LocalBackend(LocalOptions(runs_dir=tmp_path / "runs", procs_per_replica=2))
    for tuning in (False, True):
        template = _template(tmp_path / f"t{tuning}", tuning=tuning, launcher="python")
        with pytest.raises(UsageError, match="--procs-per-replica 2"):
            backend.dryrun(template, SubmitOptions(scratch=tmp_path / "s"))


def test_each_trial_gets_its_own_default_output_folder_under_the_jobs(tmp_path: Path) -> None:
    backend = LocalBackend(LocalOptions(runs_dir=tmp_path / "runs"))
    tuned = backend.dryrun(_template(tmp_path / "tuned", tuning=True), SubmitOptions(scratch=tmp_path / "s"))
    trial = trial_context(tuned.ctx, "2", tmp_path / "metrics")
    assert trial.job_id == f"{tuned.job_id}-2" and trial.trial_id == "2"
    assert trial.default_output_uri == f"{DEFAULT_OUTPUT_BUCKET}/{tuned.job_id}/2"
    assert trial.hp_metric_dir == str(tmp_path / "metrics") and trial.gcs_root == tuned.ctx.gcs_root
