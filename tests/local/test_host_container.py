"""Running an image's process on the host without Docker (local-run on a template with `build`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from vertexdist.errors import VertexdistError
from vertexdist.local.host_container import (
    DockerfileProcess,
    host_command,
    host_command_for_build,
    parse_dockerfile,
)
from vertexdist.shipped import LAUNCHER_DIR


def test_parse_takes_the_last_stage_continuations_and_both_forms() -> None:
    text = """
    FROM python:3.11 AS builder
    ENTRYPOINT ["should", "not", "count"]
    FROM python:3.11-slim
    # a comment
    ENV A=1 \\
        B="two words"
    ENV LEGACY some value
    WORKDIR /app
    ENTRYPOINT ["python", "-m", \\
                "pkg.task"]
    CMD ["--epochs", "2"]
    """
    process = parse_dockerfile("\n".join(line.strip() for line in text.splitlines()))
    assert process.entrypoint == ("python", "-m", "pkg.task")
    assert process.cmd == ("--epochs", "2")
    assert process.env == {"A": "1", "B": "two words", "LEGACY": "some value"}
    assert process.workdir == "/app"
    shell = parse_dockerfile("FROM x\nCMD python -m pkg.task --x 1\n")
    assert shell.cmd == ("/bin/sh", "-c", "python -m pkg.task --x 1")


def test_entrypoint_then_cmd_resets_cmd() -> None:
    assert parse_dockerfile('FROM x\nCMD ["a"]\nENTRYPOINT ["b"]\n').cmd == ()


def test_command_and_args_override_like_vertex(tmp_path: Path) -> None:
    process = DockerfileProcess(entrypoint=("python", "-m", "pkg.task"), cmd=("--default",))
    run = host_command(process, tmp_path, python="/py")
    assert run.argv == ["/py", "-m", "pkg.task", "--default"]
    assert host_command(process, tmp_path, args=["--x"], python="/py").argv == [
        "/py",
        "-m",
        "pkg.task",
        "--x",
    ]
    assert host_command(process, tmp_path, args=[], python="/py").argv == [
        "/py",
        "-m",
        "pkg.task",
        "--default",
    ]
    assert host_command(process, tmp_path, command=["python3", "-m", "other"], python="/py").argv == [
        "/py",
        "-m",
        "other",
    ]
    with pytest.raises(VertexdistError, match="no ENTRYPOINT"):
        host_command(DockerfileProcess(), tmp_path)


def test_image_paths_are_not_carried_to_the_host(tmp_path: Path) -> None:
    process = DockerfileProcess(
        entrypoint=("python",),
        env={"PYTHONPATH": "/app", "PATH": "/opt/conda/bin", "MODE": "fast", "X": "$HOME/x"},
    )
    run = host_command(process, tmp_path, inherited_pythonpath="/site")
    assert run.env == {"MODE": "fast", "PYTHONPATH": f"{tmp_path.resolve()}{os.pathsep}/site"}
    assert run.cwd == tmp_path.resolve()


def test_the_process_runs_from_the_build_context(
    tmp_path: Path, write_files: Callable[[Path, Mapping[str, str]], Path]
) -> None:
    context = write_files(
        tmp_path / "ctx",
        {
            "Dockerfile": "FROM python:3.11\nENV GREETING=hello\nCOPY app/ /app/app/\nENV PYTHONPATH=/app\n"
            'ENTRYPOINT ["python", "-m", "app.task"]\n',
            "app/__init__.py": "",
            "app/task.py": "import json, os, sys\n"
            "seen = {'argv': sys.argv[1:], 'greeting': os.environ['GREETING'], 'file': __file__}\n"
            "print(json.dumps(seen))\n",
        },
    )
    run = host_command_for_build(context, context / "Dockerfile", args=["--epochs", "1"])
    result = subprocess.run(
        run.argv,
        env={**os.environ, **run.env},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    seen = json.loads(result.stdout)
    assert seen == {
        "argv": ["--epochs", "1"],
        "greeting": "hello",
        "file": str(context.resolve() / "app/task.py"),
    }


def test_the_repository_image_runs_the_bundled_trainer_on_the_host(repo_root: Path) -> None:
    run = host_command_for_build(
        repo_root, repo_root / "Dockerfile", command=["python", "-m", "trainer_pkg.cluster"]
    )
    assert run.argv == [sys.executable, "-m", "trainer_pkg.cluster"]
    env = {
        k: v for k, v in os.environ.items() if k not in ("CLUSTER_SPEC", "TF_CONFIG", "RANK", "WORLD_SIZE")
    }
    result = subprocess.run(
        run.argv, env={**env, **run.env}, cwd=run.cwd, capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(result.stdout)["num_nodes"] == 1


@pytest.mark.integration
def test_a_torchrun_container_command_finds_the_launcher_on_the_host(repo_root: Path) -> None:
    # In the image the Dockerfile puts vertexdist_launcher in /app; on the host it comes from vertexdist.
    command = ["python", "-m", "vertexdist_launcher", "torchrun", "--nproc-per-node", "2", "--"]
    run = host_command_for_build(
        repo_root, repo_root / "Dockerfile", command=[*command, "-m", "trainer_pkg.cluster"]
    )
    assert run.env["PYTHONPATH"].split(os.pathsep) == [str(repo_root.resolve()), str(LAUNCHER_DIR.parent)]
    env = {
        k: v for k, v in os.environ.items() if k not in ("CLUSTER_SPEC", "TF_CONFIG", "RANK", "WORLD_SIZE")
    }
    result = subprocess.run(
        run.argv, env={**env, **run.env}, cwd=run.cwd, capture_output=True, text=True, timeout=90, check=True
    )
    # Two workers print at once, and a print is two writes: one line may hold both objects.
    seen = [json.loads(found) for found in re.findall(r"\{[^{}]*\}", result.stdout)]
    assert [(s["world_size"], s["nproc_per_node"]) for s in seen] == [(2, 2), (2, 2)]  # torchrun's ranks


def test_a_rendered_job_runs_its_built_image_pools_on_the_host(built_template: Callable[..., Path]) -> None:
    from vertexdist.local.host_container import host_job_spec
    from vertexdist.render import render_job_spec
    from vertexdist.spec import load_template
    from vertexdist.wire.job_spec import parse_job_spec

    path = built_template()
    gpu_nodes = "machine_type: g2-standard-8\naccelerator_type: NVIDIA_L4\naccelerator_count: 1\n"
    path.write_text(
        path.read_text().replace("machine_type: n1-standard-4\n", gpu_nodes)
        + "trainer:\n  args: [--epochs, '1']\n  env: {GREETING: from-template}\n"
        + "reduction_server_count: 1\nreduction_server_machine_type: n1-highcpu-16\n"
    )
    template = load_template(path)
    assert template.build is not None
    uri = "us-central1-docker.pkg.dev/vertexdist-demo/trainers/vertexdist-trainer:ctx-0"
    spec = render_job_spec(template, image_uri=uri)
    context = Path(template.build.context)
    host = host_job_spec(spec, image_uri=uri, context=context, dockerfile=Path(template.build.dockerfile))
    assert spec["workerPoolSpecs"][0]["containerSpec"].get("command") is None  # the input is not changed
    pools = host["workerPoolSpecs"]
    assert pools[2] == spec["workerPoolSpecs"][2]  # the reduction server keeps its image
    for pool in pools[:2]:
        container = pool["containerSpec"]
        assert container["command"] == [sys.executable, "-m", "app.task"]
        assert container["args"] == ["--epochs", "1"]
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env == {"PYTHONPATH": str(context), "GREETING": "from-template"}
    assert [p.kind for p in parse_job_spec(host).pools if p is not None] == [
        "container",
        "container",
        "reduction_server",
    ]
    container = pools[0]["containerSpec"]
    env = {**os.environ, **{e["name"]: e["value"] for e in container["env"]}}
    result = subprocess.run(
        container["command"] + container["args"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.strip() == "hello from app.task"
