"""`vertexdist local-run` end to end, as a user runs it: real CLI processes, real replicas, real signals.

The tests of a job's semantics (the cluster its replicas see, exit codes, outputs, signals, the timeout, two
runs at once) run cold and with `--warm` (`replica_start`, tests/conftest.py: the session's warm pool must
fork their replicas); the plan, flag and template checks start no replica and run once.
"""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.integration


def _template(
    path: Path,
    *,
    replicas: int = 2,
    args: Sequence[str] = (),
    reducers: int = 0,
    trainer: dict[str, Any] | None = None,
    **extra: Any,
) -> Path:
    doc: dict[str, Any] = {
        "display_name": "local-run-test",
        "project": "my-project",
        "staging_bucket": "gs://my-bucket/staging",
        "trainer": trainer
        or {"script": str(Path(__file__).with_name("standin_replica.py")), "args": list(args)},
        "replica_count": replicas,
        **extra,
    }
    if reducers:
        doc.update(
            machine_type="a2-highgpu-1g",
            accelerator_type="NVIDIA_TESLA_A100",
            accelerator_count=1,
            reduction_server_count=reducers,
        )
    path.write_text(yaml.safe_dump(doc))
    return path


def _cli(*args: str, cwd: Path, start: Any = None) -> list[str]:
    """`vertexdist local-run ARGS`; with `start` (replica_start) as it starts replicas (`--warm`)."""
    return [*(start.local_run() if start else [sys.executable, "-m", "vertexdist", "local-run"]), *args]


