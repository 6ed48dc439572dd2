"""`vertexdist pipeline run FILE.py --follow`, `list`, `status` against the emulator, in-process; the SDK's
own pipeline-root bucket check asks the emulator's Resource Manager (not Google's, which it would retry
for 60 s)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from vertexdist.jobs.pipeline_runs import parse_params

PIPELINE = """
from kfp import dsl

@dsl.component
def add(a: int, b: int) -> int:
    print(f"adding {a} and {b}")
    return a + b

@dsl.pipeline(name="adder")
def adder(a: int = 1, b: int = 2):
    add(a=add(a=a, b=b).output, b=b)
"""


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from vertexdist.cli import main

    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main.run(args)
    code = exit_info.value.code
    return (code if isinstance(code, int) else 0), capsys.readouterr().out


def test_pipeline_run_follow_list_and_status(
    pipeline_emulator: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import google.cloud.aiplatform.utils.resource_manager_utils as rm

    from vertexdist.wire.projects import project_number

    answers: list[str] = []
    asked = rm.get_project_number

    def recorded(*args: Any, **kwargs: Any) -> str:
        answers.append(asked(*args, **kwargs))
        return answers[-1]

    monkeypatch.setattr(rm, "get_project_number", recorded)
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "adder.py").write_text(textwrap.dedent(PIPELINE))
    where = ["--endpoint", pipeline_emulator.vertex_endpoint, "--project", "cli-proj"]
    code, out = _run(
        [
            "pipeline",
            "run",
            "adder.py",
            "--param",
            "a=5",
            "--pipeline-root",
            "gs://cli-pipes/root",
            "--follow",
            *where,
        ],
        capsys,
    )
    assert code == 0, out
    assert out.strip().splitlines()[-1] == "PIPELINE_STATE_SUCCEEDED"
    assert answers == [project_number("cli-proj")]  # the bucket's owner, checked by the emulator's answer
    name = next(line.split()[-1] for line in out.splitlines() if line.startswith("submitted "))
    job = pipeline_emulator.store.get(name)
    outputs = {
        d["taskName"]: d.get("execution", {}).get("metadata", {}) for d in job["jobDetail"]["taskDetails"]
    }
    assert outputs["add-2"]["output:Output"] == 9  # (5 + 2) + 2
    code, out = _run(["pipeline", "list", *where], capsys)
    assert code == 0 and name in out
    code, out = _run(["pipeline", "status", name, *where], capsys)
    assert code == 0 and "add-2" in out and "SUCCEEDED" in out
    # Each task's lines through the emulated Cloud Logging API, as entries of the CustomJob its task
    # detail names (executorDetail.containerDetail.mainJob), as on Vertex.
    mains = [
        d["executorDetail"]["containerDetail"]["mainJob"]
        for d in job["jobDetail"]["taskDetails"]
        if d["taskName"] in ("add", "add-2")
    ]
    assert len(mains) == 2 and all("/customJobs/" in m for m in mains)
    code, out = _run(["pipeline", "logs", name, *where], capsys)
    assert code == 0, out
    assert "add: adding 5 and 2" in out.splitlines() and "add-2: adding 7 and 2" in out.splitlines()
    code, out = _run(["pipeline", "logs", name, "--task", "add-2", "--follow", *where], capsys)
    assert code == 0 and "add-2: adding 7 and 2" in out.splitlines() and "add: " not in out
    from vertexdist.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main.run(["pipeline", "logs", name, "--task", "nope", *where])
    assert exit_info.value.code == 2 and "its tasks: add, add-2" in capsys.readouterr().err


def test_params_read_as_json_where_they_can() -> None:
    assert parse_params(["a=5", "s=hello", "xs=[1, 2]", "f=0.5"]) == {
        "a": 5,
        "s": "hello",
        "xs": [1, 2],
        "f": 0.5,
    }
    from vertexdist.errors import UsageError

    with pytest.raises(UsageError, match="KEY=VALUE"):
        parse_params(["nothing"])
