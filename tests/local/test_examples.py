"""The user scripts of examples/ (torchrun-style DDP and FSDP2, no vertexdist in them) through `local-run`,
2 replicas x 2 processes each: real processes, real torch.distributed over gloo; and a worker killed
inside one replica ends the whole job fast, with nothing left running."""

from __future__ import annotations

import json
import os
import re
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

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DONE = re.compile(
    r"^rank (?P<rank>\d+)/(?P<world>\d+) \(node (?P<node>\d+), "
    r"local rank (?P<local>\d+)/(?P<local_world>\d+)\): done, (?P<rest>.*)$"
)


def done_lines(logs: Sequence[Path]) -> list[dict[str, Any]]:
    """Every rank's last line, with the replica whose log it is in."""
    found = []
    for log in logs:
        for line in log.read_text().splitlines():
            match = DONE.match(line)
            if match:
                found.append({**match.groupdict(), "replica": log.stem})
    return found


def check_ranks(ranks: list[dict[str, Any]]) -> None:
    """4 distinct global ranks in a world of 4, local ranks 0 and 1 on each of the 2 replicas."""
    assert sorted(int(r["rank"]) for r in ranks) == [0, 1, 2, 3]
    assert {(r["world"], r["local_world"]) for r in ranks} == {("4", "2")}
    by_replica: dict[str, set[str]] = {}
    for r in ranks:
        by_replica.setdefault(r["replica"], set()).add(r["local"])
    assert by_replica == {"workerpool0-0": {"0", "1"}, "workerpool1-0": {"0", "1"}}
    assert {(r["replica"], r["node"]) for r in ranks} == {("workerpool0-0", "0"), ("workerpool1-0", "1")}


def check_ddp(logs: Sequence[Path], gcs_root: Path) -> None:
    ranks = done_lines(logs)
    check_ranks(ranks)
    assert len({r["rest"] for r in ranks}) == 1, "the ranks ended with different parameters"
    assert [p.name for p in gcs_root.rglob("*.pt")] == ["model.pt"]
    saved = [
        line for log in logs for line in log.read_text().splitlines() if line.startswith("Saved the model")
    ]
    assert len(saved) == 1


HOLDS = re.compile(r"holds (\d+) of (\d+) parameters, full parameters sha256 (\w+)")


def check_fsdp(logs: Sequence[Path], gcs_root: Path) -> None:
    ranks = done_lines(logs)
    check_ranks(ranks)
    shares = [HOLDS.match(r["rest"]) for r in ranks]
    assert all(shares)
    held = [int(m.group(1)) for m in shares if m]
    total = {int(m.group(2)) for m in shares if m}.pop()
    assert all(0.2 < h / total < 0.3 for h in held), f"not a quarter each: {held} of {total}"
    assert sum(held) >= total
    assert len({m.group(3) for m in shares if m}) == 1, "the shards do not make one model"
    [checkpoint] = {p.parent for p in gcs_root.rglob("*.distcp")}
    assert sorted(p.name for p in checkpoint.iterdir()) == [
        ".metadata",
        "__0_0.distcp",
        "__1_0.distcp",
        "__2_0.distcp",
        "__3_0.distcp",
    ]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One working folder for the module, so the installed-package cache is shared between runs."""
    return tmp_path_factory.mktemp("examples")


def local_run(template: Path, out: Path, *flags: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vertexdist", "local-run", str(template), "--out", str(out), *flags],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=170,
    )


def test_the_ddp_example_runs_one_process_per_gpu_of_its_template(workdir: Path, tmp_path: Path) -> None:
    # No --procs-per-replica: the template's 2 GPUs per node make 2 processes per replica, as on Vertex.
    result = local_run(EXAMPLES / "ddp" / "job.yaml", tmp_path / "run", cwd=workdir)
    assert result.returncode == 0, result.stdout + result.stderr
    check_ddp(sorted((tmp_path / "run" / "logs").glob("workerpool*.log")), tmp_path / "run" / "gcs")


def test_the_fsdp_example_shards_the_model_over_four_processes(workdir: Path, tmp_path: Path) -> None:
    result = local_run(
        EXAMPLES / "fsdp" / "job.yaml", tmp_path / "run", "--procs-per-replica", "2", cwd=workdir
    )
    assert result.returncode == 0, result.stdout + result.stderr
    check_fsdp(sorted((tmp_path / "run" / "logs").glob("workerpool*.log")), tmp_path / "run" / "gcs")


def test_procs_per_replica_is_a_usage_error_for_code_run_once_per_machine(
    workdir: Path, tmp_path: Path
) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('hello')\n")
    doc = yaml.safe_load((EXAMPLES / "ddp" / "job.yaml").read_text())
    doc["trainer"] = {"script": str(script)}  # launcher: python, the default
    template = tmp_path / "job.yaml"
    template.write_text(yaml.safe_dump(doc))
    result = local_run(template, tmp_path / "run", "--procs-per-replica", "2", cwd=workdir)
    assert result.returncode == 2
    assert "`launcher: python`, once per machine" in result.stderr and "Traceback" not in result.stderr
    assert "hint: set trainer.launcher: torchrun" in result.stderr
    assert not (tmp_path / "run").exists()


# Each rank records itself, then all-reduces until its job is stopped.
LOOPER = """\
import json, os, pathlib, sys, time
import torch, torch.distributed as dist
dist.init_process_group("gloo")
record = {"pid": os.getpid(), "pgid": os.getpgid(0), "rank": dist.get_rank()}
pathlib.Path(sys.argv[1], f"rank{dist.get_rank()}.json").write_text(json.dumps(record))
value = torch.zeros(1)
while True:
    dist.all_reduce(value)
    time.sleep(0.05)
