"""`vertexdist submit` and the job commands against the emulator, through the real CLI entry point.

Every test that starts a job on the session's emulator runs twice (`replica_start`, tests/conftest.py):
against the cold emulator and against a `--warm 2` one, whose pool must fork the test's replicas. Not warm:
what never reaches a replica (dry runs, help, render, refused creates), `submit --emulator`'s in-process
emulator (it has no warm pool: one would cost a torch import per command) and the two jobs of container
pools (CONTAINER_COLD below).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.interrupts import default_sigint
from vertexdist.emulator import Emulator
from vertexdist.emulator.faults import Fault
from vertexdist.render import with_job_folder
from vertexdist.render.health_mark import has_mark, without_mark

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SLEEPER = "import time\ntime.sleep(60)\n"
# CONTAINER_COLD: a container pool's replica runs in an interpreter of its own (its sandbox's), which a warm
# pool never forks: on a warm emulator it starts cold, so a warm variant would be a second cold run.


@pytest.fixture
def emu(
    replica_start: Any, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Emulator]:
    """The session's emulator (cold), or its `--warm 2` one, whose pool must fork the test's replicas."""
    server: Emulator = request.getfixturevalue("warm_emulator" if replica_start.warm else "emulator")
    server.faults.clear()
    server.service.hold_get_s = 5.0
    monkeypatch.setenv("VERTEX_API_ENDPOINT", server.vertex_endpoint)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.storage_endpoint)
    assert server.data_dir is not None
    if replica_start.warm:
        assert server.warm_pool is not None
        replica_start.watch(server.data_dir, pool=server.warm_pool.path)
    yield server
    server.faults.clear()


def differences(sent: Any, got: Any, path: str = "") -> list[str]:
    """Every field path where `got` differs from `sent` (numbers by value: a Struct turns 1 into 1.0)."""
    if isinstance(sent, dict) and isinstance(got, dict):
        return [
            d
            for key in sorted(set(sent) | set(got))
            for d in differences(sent.get(key), got.get(key), f"{path}.{key}")
        ]
    if isinstance(sent, list) and isinstance(got, list) and len(sent) == len(got):
        return [
            d
            for i, (a, b) in enumerate(zip(sent, got, strict=True))
            for d in differences(a, b, f"{path}[{i}]")
        ]
    return [] if sent == got else [f"{path}: sent {sent!r}, got {got!r}"]


def pipelines_with_hash(emu: Emulator, request_hash: str) -> list[dict[str, Any]]:
    return [
        p
        for p in emu.store.list("projects/test-proj/locations/us-central1", "trainingPipelines")
        if p.get("labels", {}).get("vertexdist-request") == request_hash
    ]


def test_submit_sends_exactly_the_dry_run_request(emu: Emulator, cli: Any, write_template: Any) -> None:
    path = write_template(name="same-request", replicas=2, env={"NCCL_DEBUG": "WARN"})
    code, out, _ = cli("submit", str(path), "--dry-run")
    assert code == 0
    dry = json.loads(out)
    code, out, err = cli("submit", str(path))
    assert code == 0, err
    name = out.splitlines()[0]
    received = emu.store.get(name)
    assert received is not None
    # One field is filled in when the job is created: its own output folder, <job-folder> in the dry run.
    output = received["trainingTaskInputs"]["baseOutputDirectory"]["outputUriPrefix"]
    base, _, folder = output.rpartition("/")
    dry_output = dry["trainingPipeline"]["trainingTaskInputs"]["baseOutputDirectory"]["outputUriPrefix"]
    assert dry_output == f"{base}/<job-folder>" and folder and folder != "<job-folder>"
    assert f"outputs: {output}" in err
    # And one more: the job's health mark, a random value in every pool's env that the job's watchers write
    # into their heartbeat lines (issue 41); a secret of the job's, so no dry run can show it.
    assert has_mark({"trainingPipeline": received})
    unmarked = without_mark({"trainingPipeline": received})["trainingPipeline"]
    sent = with_job_folder(dry, folder)["trainingPipeline"]
    assert name.startswith(dry["parent"] + "/trainingPipelines/")
    for field in sent:
        assert differences(sent[field], unmarked[field], field) == []
    backing = emu.store.get(received["trainingTaskMetadata"]["backingCustomJob"])
    assert backing is not None
    backing_spec = without_mark({"trainingPipeline": {"trainingTaskInputs": backing["jobSpec"]}})
    assert (
        differences(sent["trainingTaskInputs"], backing_spec["trainingPipeline"]["trainingTaskInputs"]) == []
    )
    assert "SUCCEEDED" in err


def test_unchanged_package_is_not_uploaded_again(emu: Emulator, cli: Any, write_template: Any) -> None:
    from google.cloud import storage

    path = write_template(name="upload-once")
    code, _, err = cli("submit", str(path))
    assert code == 0 and "package uploaded gs://vd-staging/staging/vertexdist/packages/" in err
    uri = err.split("package uploaded ")[1].split()[0]
    blob = storage.Client(project="test-proj").bucket("vd-staging").get_blob(uri.split("/", 3)[3])
    code, _, err = cli("submit", str(path), "--yes")
    assert code == 0 and f"unchanged, already in the bucket: {uri}" in err
    again = storage.Client(project="test-proj").bucket("vd-staging").get_blob(uri.split("/", 3)[3])
    assert again.generation == blob.generation


def test_a_duplicate_submit_is_refused_without_yes(emu: Emulator, cli: Any, write_template: Any) -> None:
    path = write_template(name="dup-check")
    code, out, _ = cli("submit", str(path), "--detach")
    assert code == 0
    request_hash = emu.store.get(out.splitlines()[0])["labels"]["vertexdist-request"]
    code, out, err = cli("submit", str(path), "--detach")
    assert code == 1
    assert "refusing to create a duplicate" in err and "hint: pass --yes" in err
    assert len(pipelines_with_hash(emu, request_hash)) == 1
    code, _, _ = cli("submit", str(path), "--detach", "--yes")
    assert code == 0 and len(pipelines_with_hash(emu, request_hash)) == 2


def test_the_service_submits_and_follows_with_only_the_environment_it_is_given(
    emu: Emulator, write_template: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a recovery controller or a web console calls: no CLI, no terminal, nothing read from os.environ
    # but what is passed, nothing written to it.
    from vertexdist.jobs.submit import DuplicateRequest, SubmitHooks, SubmitRequest, open_submission
    from vertexdist.spec import load_template

    monkeypatch.chdir(tmp_path)
    env = {"VERTEX_API_ENDPOINT": emu.vertex_endpoint, "STORAGE_EMULATOR_HOST": emu.storage_endpoint}
    for var in env:
        monkeypatch.delenv(var)
    before = dict(__import__("os").environ)
    uploads: list[bool] = []
    hooks = SubmitHooks(on_uploaded=lambda _submission, uploaded: uploads.append(uploaded))
    request = SubmitRequest(load_template(write_template(name="through-the-service")))
    with open_submission(request, hooks, env=env) as session:
        assert session.target.api_endpoint == emu.vertex_endpoint and not session.in_process
        job = session.submit()
        states: list[str] = []
        final = session.follow(job.name, on_status=lambda status: states.append(status.state))
    assert final.state == "SUCCEEDED" and states[-1] == "SUCCEEDED" and uploads == [True]
    received = emu.store.get(job.name)
    assert received is not None
    assert received["trainingTaskInputs"]["baseOutputDirectory"]["outputUriPrefix"] == job.output_dir
    with open_submission(request, hooks, env=env) as session, pytest.raises(DuplicateRequest):
        session.submit()  # the default hook refuses the same request sent moments ago
    assert dict(__import__("os").environ) == before


def test_transient_failures_are_retried_and_create_exactly_one_job(
    emu: Emulator, cli: Any, write_template: Any
) -> None:
    path = write_template(name="flaky-service")
    emu.faults.add(
        Fault("create", 503, "The service is currently unavailable.", "trainingPipelines", times=2)
    )
    emu.faults.add(Fault("get", 429, "Too many requests, slow down.", "trainingPipelines", times=1))
    # A lost answer: the pipeline is created, the client sees 503 and must not create a second one.
    emu.faults.add(Fault("create", 503, "Connection reset.", "trainingPipelines", times=1, after=True))
    code, out, err = cli("submit", str(path))
    assert code == 0, err
    request_hash = emu.store.get(out.splitlines()[0])["labels"]["vertexdist-request"]
    assert len(pipelines_with_hash(emu, request_hash)) == 1
    fired = [(method, status) for method, _, status in emu.faults.fired]
    assert fired.count(("create", 503)) == 3 and ("get", 429) in fired


@pytest.mark.parametrize("replica_start", ["cold"], indirect=True)  # the create is refused: no job runs
@pytest.mark.parametrize(
    ("status", "message", "hint"),
    [
        (400, "Machine type n1-standard-4 is not available.", "vertexdist validate"),
        (
            403,
            "Permission 'aiplatform.trainingPipelines.create' denied on project test-proj.",
            "roles/aiplatform.user",
        ),
        (404, "Location us-central1 is not found.", "check the job name"),
        (
            429,
            "The following quota metrics exceed quota limits: custom_model_training_cpus",
            "out of quota",
        ),
    ],
)
def test_permanent_failures_stop_with_the_server_message(
    emu: Emulator, cli: Any, write_template: Any, status: int, message: str, hint: str
) -> None:
    path = write_template(name=f"refused-{status}")
    emu.faults.add(Fault("create", status, message, "trainingPipelines", times=5))
    code, out, err = cli("submit", str(path))
    assert code == 1
    assert f"error: creating the training pipeline failed ({status}): {message}" in err
    assert "hint: " in err and hint in err
    assert [f for f in emu.faults.fired if f[0] == "create"] == [("create", "trainingPipelines", status)]
    assert "Traceback" not in err and out == ""


def test_secrets_are_masked_in_dry_run_status_and_logs(emu: Emulator, cli: Any, write_template: Any) -> None:
    secret = "s3cr3t-value-123"
    script = "import os\nprint('token is', os.environ['API_TOKEN'])\n"
    path = write_template(script, name="secretive", env={"API_TOKEN": secret, "PLAIN": "visible"})
    code, out, _ = cli("submit", str(path), "--dry-run")
    assert code == 0 and secret not in out and "********" in out and "visible" in out
    code, out, err = cli("submit", str(path), "--follow")
    assert code == 0, err
    name = out.splitlines()[0]
    assert "token is ********" in out and secret not in out + err
    for command in (("status", name, "--json"), ("status", name), ("logs", name), ("logs", name, "--json")):
        code, out, err = cli(*command)
        assert code == 0 and secret not in out + err, command
    assert "token is ********" in cli("logs", name)[1]


def test_a_failed_submit_shows_the_replicas_last_lines_as_vertex_does(
    emu: Emulator, cli: Any, write_template: Any
) -> None:
    secret = "hunter2-secret-value"
    script = (
        "import os\nprint('token', os.environ['API_TOKEN'])\nprint('x' * 5000)\n"
        "def step(lr):\n    raise ValueError(f'bad learning rate {lr}')\nstep(-1)\n"
    )
    path = write_template(script, name="traceback-job", env={"API_TOKEN": secret})
    code, out, err = cli("submit", str(path))  # no --follow: the error message is all the user sees
    assert code == 1
    assert "The replica workerpool0-0 exited with a non-zero status of 1." in err
    assert "Traceback (most recent call last):" in err and "ValueError: bad learning rate -1" in err
    assert "x" * 297 + "..." in err and "x" * 301 not in err  # a long line is cut
    assert secret not in err and "token ********" in err
    code, status_out, _ = cli("status", out.splitlines()[0])
    assert code == 1 and "ValueError: bad learning rate -1" in status_out and secret not in status_out


def test_job_commands_report_state_and_exit_codes(emu: Emulator, cli: Any, write_template: Any) -> None:
    failing = write_template("import sys\nprint('bad data')\nsys.exit(4)\n", name="failing-job")
    code, out, err = cli("submit", str(failing))
    assert code == 1 and "job FAILED" in err and "workerpool0-0" in err
    failed_name = out.splitlines()[0]
    code, out, _ = cli("status", failed_name, "--json")
    assert code == 1 and json.loads(out)["state"] == "FAILED"
    code, out, _ = cli("logs", failed_name, "--json")
    lines = [json.loads(line) for line in out.splitlines()]
    assert {("workerpool0-0", "bad data", "INFO")} <= {
        (j["replica"], j["line"], j["severity"]) for j in lines
    }

    sleeper = write_template(SLEEPER, name="long-job")
    emu.service.hold_get_s = 0
    code, out, _ = cli("submit", str(sleeper), "--detach")
    running_name = out.splitlines()[0]
    code, out, _ = cli("cancel", running_name, "--json")
    assert code == 0 and json.loads(out)["cancelRequested"] is True
    code, out, _ = cli("logs", running_name, "--follow")
    assert code == 1
    code, out, _ = cli("status", running_name, "--json")
    assert json.loads(out)["state"] == "CANCELLED"

    code, out, _ = cli("list", "--project", "test-proj", "--json")
    listed = {job["name"]: job["state"] for job in json.loads(out)}
    assert listed[failed_name] == "FAILED" and listed[running_name] == "CANCELLED"
    code, out, _ = cli("list", "--project", "test-proj")
    assert code == 0 and running_name in out

    missing = "projects/test-proj/locations/us-central1/trainingPipelines/42"
    code, _, err = cli("status", missing)
    assert code == 1 and "(404)" in err and "was not found" in err and "hint:" in err
    code, _, err = cli("status", "not-a-job")
    assert code == 2 and "is not a job" in err


def test_submit_emulator_runs_in_process_without_any_setup(
    cli: Any, write_template: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for var in ("VERTEX_API_ENDPOINT", "STORAGE_EMULATOR_HOST", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(var, raising=False)
    path = write_template("import os\nprint('job', os.environ['CLOUD_ML_JOB_ID'])\n", name="in-process")
    data = tmp_path / "emulator-data"
    code, out, err = cli("submit", str(path), "--emulator", "--follow", "--emulator-data-dir", str(data))
    assert code == 0, err
    assert (data / "resources" / "trainingPipelines").is_dir()
    assert out.splitlines()[0].startswith("projects/test-proj/locations/us-central1/trainingPipelines/")
    assert "[workerpool0-0] job " in out
    # Issue 42, item 8: the same request again is a duplicate here too, as with a shared emulator (the
    # folder keeps the first job); without a terminal it is refused, --yes submits it.
    code, out, err = cli("submit", str(path), "--emulator", "--emulator-data-dir", str(data))
    assert code != 0 and "the same request was submitted 1 time(s)" in err, err
    code, out, err = cli("submit", str(path), "--emulator", "--emulator-data-dir", str(data), "--yes")
    assert code == 0, err
    assert "STORAGE_EMULATOR_HOST" not in __import__("os").environ
    code, _, err = cli("submit", str(path), "--emulator", "--detach")
    assert code == 2 and "--emulator" in err


def test_ctrl_c_while_following_an_in_process_emulator_job_cancels_it(
    cli: Any, write_template: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import os
    import signal
    import subprocess
    import sys

    for var in ("VERTEX_API_ENDPOINT", "STORAGE_EMULATOR_HOST", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(var, raising=False)
    path = write_template("import time\nprint('started', flush=True)\ntime.sleep(60)\n", name="ctrl-c")
    data = tmp_path / "emulator-data"
    submit = [sys.executable, "-m", "vertexdist", "submit", str(path), "--emulator", "--follow"]
    follower = subprocess.Popen(
        [*submit, "--emulator-data-dir", str(data)],
        env={**os.environ, "NO_GCE_CHECK": "true"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint,
    )  # fmt: skip
    try:
        assert follower.stdout is not None
        name = follower.stdout.readline().strip()
        while "started" not in follower.stdout.readline():
            pass
        follower.send_signal(signal.SIGINT)
        _, err = follower.communicate(timeout=60)
    finally:
        follower.kill()
    assert follower.returncode == 130, err
    assert "Ctrl-C: job cancelled (CANCELLED)" in err and "Traceback" not in err
    code, out, err = cli("status", name, "--emulator", "--emulator-data-dir", str(data), "--json")
    assert json.loads(out)["state"] == "CANCELLED", (code, out, err)


def test_ctrl_c_while_following_a_job_of_a_running_emulator_says_it_runs_on(
    emu: Emulator, cli: Any, write_template: Any
) -> None:
    # Issue 42, item 7: against a running emulator (not one started for the command) Ctrl-C exited 130 with
    # not a word, and the job ran on.
    import os
    import signal
    import subprocess
    import sys

    emu.service.hold_get_s = 0  # the follower's polls answer at once
    path = write_template("import time\nprint('started', flush=True)\ntime.sleep(60)\n", name="ctrl-c-served")
    follower = subprocess.Popen(
        [sys.executable, "-m", "vertexdist", "submit", str(path), "--follow", "--yes"],
        env={**os.environ, "NO_GCE_CHECK": "true"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint,
    )  # fmt: skip
    name = ""
    try:
        assert follower.stdout is not None
        name = follower.stdout.readline().strip()
        while "started" not in follower.stdout.readline():
            pass
        follower.send_signal(signal.SIGINT)
        _, err = follower.communicate(timeout=60)
    finally:
        follower.kill()
        if name:
            cli("cancel", name)
    assert follower.returncode == 130, err
    assert "stopped following; the job keeps running" in err and f"vertexdist cancel {name}" in err, err
    assert "Traceback" not in err


def test_build_templates_dry_run_their_image_and_run_as_a_package_on_the_emulator(
    cli: Any, write_template: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("VERTEX_API_ENDPOINT", raising=False)
    # Without a Docker daemon (with one, the image is built into it and runs as a container job).
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    extra = "build:\n  repository: us-central1-docker.pkg.dev/test-proj/repo\n"
    path = write_template(name="with-build", extra=extra)
    (path.parent / "Dockerfile").write_text("FROM python:3.11\nCOPY train.py /app/\n")
    code, out, err = cli("submit", str(path), "--dry-run")
    assert code == 0, err
    pool = json.loads(out)["trainingPipeline"]["trainingTaskInputs"]["workerPoolSpecs"][0]
    assert pool["containerSpec"]["imageUri"].startswith("us-central1-docker.pkg.dev/test-proj/repo/")
    code, out, err = cli("submit", str(path), "--emulator", "--emulator-data-dir", str(tmp_path / "d"))
    assert code == 0, err
    assert "no Docker daemon: `build` ignored" in err and "SUCCEEDED" in err


def test_dry_run_and_help_never_load_the_sdk(write_template: Any) -> None:
    import subprocess
    import sys

    path = write_template(name="light-dry-run")
    code = (
        "import sys\n"
        "from vertexdist.cli import main\n"
        "for args in (['submit', '--help'], ['status', '--help'], ['submit', sys.argv[1], '--dry-run']):\n"
        "    try:\n"
        "        main.run(args)\n"
        "    except SystemExit as exc:\n"
        "        assert exc.code == 0, (args, exc.code)\n"
        "sdk = ('google.cloud.aiplatform', 'google.cloud.storage')\n"
        "heavy = sorted(m for m in sys.modules if m.startswith(sdk))\n"
        "print('HEAVY', heavy)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "HEAVY []" in result.stdout


@pytest.mark.parametrize("replica_start", ["cold"], indirect=True)  # CONTAINER_COLD
def test_a_bare_id_finds_a_custom_job_too(emu: Emulator, cli: Any, job_client: Any, pool: Any) -> None:
    from google.cloud.aiplatform_v1 import CustomJob

    job = CustomJob(display_name="sdk-made", job_spec={"worker_pool_specs": [pool("print('hi')")]})
    created = job_client.create_custom_job(parent="projects/test-proj/locations/us-central1", custom_job=job)
    bare_id = created.name.rsplit("/", 1)[1]
    code, out, err = cli("status", bare_id, "--project", "test-proj", "--json")
    assert code in (0, 1), err
    assert json.loads(out)["name"] == created.name
    code, _, err = cli("status", "4242", "--project", "test-proj")
    assert code == 1 and "trainingPipelines/4242" in err and "(404)" in err


def test_render_request_and_submit_dry_run_print_the_same_request(cli: Any, write_template: Any) -> None:
    path = write_template("print('same')\n", name="same-request")
    code, dry_run, _ = cli("submit", str(path), "--dry-run")
    assert code == 0
    code, rendered, _ = cli("render", str(path), "--request", "--format", "json")
    assert code == 0
    assert json.loads(dry_run) == json.loads(rendered)
    assert json.loads(rendered)["trainingPipeline"]["labels"]["vertexdist-request"]


def test_procs_per_replica_is_refused_without_the_emulator(cli: Any, write_template: Any) -> None:
    path = write_template(name="procs-without-emulator")
    for extra in (["--dry-run"], []):
        code, out, err = cli("submit", str(path), *extra, "--procs-per-replica", "2")
        assert code == 2 and not out
        assert "--procs-per-replica 2 applies to jobs the emulator runs" in err and "--emulator" in err


@pytest.mark.parametrize("replica_start", ["cold"], indirect=True)  # CONTAINER_COLD
def test_a_gpu_template_gets_as_many_processes_per_replica_on_the_emulator_as_under_local_run(
    emu: Emulator, cli: Any, tmp_path: Path, job_client: Any, pool: Any
) -> None:
    # Two replicas with 2 L4s each: world size 4 under local-run (one process per GPU), and so here.
    folder = tmp_path / "gpu-job"
    folder.mkdir()
    (folder / "train.py").write_text("print('hello')\n")
    path = folder / "job.yaml"
    path.write_text(
        "display_name: gpu-procs\nproject: test-proj\nlocation: us-central1\n"
        "staging_bucket: gs://vd-staging/staging\n"
        "container_uri: us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:latest\n"
        "machine_type: g2-standard-24\naccelerator_type: NVIDIA_L4\naccelerator_count: 2\nreplica_count: 2\n"
        "trainer:\n  script: train.py\n  launcher: torchrun\n"
    )
    code, out, err = cli("local-run", str(path), "--plan", "--json")
    assert code == 0, err
    planned = {r["name"]: r["env"]["VERTEXDIST_NPROC_PER_NODE"] for r in json.loads(out)["replicas"]}
    assert planned == {"workerpool0-0": "2", "workerpool1-0": "2"}
    gpu_pool = pool(
        "import os; print('nproc', os.environ['VERTEXDIST_NPROC_PER_NODE'])",
        machine="g2-standard-24",
        accelerator_type="NVIDIA_L4",
        accelerator_count=2,
    )
    job = job_client.create_custom_job(
        parent="projects/test-proj/locations/us-central1",
        custom_job={"display_name": "gpu-procs", "job_spec": {"worker_pool_specs": [gpu_pool, gpu_pool]}},
    )
    done = emu.store.wait_until(job.name, lambda j: j["state"].endswith(("SUCCEEDED", "FAILED")), 60)
    assert done is not None and done["state"] == "JOB_STATE_SUCCEEDED", done
    logs = {name: log.read_text() for name, log in emu.service.log_files(job.name).items()}
    assert {name: log.split("nproc ")[1].split()[0] for name, log in logs.items()} == planned
