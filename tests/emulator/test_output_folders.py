"""Every submitted job its own output folder (issue 12), through the real CLI against the emulator: a rerun of
a template trains from step 0, two jobs at once both succeed, and `--resume-from JOB` continues an earlier
job's folder, shown in render and the dry run. The bundled trainer records where it started."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from vertexdist.emulator import Emulator

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TEMPLATE = """\
display_name: {name}
project: test-proj
location: us-central1
staging_bucket: gs://vd-staging/staging
container_uri: us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest
machine_type: n1-standard-4
replica_count: 1
timeout: 120s
trainer:
  args: ["--epochs=1", "--batch-size=16", "--samples=256", "--data=synthetic", "--checkpoint-every=4"]
  env:
    OMP_NUM_THREADS: "1"
"""


def _template(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(TEMPLATE.format(name=name))
    return path


def _output_dir(emu: Emulator, name: str) -> str:
    pipeline = emu.store.get(name)
    assert pipeline is not None
    return str(pipeline["trainingTaskInputs"]["baseOutputDirectory"]["outputUriPrefix"])


def _metrics(emu: Emulator, output_dir: str) -> list[dict[str, Any]]:
    path = emu.data_dir / "gcs" / output_dir.removeprefix("gs://") / "model" / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _started_fresh(events: list[dict[str, Any]]) -> bool:
    first = [e["global_step"] for e in events if e["event"] == "first_step"]
    return first == [1] and not any(e["event"] == "resumed" for e in events)


def _wait_succeeded(emu: Emulator, names: list[str], timeout: float = 150) -> None:
    deadline = time.monotonic() + timeout
    for name in names:
        found = emu.store.wait_until(
            name,
            lambda r: r["state"].endswith(("SUCCEEDED", "FAILED", "CANCELLED")),
            deadline - time.monotonic(),
        )
        assert found is not None and found["state"] == "PIPELINE_STATE_SUCCEEDED", found


def test_a_rerun_trains_from_step_0_and_resuming_is_explicit(emu: Emulator, cli: Any, tmp_path: Path) -> None:
    path = _template(tmp_path, "rerun-from-zero")
    code, out, err = cli("submit", str(path))
    assert code == 0 and "resumed" not in err, err
    first = out.splitlines()[0]
    code, out, err = cli("submit", str(path), "--yes")  # the same request again, on purpose
    assert code == 0, err
    second = out.splitlines()[0]
    dirs = [_output_dir(emu, first), _output_dir(emu, second)]
    assert dirs[0] != dirs[1] and all(
        d.startswith("gs://vd-staging/staging/vertexdist/output/") for d in dirs
    )
    assert all(_started_fresh(_metrics(emu, d)) for d in dirs), [_metrics(emu, d) for d in dirs]

    # Continuing the first job is a choice, shown before anything is sent.
    code, rendered, err = cli("render", str(path), "--request", "--format", "json", "--resume-from", first)
    assert code == 0, err
    code, dry_run, err = cli("submit", str(path), "--dry-run", "--resume-from", first)
    assert code == 0, err
    assert json.loads(rendered) == json.loads(dry_run)
    inputs = json.loads(dry_run)["trainingPipeline"]["trainingTaskInputs"]
    assert inputs["baseOutputDirectory"]["outputUriPrefix"] == dirs[0]

    code, out, err = cli("submit", str(path), "--resume-from", first)
    assert code == 0, err
    # Said as it is submitted (moved here from the DeepSpeed example's test, which no longer resumes).
    assert f"outputs: {dirs[0]} (the earlier job's folder, resumed)" in err, err
    resumed = out.splitlines()[0]
    assert _output_dir(emu, resumed) == dirs[0]
    events = _metrics(emu, dirs[0])
    done = max(e["global_step"] for e in events if e["event"] == "done")
    assert [e["global_step"] for e in events if e["event"] == "resumed"] == [done]


def test_two_jobs_of_one_template_at_once_both_succeed(emu: Emulator, cli: Any, tmp_path: Path) -> None:
    path = _template(tmp_path, "two-at-once")
    names = []
    for _ in range(2):
        code, out, err = cli("submit", str(path), "--detach", "--yes")
        assert code == 0, err
        names.append(out.splitlines()[0])
    _wait_succeeded(emu, names)
    dirs = [_output_dir(emu, name) for name in names]
    assert dirs[0] != dirs[1]
    assert all(_started_fresh(_metrics(emu, d)) for d in dirs)


def test_resume_from_a_folder_or_a_job_without_one(emu: Emulator, cli: Any, tmp_path: Path) -> None:
    path = _template(tmp_path, "resume-folder")
    code, out, err = cli("render", str(path), "--resume-from", "gs://vd-staging/earlier/")
    assert code == 0, err
    assert "outputUriPrefix: gs://vd-staging/earlier\n" in out
    code, out, err = cli(
        "render", str(path), "--resume-from", "projects/test-proj/locations/us-central1/trainingPipelines/1"
    )
    assert code == 1 and "(404)" in err and "Traceback" not in err
    code, out, err = cli("submit", str(path), "--dry-run", "--resume-from", "yesterday")
    assert code == 2 and "--resume-from: 'yesterday' is not a job" in err and "gs:// folder" in err
