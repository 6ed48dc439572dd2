"""`local-run --docker`: replicas as containers of the template's image on a user-defined network.

The plan (argv per replica, env addresses, mounts, GPUs, stop and network commands) is pure and tested
without Docker; the end-to-end tests need a Docker daemon and are skipped with the reason when none answers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from tests.interrupts import default_sigint
from vertexdist.container.docker import docker_daemon_answers
from vertexdist.errors import VertexdistError
from vertexdist.local.docker_launcher import CONTAINER_GCS_ROOT, docker_job_plan
from vertexdist.local.environment import JobContext, hostname_cluster_addresses
from vertexdist.local.plan import LaunchPlan, ReplicaLaunch, build_plan
from vertexdist.local.runner import JobState, LocalJob
from vertexdist.wire.job_spec import parse_job_spec

IMAGE = "us-central1-docker.pkg.dev/p/trainers/vertexdist-trainer:ctx-0123456789abcdef0123"
REDUCER_IMAGE = "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"
CTX = JobContext(job_id="local-job1", project="p", region="us-central1", gcs_root="/runs/job1/gcs")
GPU_MACHINE = {"machineType": "a2-highgpu-2g", "acceleratorType": "NVIDIA_TESLA_A100", "acceleratorCount": 2}


def _spec(workers: int = 2, reducers: int = 1) -> dict[str, Any]:
    image_pool = {"imageUri": IMAGE, "args": ["--epochs=1"], "env": [{"name": "GREETING", "value": "hi"}]}
    pools: list[dict[str, Any]] = [
        {"machineSpec": GPU_MACHINE, "replicaCount": 1, "containerSpec": image_pool},
        {"machineSpec": GPU_MACHINE, "replicaCount": workers, "containerSpec": image_pool},
    ]
    if reducers:
        pools.append(
            {
                "machineSpec": {"machineType": "n1-highcpu-16"},
                "replicaCount": reducers,
                "containerSpec": {"imageUri": REDUCER_IMAGE},
            }
        )
    return {"workerPoolSpecs": pools, "baseOutputDirectory": {"outputUriPrefix": "gs://b/out"}}


def _job(spec: dict[str, Any]) -> Any:
    return parse_job_spec(spec, require_command=False)


def _flag_values(argv: tuple[str, ...] | list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, word in enumerate(argv) if word == flag]


# ----- pure: addresses by host name --------------------------------------------------------------------


def test_hostname_addressing_names_every_replica_at_port_2222() -> None:
    job = parse_job_spec(_spec(), require_command=False)
    assert hostname_cluster_addresses(job) == {
        "workerpool0": ["workerpool0-0:2222"],
        "workerpool1": ["workerpool1-0:2222", "workerpool1-1:2222"],
        "workerpool2": ["workerpool2-0:2222"],
    }
    plan = build_plan(
        job,
        CTX,
        ports=(),
        run_dir=Path("/runs/job1"),
        python="python",
        package_dirs={},
        addressing="hostnames",
    )
    for launch in plan.replicas:
        cluster = json.loads(launch.env["CLUSTER_SPEC"])["cluster"]
        assert cluster["workerpool1"] == ["workerpool1-0:2222", "workerpool1-1:2222"]
        tf = json.loads(launch.env["TF_CONFIG"])["cluster"]
        assert tf == {
            "chief": ["workerpool0-0:2222"],
            "worker": ["workerpool1-0:2222", "workerpool1-1:2222"],
            "ps": ["workerpool2-0:2222"],
        }
        assert (launch.env["MASTER_ADDR"], launch.env["MASTER_PORT"]) == ("workerpool0-0", "2222")
        assert launch.address == f"{launch.name}:2222"


def test_loopback_addressing_stays_the_default() -> None:
    job = parse_job_spec(_spec(workers=1, reducers=0), require_command=False)
    plan = build_plan(job, CTX, ports=(41000, 41001), run_dir=Path("/r"), python="python", package_dirs={})
    assert [r.address for r in plan.replicas] == ["127.0.0.1:41000", "127.0.0.1:41001"]
    assert plan.replicas[1].env["MASTER_ADDR"] == "127.0.0.1"


def test_container_pools_without_a_command_are_refused_on_the_host_only() -> None:
    with pytest.raises(VertexdistError, match="has no command"):
        parse_job_spec(_spec())
    assert parse_job_spec(_spec(), require_command=False).pools[0].command == ()


# ----- pure: the docker plan ---------------------------------------------------------------------------


def test_docker_replicas_run_as_the_caller_so_the_mounted_run_folder_stays_theirs() -> None:
    plan = docker_job_plan(_job(_spec()), CTX, image_uri=IMAGE, run_dir=Path("/runs/job1"), run_as="1234:99")
    for launch in plan.launch.replicas:
        assert _flag_values(launch.argv, "--user") == ["1234:99"]
    default = docker_job_plan(_job(_spec()), CTX, image_uri=IMAGE, run_dir=Path("/runs/job1"))
    assert all("--user" not in launch.argv for launch in default.launch.replicas)


def test_docker_plan_runs_one_named_container_per_replica_on_the_job_network() -> None:
    plan = docker_job_plan(_job(_spec()), CTX, image_uri=IMAGE, run_dir=Path("/runs/job1"))
    assert plan.network == "local-job1"
    assert plan.setup == (("docker", "network", "create", "--driver", "bridge", "local-job1"),)
    assert plan.teardown == (("docker", "network", "rm", "local-job1"),)
    names = [r.name for r in plan.launch.replicas]
    assert names == ["workerpool0-0", "workerpool1-0", "workerpool1-1", "workerpool2-0"]
    for launch in plan.launch.replicas:
        argv = launch.argv
        container = f"local-job1-{launch.name}"
        assert argv[:3] == ("docker", "run", "--rm")
        assert _flag_values(argv, "--name") == [container]
        assert _flag_values(argv, "--network") == ["local-job1"]
        assert _flag_values(argv, "--hostname") == [launch.name]
        assert "--init" in argv  # SIGTERM from the client reaches the trainer, not an ignoring PID 1
        # The job's gs:// folder where VERTEXDIST_GCS_ROOT points, and at /gcs, where Vertex mounts buckets.
        assert _flag_values(argv, "--volume") == [
            f"/runs/job1/gcs:{CONTAINER_GCS_ROOT}",
            "/runs/job1/gcs:/gcs",
        ]
        # Values travel in the client's environment, never on its command line.
        env_flags = _flag_values(argv, "--env")
        assert sorted(env_flags) == sorted(launch.env) and all("=" not in flag for flag in env_flags)
        assert launch.env["VERTEXDIST_GCS_ROOT"] == CONTAINER_GCS_ROOT
        assert launch.env["MASTER_ADDR"] == "workerpool0-0" and launch.env["MASTER_PORT"] == "2222"
        assert "127.0.0.1" not in launch.env["CLUSTER_SPEC"]
        assert launch.stop_argv == ("docker", "rm", "--force", container)
        assert launch.log_path == Path(f"/runs/job1/logs/{launch.name}.log")


def test_docker_plan_training_replicas_run_the_image_entrypoint_with_the_job_args() -> None:
    plan = docker_job_plan(_job(_spec()), CTX, image_uri=IMAGE, run_dir=Path("/r"))
    worker = plan.launch.replica("workerpool1-1")
    assert "--entrypoint" not in worker.argv  # the job gives no command: the image's ENTRYPOINT runs
    assert worker.argv[-2:] == (IMAGE, "--epochs=1")
    assert worker.env["GREETING"] == "hi"
    assert worker.env["RANK"] == "2" and worker.env["WORLD_SIZE"] == "3"
    assert json.loads(worker.env["CLUSTER_SPEC"])["task"] == {"type": "workerpool1", "index": 1, "trial": ""}


def test_docker_plan_job_command_becomes_the_entrypoint() -> None:
    spec = _spec(workers=0, reducers=0)
    spec["workerPoolSpecs"][0]["containerSpec"]["command"] = ["python", "-m", "app.task"]
    chief = docker_job_plan(_job(spec), CTX, image_uri=IMAGE, run_dir=Path("/r")).launch.replicas[0]
    assert _flag_values(chief.argv, "--entrypoint") == ["python"]
    assert chief.argv[-4:] == (IMAGE, "-m", "app.task", "--epochs=1")


def test_docker_plan_reduction_servers_hold_their_host_name_in_the_job_image() -> None:
    reducer = docker_job_plan(_job(_spec()), CTX, image_uri=IMAGE, run_dir=Path("/r")).launch.replica(
        "workerpool2-0"
    )
    assert reducer.is_training is False
    assert _flag_values(reducer.argv, "--entrypoint") == ["python"]
    image_at = reducer.argv.index(IMAGE)
    assert reducer.argv[image_at + 1] == "-c"
    assert reducer.argv[image_at + 3 :] == ("0.0.0.0", "2222", "workerpool2-0")
    assert "RANK" not in reducer.env and "VERTEXDIST_NPROC_PER_NODE" not in reducer.env


def test_docker_plan_gives_each_replica_its_own_gpus() -> None:
    gpus = [str(i) for i in range(8)]
    plan = docker_job_plan(_job(_spec()), CTX, image_uri=IMAGE, run_dir=Path("/r"), host_gpus=gpus)
    given = {r.name: _flag_values(r.argv, "--gpus") for r in plan.launch.replicas}
    assert given == {
        "workerpool0-0": ['"device=0,1"'],
        "workerpool1-0": ['"device=2,3"'],
        "workerpool1-1": ['"device=4,5"'],
        "workerpool2-0": [],  # a reducer's machine has no GPUs
    }
    # Inside a container its GPUs are numbered from 0; the host's ids would point past them.
    assert all("CUDA_VISIBLE_DEVICES" not in r.env for r in plan.launch.replicas)


def test_docker_plan_without_host_gpus_passes_none_and_too_few_is_an_error() -> None:
    plan = docker_job_plan(_job(_spec()), CTX, image_uri=IMAGE, run_dir=Path("/r"))
    assert all("--gpus" not in r.argv for r in plan.launch.replicas)
    with pytest.raises(VertexdistError, match="needs 6 GPUs"):
        docker_job_plan(_job(_spec()), CTX, image_uri=IMAGE, run_dir=Path("/r"), host_gpus=["0", "1"])


def test_docker_plan_refuses_python_package_pools() -> None:
    spec = {
        "workerPoolSpecs": [
            {
                "replicaCount": 1,
                "pythonPackageSpec": {"pythonModule": "t.task", "packageUris": ["gs://b/t.tar.gz"]},
            }
        ]
    }
    with pytest.raises(VertexdistError, match="Python package"):
        docker_job_plan(_job(spec), CTX, image_uri=IMAGE, run_dir=Path("/r"))


# ----- the runner's stop commands (real processes) ------------------------------------------------------


# A stop command that marks its replica stopped, then waits (bounded) for its partner's mark: both marks
# end in "y" only when the commands ran at the same time.
STOP_BESIDE = """
import os, sys, time
open(sys.argv[1], "a").write("x")
deadline = time.monotonic() + 20
while not os.path.exists(sys.argv[2]) and time.monotonic() < deadline:
    time.sleep(0.02)