def _run(*args: str, cwd: Path, timeout: float = 90, start: Any = None) -> subprocess.CompletedProcess[str]:
    argv = _cli(*args, cwd=cwd, start=start)
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One working folder for the module, so the installed-package cache is shared between runs."""
    return tmp_path_factory.mktemp("local-run")


def test_plan_prints_every_replica_and_starts_nothing(workdir: Path, tmp_path: Path, kit: Any) -> None:
    record = tmp_path / "records"
    script = str(Path(__file__).with_name("standin_replica.py"))
    trainer = {"script": script, "args": ["--record", str(record)], "env": {"API_TOKEN": "hunter2"}}
    template = _template(tmp_path / "job.yaml", replicas=3, reducers=1, trainer=trainer)
    out = tmp_path / "run"
    result = _run(str(template), "--plan", "--json", "--out", str(out), cwd=workdir)
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    names = [r["name"] for r in plan["replicas"]]
    assert names == ["workerpool0-0", "workerpool1-0", "workerpool1-1", "workerpool2-0"]
    chief = plan["replicas"][0]
    # The chief holds torch's rendezvous store on loopback first (vertexdist_launcher.rendezvous_store).
    assert chief["argv"][1:5] == [
        "-m",
        "vertexdist_launcher.rendezvous_store",
        "-m",
        "aiplatform_custom_trainer_script.task",
    ]
    assert chief["env"]["API_TOKEN"] == "********"
    assert "hunter2" not in result.stdout
    assert chief["log"] == str(out / "logs" / "workerpool0-0.log")
    assert not out.exists() and not record.exists()


def test_replicas_agree_on_the_cluster_as_the_trainer_reads_it(
    workdir: Path, tmp_path: Path, replica_start: Any
) -> None:
    """Each replica runs `python -m trainer_pkg.cluster` from the installed package: what does it see?"""
    spec = importlib.util.find_spec("trainer_pkg")
    assert spec is not None and spec.submodule_search_locations
    package = Path(next(iter(spec.submodule_search_locations)))
    template = _template(
        tmp_path / "job.yaml",
        replicas=3,
        reducers=1,
        trainer={"package": str(package), "module": "trainer_pkg.cluster"},
    )
    out = tmp_path / "run"
    result = _run(
        str(template), "--out", str(out), "--procs-per-replica", "2", cwd=workdir, start=replica_start
    )
    assert result.returncode == 0, result.stdout + result.stderr
    seen = {}
    for log in sorted((out / "logs").glob("workerpool[01]-*.log")):
        seen[log.stem] = json.loads(log.read_text().strip().splitlines()[-1])
    assert set(seen) == {"workerpool0-0", "workerpool1-0", "workerpool1-1"}
    assert sorted(s["node_rank"] for s in seen.values()) == [0, 1, 2]
    assert {s["num_nodes"] for s in seen.values()} == {3}
    assert {s["world_size"] for s in seen.values()} == {6}
    assert {s["nproc_per_node"] for s in seen.values()} == {2}
    assert len({(s["master_addr"], s["master_port"]) for s in seen.values()}) == 1
    assert seen["workerpool0-0"]["role"] == "chief"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["state"] == "JOB_STATE_SUCCEEDED"
    # The reduction server's stand-in ran and was stopped at the job's end. These trainers print and exit
    # within milliseconds (warm, faster than the stand-in is forked after them), so it may be stopped before
    # it says that it holds its port; where it said something, it is that.
    (standin,) = (r for r in summary["replicas"] if r["name"] == "workerpool2-0")
    assert standin["pid"] and standin["state"] == "STOPPED", standin
    said = (out / "logs" / "workerpool2-0.log").read_text()
    assert not said or "reduction-server stand-in holding" in said, said
    plan = json.loads((out / "plan.json").read_text())
    assert [r["name"] for r in plan["replicas"]] == [r["name"] for r in summary["replicas"]]


def test_a_failing_replica_fails_the_run_and_is_named_with_its_last_lines(
    workdir: Path, tmp_path: Path, replica_start: Any
) -> None:
    template = _template(
        tmp_path / "job.yaml",
        replicas=3,
        args=["--record", str(tmp_path / "r"), "--sleep", "30", "--fail", "workerpool1-1:5"],
    )
    (tmp_path / "r").mkdir()
    started = time.monotonic()
    result = _run(str(template), "--out", str(tmp_path / "run"), cwd=workdir, start=replica_start)
    assert time.monotonic() - started < 25
    assert result.returncode == 1
    assert "error: The replica workerpool1-1 exited with a non-zero status of 5." in result.stderr
    assert "workerpool1-1 failing on purpose" in result.stderr  # the tail of its log
    assert "workerpool1-1 | workerpool1-1 failing on purpose" in result.stdout  # prefixed lines without a TTY


def test_json_events_and_the_model_lands_in_the_run_folder(
    workdir: Path, tmp_path: Path, replica_start: Any
) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import os, pathlib\n"
        "root = os.environ['VERTEXDIST_GCS_ROOT']\n"
        "uri = os.environ['AIP_MODEL_DIR']\n"
        "path = pathlib.Path(root, uri.removeprefix('gs://'), 'model.txt')\n"
        "if os.environ.get('RANK', '0') == '0':\n"
        "    path.parent.mkdir(parents=True, exist_ok=True); path.write_text('weights')\n"
        "print('saved', uri)\n"
    )
    template = _template(tmp_path / "job.yaml", replicas=2, trainer={"script": str(script)})
    out = tmp_path / "run"
    result = _run(str(template), "--out", str(out), "--json", cwd=workdir, start=replica_start)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    kinds = {e["event"] for e in events}
    assert {"job", "replica", "log", "summary"} <= kinds
    job_states = [e["state"] for e in events if e["event"] == "job"]
    assert job_states[0] == "JOB_STATE_RUNNING" and job_states[-1] == "JOB_STATE_SUCCEEDED"
    assert events[-1]["event"] == "summary" and events[-1]["state"] == "JOB_STATE_SUCCEEDED"
    # The job's own output folder: <base>/<job id>, in the run's own gs:// namespace.
    job_id = events[-1]["job_id"]
    output = f"my-bucket/staging/vertexdist/output/local-run-test/{job_id}"
    assert events[-1]["output_dir"] == f"gs://{output}"
    assert events[-1]["output_path"] == str(out / "gcs" / output)
    assert any(e["event"] == "log" and e["line"] == f"saved gs://{output}/model/" for e in events)
    assert (out / "gcs" / output / "model" / "model.txt").read_text() == "weights"
    assert (out / "logs" / "workerpool1-0.log").is_file()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_local_run_stops_every_replica_within_10s(
    workdir: Path, tmp_path: Path, kit: Any, sig: signal.Signals, replica_start: Any
) -> None:
    record = tmp_path / "records"
    record.mkdir()
    template = _template(
        tmp_path / "job.yaml",
        replicas=2,
        reducers=1,
        args=["--record", str(record), "--sleep", "60", "--spawn", "2"],
    )
    proc = subprocess.Popen(
        _cli(str(template), "--out", str(tmp_path / "run"), cwd=workdir, start=replica_start),
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert kit.wait_for(lambda: len(kit.records(record)) == 2, timeout=30), proc.stderr
        started = time.monotonic()
        proc.send_signal(sig)
        proc.wait(timeout=10)
        assert time.monotonic() - started < 10
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    kit.assert_no_orphans(kit.records(record))
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["state"] == "JOB_STATE_CANCELLED"
    assert all(r["exit_code"] is not None for r in summary["replicas"])
    kit.assert_no_orphans(kit.records(record), [r["pid"] for r in summary["replicas"]])


def test_timeout_flag_stops_the_job(workdir: Path, tmp_path: Path, kit: Any, replica_start: Any) -> None:
    record = tmp_path / "records"
    record.mkdir()
    template = _template(
        tmp_path / "job.yaml", replicas=2, args=["--record", str(record), "--sleep", "60", "--spawn", "1"]
    )
    argv = (str(template), "--out", str(tmp_path / "run"), "--timeout", "3s")
    result = _run(*argv, cwd=workdir, start=replica_start)
    assert result.returncode == 1
    assert "error: the job ran past its timeout of 3s" in result.stderr
    kit.assert_no_orphans(kit.records(record))


def test_two_local_runs_at_once_both_succeed(workdir: Path, tmp_path: Path, replica_start: Any) -> None:
    runs = []
    for i in range(2):
        record = tmp_path / f"records{i}"
        record.mkdir()
        template = _template(
            tmp_path / f"job{i}.yaml", replicas=3, args=["--record", str(record), "--bind", "--sleep", "2"]
        )
        runs.append(
            subprocess.Popen(
                _cli(str(template), "--out", str(tmp_path / f"run{i}"), cwd=workdir, start=replica_start),
                cwd=workdir,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    outputs = [run.communicate(timeout=90)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    ports = []
    for i in range(2):
        spec = json.loads((tmp_path / f"run{i}" / "job.json").read_text())
        assert spec["workerPoolSpecs"][1]["replicaCount"] == 2
        env = json.loads((tmp_path / f"records{i}" / "workerpool0-0.json").read_text())["env"]
        cluster = json.loads(env["CLUSTER_SPEC"])["cluster"]
        ports += [address for addresses in cluster.values() for address in addresses]
    assert len(ports) == len(set(ports)) == 6


def test_bad_template_is_one_error_line(workdir: Path, tmp_path: Path) -> None:
    template = tmp_path / "bad.yaml"
    template.write_text(
        "display_name: x\nproject: my-project\nstaging_bucket: gs://my-bucket/s\nreplica_cuont: 2\n"
    )
    result = _run(str(template), cwd=workdir)
    assert result.returncode == 1
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    assert "replica_cuont" in result.stderr


def test_local_run_module_imports_no_torch_and_no_cloud_sdk() -> None:
    code = (
        "import sys, vertexdist.cli.local_run, vertexdist.local\n"
        "heavy = ('torch', 'google.cloud.aiplatform', 'google.cloud.storage')\n"
        "loaded = [m for m in sys.modules if m.startswith(heavy)]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--timeout", "soon"], "error: --timeout: 'soon' is not a duration; use whole seconds"),
        (["--timeout", "0"], "error: --timeout: a duration must be positive, got '0'"),
        (["--timeout", "1.5h"], "error: --timeout: '1.5h' is not a duration"),
        (["--out", "{file}"], "is a file, not a folder"),
        (["--out", "{file}/run"], "error: cannot create the run folder"),
    ],
)
def test_bad_flags_are_usage_errors_without_a_traceback(
    workdir: Path, tmp_path: Path, flags: list[str], message: str
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder\n")
    template = _template(tmp_path / "job.yaml", replicas=1)
    result = _run(str(template), *(flag.format(file=a_file) for flag in flags), cwd=workdir)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(("extra", "shown"), [({}, "timeout none "), ({"timeout": "90m"}, "timeout 5400s ")])
def test_plan_shows_the_timeout_readably(
    workdir: Path, tmp_path: Path, extra: dict[str, Any], shown: str
) -> None:
    template = _template(tmp_path / "job.yaml", replicas=1, **extra)
    result = _run(str(template), "--plan", cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1].startswith(shown)


def test_the_timeout_flag_takes_what_a_template_takes(workdir: Path, tmp_path: Path) -> None:
    # One duration parser: `1h30m` works on the command line as it does in `timeout:` of a template.
    template = _template(tmp_path / "job.yaml", replicas=1)
    result = _run(str(template), "--plan", "--timeout", "1h30m", cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1].startswith("timeout 5400s ")