"""


def test_a_worker_killed_inside_a_replica_ends_the_job_within_30s_leaving_nothing(
    workdir: Path, tmp_path: Path, kit: Any
) -> None:
    records = tmp_path / "records"
    records.mkdir()
    (tmp_path / "looper.py").write_text(LOOPER)
    doc = yaml.safe_load((EXAMPLES / "ddp" / "job.yaml").read_text())
    doc["trainer"] = {"script": "looper.py", "launcher": "torchrun", "args": [str(records)]}
    doc["restart_job_on_worker_restart"] = False  # else the job restarts, as on Vertex
    template = tmp_path / "job.yaml"
    template.write_text(yaml.safe_dump(doc))
    out = tmp_path / "run"
    cli = subprocess.Popen(
        [sys.executable, "-m", "vertexdist", "local-run", str(template), "--out", str(out), "--json"],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert kit.wait_for(lambda: len(list(records.glob("*.json"))) == 4, timeout=120), (
            "ranks did not start"
        )
        time.sleep(0.2)
        ranks = {json.loads(p.read_text())["rank"]: json.loads(p.read_text()) for p in records.glob("*.json")}
        victim = ranks[3]  # workerpool1-0, local rank 1
        killed_at = time.monotonic()
        os.kill(victim["pid"], signal.SIGKILL)
        stdout, stderr = cli.communicate(timeout=60)
        ended_in = time.monotonic() - killed_at
    finally:
        if cli.poll() is None:  # cancel it as Ctrl-C would, so that it stops what it started
            cli.send_signal(signal.SIGINT)
            cli.communicate(timeout=60)
    assert cli.returncode == 1, stderr
    assert ended_in < 30, f"the job took {ended_in:.1f}s to end"
    summary = json.loads(stdout.splitlines()[-1])
    assert summary["state"] == "JOB_STATE_FAILED"
    last = (out / "logs" / "workerpool1-0.log").read_text().splitlines()[-1]
    assert last.startswith("vertexdist_launcher: workerpool1-0 failed: local rank 1 (global rank 3)")
    assert "was killed by SIGKILL" in last
    replicas = {r["name"]: r for r in summary["replicas"]}
    pids = [r["pid"] for r in replicas.values()] + [r["pid"] for r in ranks.values()]
    assert kit.wait_for(lambda: not any(kit.process_alive(p) for p in pids), timeout=10), "processes left"
    groups = {r["pgid"] for r in ranks.values()} | {r["pid"] for r in replicas.values()}
    assert not {g: kit.group_members(g) for g in groups if kit.group_members(g)}