open(sys.argv[1], "a").write("y" if os.path.exists(sys.argv[2]) else "")
"""


def _marker_launch(
    tmp_path: Path, name: str, argv: tuple[str, ...], pool: int, partner: str | None = None
) -> ReplicaLaunch:
    marker = tmp_path / f"stopped-{name}"
    stop = (sys.executable, "-c", f"open({str(marker)!r}, 'a').write('x')")
    if partner is not None:
        stop = (sys.executable, "-c", STOP_BESIDE, str(marker), str(tmp_path / f"stopped-{partner}"))
    return ReplicaLaunch(
        name=name,
        pool=pool,
        index=0,
        kind="container",
        argv=argv,
        env={},
        cwd=tmp_path / "replicas" / name,
        log_path=tmp_path / "logs" / f"{name}.log",
        address=f"{name}:2222",
        stop_argv=stop,
    )


def test_runner_runs_every_stop_command_at_once_when_a_job_is_cancelled(tmp_path: Path) -> None:
    """Each `docker rm -f` waits for the daemon; the replicas' commands run side by side, not in turn."""
    sleeper = (sys.executable, "-c", "import time; time.sleep(60)")
    plan = LaunchPlan(
        job_id="j",
        run_dir=tmp_path,
        replicas=(
            _marker_launch(tmp_path, "workerpool0-0", sleeper, 0, partner="workerpool1-0"),
            _marker_launch(tmp_path, "workerpool1-0", sleeper, 1, partner="workerpool0-0"),
        ),
        timeout_s=None,
        max_restarts=0,
    )
    job = LocalJob(plan, grace_s=2.0).start()
    deadline = time.monotonic() + 20
    while job.state is not JobState.RUNNING and time.monotonic() < deadline:
        time.sleep(0.05)
    job.cancel()
    result = job.wait(60)
    assert result is not None and result.state is JobState.CANCELLED
    for name in ("workerpool0-0", "workerpool1-0"):
        assert (tmp_path / f"stopped-{name}").read_text() == "xy"


