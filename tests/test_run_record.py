"""Issue 34: the run record's pure parts — the git label, an image's digest, and a rerun's request, which
differs from the recorded one in its output folder only."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from vertexdist.jobs.run_record import (
    CodeState,
    code_labels,
    code_state,
    image_digest,
    record_folder,
    rerun_request,
)

REQUEST = {
    "parent": "projects/p/locations/l",
    "trainingPipeline": {
        "displayName": "job",
        "trainingTaskInputs": {
            "baseOutputDirectory": {"outputUriPrefix": "gs://b/out/job/20260101-000000-abcdef"},
            "workerPoolSpecs": [
                {"pythonPackageSpec": {"args": ["--note=gs://b/out/job/20260101-000000-abcdef/x"]}}
            ],
        },
        "labels": {"vertexdist-request": "0123456789abcdef"},
    },
}


def test_a_rerun_changes_the_output_folder_and_nothing_else() -> None:
    again = rerun_request(REQUEST, "20260202-000000-123456")
    inputs = again["trainingPipeline"]["trainingTaskInputs"]
    assert inputs["baseOutputDirectory"]["outputUriPrefix"] == "gs://b/out/job/20260202-000000-123456"
    # Only the folder itself is replaced, not text that merely starts with it.
    assert inputs["workerPoolSpecs"] == REQUEST["trainingPipeline"]["trainingTaskInputs"]["workerPoolSpecs"]  # type: ignore[index]
    assert json.dumps(again).replace("20260202-000000-123456", "20260101-000000-abcdef") == json.dumps(
        REQUEST
    )


def test_the_record_sits_beside_the_job_folder_never_in_it() -> None:
    job = "projects/p/locations/l/trainingPipelines/123"
    assert record_folder("gs://b/out/20250102-130405-1a2b3c", job) == "gs://b/out/vertexdist-records/123"
    assert record_folder("gs://b/20250102-130405-1a2b3c/", job) == "gs://b/vertexdist-records/123"
    assert record_folder("gs://b", job) == "gs://b/vertexdist-records/123"


def test_the_git_label_says_commit_and_dirt() -> None:
    assert code_labels(CodeState("f")) == {}
    assert code_labels(CodeState("f", "a" * 40, False)) == {"vertexdist-git": "a" * 12}
    assert code_labels(CodeState("f", "a" * 40, True)) == {"vertexdist-git": "a" * 12 + "-dirty"}


def test_code_state_reads_git(tmp_path: Path) -> None:
    assert code_state(tmp_path) == CodeState(str(tmp_path))
    run = lambda *a: subprocess.run(["git", "-C", str(tmp_path), *a], check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    (tmp_path / "task.py").write_text("x = 1\n")
    run("add", ".")
    run("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "c")
    state = code_state(tmp_path)
    assert state.commit and len(state.commit) == 40 and state.dirty is False
    (tmp_path / "task.py").write_text("x = 2\n")
    assert code_state(tmp_path).dirty is True


def test_an_image_digest_only_when_pinned() -> None:
    assert image_digest("r/p/i:tag") is None
    assert image_digest("r/p/i@sha256:" + "b" * 64) == "sha256:" + "b" * 64


def test_a_local_run_keeps_its_record_in_its_run_folder(tmp_path: Path) -> None:
    from vertexdist.jobs.record_store import keep_local_record
    from vertexdist.spec import load_template

    (tmp_path / "train.py").write_text("print(1)\n")
    template = tmp_path / "job.yaml"
    template.write_text(
        "display_name: local-rec\nproject: my-project\nstaging_bucket: gs://my-bucket/s\n"
        "container_uri: us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest\n"
        "trainer:\n  script: train.py\n"
    )
    run_dir = tmp_path / "run"
    (run_dir / "package" / "abc").mkdir(parents=True)
    (run_dir / "package" / "abc" / "p-0.1.tar.gz").write_bytes(b"sdist")
    spec = {"workerPoolSpecs": [{"pythonPackageSpec": {"packageUris": ["gs://b/s/p-0.1.tar.gz"]}}]}
    (run_dir / "job.json").write_text(json.dumps(spec))
    plan = tmp_path / "faults.yaml"
    plan.write_text("faults: []\n")
    path = keep_local_record(load_template(template), run_dir, "local-1", plan)
    assert path is not None and path.stat().st_mode & 0o077 == 0  # for the user only, like the run folder
    record = json.loads(path.read_text())
    assert record["job"] == "local-1" and record["request"] == spec and record["fault_plan"] == "faults: []\n"
    assert record["template"]["text"] == template.read_text()
    assert record["package"]["uri"] == "gs://b/s/p-0.1.tar.gz"
    assert record["package"]["sha256"] == hashlib.sha256(b"sdist").hexdigest()


def test_a_kept_request_masks_its_secrets_and_a_rerun_gets_them_back_from_the_job() -> None:
    from vertexdist.render.secrets import MASK, mask_values, restore_secrets, secret_env

    env = [{"name": "API_TOKEN", "value": "s3cr3t"}, {"name": "PLAIN", "value": "visible"}]
    request = {"customJob": {"jobSpec": {"workerPoolSpecs": [{"containerSpec": {"env": env}}]}}}
    record = {"template": {"text": "env:\n  API_TOKEN: s3cr3t\n"}, "request": request}
    kept = mask_values(record, tuple(secret_env(request).values()))
    assert "s3cr3t" not in str(kept) and "visible" in str(kept) and MASK in kept["template"]["text"]
    job_spec = {"workerPoolSpecs": [{"containerSpec": {"env": env}}]}  # what the job itself holds
    assert restore_secrets(kept["request"], secret_env(job_spec)) == request
