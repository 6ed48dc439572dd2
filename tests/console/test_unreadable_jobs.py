"""A job the SDK cannot read (a field past its proto's range, from an emulator folder older than its checks)
is one problem line in the console's list and in `vertexdist list`; the other jobs still list, and a job that
asks for a trillion replicas does not hang its page. The console's cache folder is the user's alone."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from vertexdist.backends.base import JobStatus
from vertexdist.backends.config import Target
from vertexdist.backends.vertex.status import MAX_LISTED_REPLICAS, replicas_of
from vertexdist.emulator import Emulator
from vertexdist.wire.proto_json import now_rfc3339

PARENT = "projects/test-proj/locations/us-central1"


def stored(emu: Emulator, collection: str, ident: str, name: str, **fields: Any) -> None:
    stamp = now_rfc3339()
    emu.service.store.insert(
        {
            "name": f"{PARENT}/{collection}/{ident}",
            "displayName": name,
            "state": "JOB_STATE_SUCCEEDED" if collection == "customJobs" else "PIPELINE_STATE_SUCCEEDED",
            "createTime": stamp,
            "updateTime": stamp,
            "labels": {},
            **fields,
        }
    )


def pool(replicas: Any) -> dict[str, Any]:
    return {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": replicas}


@pytest.fixture(scope="module")
def emulator_with_a_bad_job(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with Emulator(data_dir=tmp_path_factory.mktemp("unreadable") / "data") as emu:
        spec = {"workerPoolSpecs": [pool(1), pool("99999999999999999999")]}  # past int64
        stored(emu, "customJobs", "1", "too-big", jobSpec=spec)
        stored(emu, "customJobs", "3", "fine-job", jobSpec={"workerPoolSpecs": [pool(1)]})
        stored(
            emu,
            "trainingPipelines",
            "2",
            "fine",
            trainingTaskDefinition="gs://x",
            trainingTaskInputs={"workerPoolSpecs": [pool(1)]},
        )
        yield emu


def test_an_unreadable_job_is_one_problem_line_and_the_others_list(
    emulator_with_a_bad_job: Emulator, tmp_path: Path
) -> None:
    from vertexdist.backends.vertex.backend import VertexBackend
    from vertexdist.console.jobs import Console

    emu = emulator_with_a_bad_job
    target = Target(
        project="test-proj", location="us-central1", api_endpoint=emu.vertex_endpoint, api_transport="rest"
    )
    listed = VertexBackend(target).list()
    assert sorted(s.display_name for s in listed) == ["fine", "fine-job"]
    problems = getattr(listed, "problems", [])
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{PARENT}/customJobs/1 cannot be read") and "replicaCount" in problems[0]

    (tmp_path / "runs").mkdir()
    console = Console(tmp_path / "runs", VertexBackend(target), cache_dir=tmp_path / "cache" / "console")
    rows, page_problems = console.rows()
    assert sorted(r.display_name for r in rows) == ["fine", "fine-job"]
    assert len(page_problems) == 1 and "replicaCount" in page_problems[0]
    assert stat.S_IMODE(os.stat(tmp_path / "cache" / "console").st_mode) == 0o700


def test_vertexdist_list_prints_the_problem_and_the_jobs(
    emulator_with_a_bad_job: Emulator,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from vertexdist.cli import main

    monkeypatch.chdir(tmp_path)
    endpoint = emulator_with_a_bad_job.vertex_endpoint
    with pytest.raises(SystemExit) as done:
        main.run(["list", "--endpoint", endpoint, "--project", "test-proj", "--location", "us-central1"])
    out, err = capsys.readouterr()
    assert done.value.code == 0, err
    assert "fine-job" in out and "fine " in out
    assert err.count("problem: ") == 1 and "customJobs/1 cannot be read" in err


def test_a_trillion_replicas_list_a_bounded_number_of_rows() -> None:
    status = JobStatus("j", "j", "PENDING", spec={"workerPoolSpecs": [pool(1), pool(10**12)]})
    replicas = replicas_of(status)
    assert len(replicas) == 1 + MAX_LISTED_REPLICAS


def test_the_console_cache_folder_becomes_private(tmp_path: Path) -> None:
    from vertexdist.console.jobs import Console

    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)
    (tmp_path / "runs").mkdir()
    Console(tmp_path / "runs", cache_dir=cache)
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700