def test_runner_runs_stop_commands_after_a_job_succeeds(tmp_path: Path) -> None:
    done = (sys.executable, "-c", "pass")
    plan = LaunchPlan(
        job_id="j",
        run_dir=tmp_path,
        replicas=(_marker_launch(tmp_path, "workerpool0-0", done, 0),),
        timeout_s=None,
        max_restarts=0,
    )
    result = LocalJob(plan).start().wait(30)
    assert result is not None and result.state is JobState.SUCCEEDED
    assert (tmp_path / "stopped-workerpool0-0").exists()


# ----- the CLI ------------------------------------------------------------------------------------------


def _vertexdist(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vertexdist", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def _no_daemon_path(tmp_path: Path) -> dict[str, str]:
    """PATH with a `docker` client that reaches no daemon, as on this machine, whatever the host has."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(
        "#!/bin/sh\necho 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock.' >&2\nexit 1\n"
    )
    docker.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_docker_without_a_daemon_is_a_usage_error_naming_the_host_fallback(
    built_template: Any, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    result = _vertexdist(
        "local-run", str(built_template()), "--docker", "--out", str(out), env=_no_daemon_path(tmp_path)
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--docker needs a Docker daemon" in result.stderr
    assert "without it the replicas run on the host" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()  # refused before anything was made


def test_docker_without_a_build_section_is_a_usage_error(tmp_path: Path) -> None:
    template = tmp_path / "job.yaml"
    template.write_text(
        "display_name: plain\nproject: my-project\nlocation: us-central1\nstaging_bucket: gs://my-bucket/staging\n"
        "machine_type: n1-standard-4\ntrainer:\n  script: train.py\n"
    )
    (tmp_path / "train.py").write_text("print('hi')\n")
    result = _vertexdist("local-run", str(template), "--docker", "--plan")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "has no `build` section" in result.stderr and "drop --docker" in result.stderr


def test_plan_with_docker_needs_no_daemon_and_starts_nothing(built_template: Any, tmp_path: Path) -> None:
    out = tmp_path / "run"
    env = {**_no_daemon_path(tmp_path), "CUDA_VISIBLE_DEVICES": ""}
    result = _vertexdist(
        "local-run", str(built_template()), "--docker", "--plan", "--json", "--out", str(out), env=env
    )
    assert result.returncode == 0, result.stdout + result.stderr
    plan = json.loads(result.stdout)
    job_id = plan["job_id"]
    assert plan["docker"]["network"] == job_id
    assert plan["docker"]["setup"] == [["docker", "network", "create", "--driver", "bridge", job_id]]
    assert plan["docker"]["teardown"] == [["docker", "network", "rm", job_id]]
    image = plan["docker"]["image"]
    assert ":ctx-" in image
    replicas = {r["name"]: r for r in plan["replicas"]}
    assert set(replicas) == {"workerpool0-0", "workerpool1-0"}
    for name, replica in replicas.items():
        assert replica["argv"][:2] == ["docker", "run"] and image in replica["argv"]
        assert replica["address"] == f"{name}:2222"
        assert replica["env"]["MASTER_ADDR"] == "workerpool0-0"
        assert replica["env"]["VERTEXDIST_GCS_ROOT"] == CONTAINER_GCS_ROOT
        assert f"{out.resolve() / 'gcs'}:{CONTAINER_GCS_ROOT}" in replica["argv"]
        assert replica["stop_argv"] == ["docker", "rm", "--force", f"{job_id}-{name}"]
    assert not out.exists()

    text = _vertexdist("local-run", str(built_template()), "--docker", "--plan", env=env)
    assert text.returncode == 0, text.stderr
    assert "--hostname workerpool1-0" in text.stdout and "before: docker network create" in text.stdout


# ----- end to end: needs a Docker daemon (`make test` starts one as root: tests/docker_daemon.py) ---------

TASK = """\
import json, os, socket, sys, time
spec = json.loads(os.environ["CLUSTER_SPEC"])
me = spec["task"]["type"] + "-" + str(spec["task"]["index"])
print("replica", me, "hostname", socket.gethostname(), "master", os.environ["MASTER_ADDR"],
      "resolves", socket.gethostbyname(os.environ["MASTER_ADDR"]) != "", flush=True)
root = os.environ["VERTEXDIST_GCS_ROOT"]
os.makedirs(os.path.join(root, "out"), exist_ok=True)
open(os.path.join(root, "out", me), "w").write(os.environ["MASTER_PORT"])
if "--sleep" in sys.argv:
    time.sleep(300)
"""

needs_docker = pytest.mark.skipif(
    not docker_daemon_answers(),
    reason="no Docker daemon answers here (the docker CLI alone cannot build or run containers)",
)


def _docker_template(root: Path, args: str) -> Path:
    (root / "ctx" / "app").mkdir(parents=True)
    (root / "ctx" / "app" / "__init__.py").write_text("")
    (root / "ctx" / "app" / "task.py").write_text(TASK)
    # The base is a build argument, so an offline daemon builds on the local stand-in (container.standin).
    (root / "ctx" / "Dockerfile").write_text(
        "ARG BASE_IMAGE=python:3.11-slim\nFROM ${BASE_IMAGE}\nCOPY app/ /app/app/\nWORKDIR /app\n"
        'ENTRYPOINT ["python", "-m", "app.task"]\n'
    )
    template = root / "job.yaml"
    template.write_text(
        textwrap.dedent(
            f"""\
            display_name: docker-job
            project: my-project
            location: us-central1
            staging_bucket: gs://my-bucket/staging
            machine_type: n1-standard-4
            replica_count: 2
            trainer:
              args: {args}
            build:
              context: ctx
              dockerfile: ctx/Dockerfile
              repository: us-central1-docker.pkg.dev/my-project/trainers
            """
        )
    )
    return template


def _shipped_container_template(repo_root: Path, tmp_path: Path) -> Path:
    """The shipped container template (the repository's Dockerfile and bundled trainer), with a short run."""
    shipped = repo_root / "job_templates" / "a2-4g-x2-container.yaml"
    text = shipped.read_text().replace("context: ..", f"context: {repo_root}")
    text = text.replace("dockerfile: ../Dockerfile", f"dockerfile: {repo_root / 'Dockerfile'}")
    start = text.index("  args: [")
    end = text.index("\n", start)
    text = text[:start] + '  args: ["--epochs=1", "--samples=512", "--batch-size=64"]' + text[end:]
    template = tmp_path / "a2-4g-x2-container.yaml"
    template.write_text(text)
    return template


def _leftovers(job_id: str) -> tuple[str, str]:
    containers = subprocess.run(
        ["docker", "ps", "-a", "--filter", f"name={job_id}", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    networks = subprocess.run(
        ["docker", "network", "ls", "--filter", f"name={job_id}", "--format", "{{.Name}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return containers, networks


@pytest.mark.docker
@pytest.mark.integration
@pytest.mark.slow
@needs_docker
@pytest.mark.timeout(900)
def test_shipped_template_builds_locally_then_trains_ddp_across_two_containers(
    repo_root: Path, tmp_path: Path
) -> None:
    template = _shipped_container_template(repo_root, tmp_path)
    built = _vertexdist("build", str(template), "--local", timeout=840)
    assert built.returncode == 0, built.stdout + built.stderr
    image = built.stdout.strip().splitlines()[-1]
    assert image.startswith("us-central1-docker.pkg.dev/vertexdist-demo/training/vertexdist-trainer:ctx-")

    out = tmp_path / "run"
    result = _vertexdist(
        "local-run",
        str(template),
        "--docker",
        "--procs-per-replica",
        "1",
        "--json",
        "--out",
        str(out),
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["state"] == "JOB_STATE_SUCCEEDED"
    # `build --local` made the image: the run started its containers without building.
    assert f"{image} exists; nothing to build" in (out / "logs" / "build.log").read_text()
    chief = (out / "logs" / "workerpool0-0.log").read_text()
    worker = (out / "logs" / "workerpool1-0.log").read_text()
    # One rank per container, gloo across the job's network: the chief names the other container's host.
    assert "chief node 0 of 2: ranks 0-0 of 2 on cpu, rendezvous workerpool0-0:2222" in chief
    assert "node 1 of 2: ranks 1-1 of 2 on cpu" in worker
    assert "world size 2" in chief and "epoch 1/1" in chief
    # The model went through the /gcs mount into the run folder's gcs/.
    model = Path(summary["output_path"]) / "model" / "model.pt"
    assert model.is_file() and model.stat().st_size > 0
    assert _leftovers(summary["job_id"]) == ("", "")


@pytest.mark.docker
@pytest.mark.integration
@pytest.mark.slow
@needs_docker
@pytest.mark.timeout(600)
def test_docker_job_interrupted_with_ctrl_c_leaves_no_container_or_network(tmp_path: Path) -> None:
    template = _docker_template(tmp_path, "['--sleep']")
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vertexdist",
            "local-run",
            str(template),
            "--docker",
            "--json",
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,  # Ctrl-C as from a shell (tests/interrupts.py)
    )
    names = ("workerpool0-0", "workerpool1-0")
    lines = {name: f"replica {name} hostname {name} master workerpool0-0 resolves True" for name in names}

    def log_of(name: str) -> str:
        path = out / "logs" / f"{name}.log"
        return path.read_text() if path.is_file() else ""

    def both_up() -> bool:
        # Each replica's own line in its log (it reaches the log through the container's output stream, a
        # moment after the replica wrote its marker), not one replica's marker: the two start apart.
        return all((out / "gcs" / "out" / name).exists() and lines[name] in log_of(name) for name in names)

    deadline = time.monotonic() + 400  # the first run builds the image
    while not both_up() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
    assert both_up(), "the containers never both started: " + "".join(log_of(name) for name in names)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stdout + stderr
    job_id = json.loads(stdout.strip().splitlines()[-1])["job_id"]
    assert _leftovers(job_id) == ("", "")
