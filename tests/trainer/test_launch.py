"""The launcher's pure parts: each worker's environment, the start method, which failure is the cause."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer_pkg.cluster import detect_cluster
from trainer_pkg.config import TrainConfig
from trainer_pkg.errors import TrainerError
from trainer_pkg.launch import Running, _consequence_rank, start_method_from_env, worker_env

SPEC = {
    "cluster": {"workerpool0": ["10.0.0.2:2222"], "workerpool1": ["10.0.0.3:2222", "10.0.0.4:2222"]},
    "task": {"type": "workerpool1", "index": 1},
}


def env_for(local_rank: int, base: dict[str, str] | None = None, cores: int = 8) -> dict[str, str]:
    cluster = detect_cluster(nproc_flag=4, env={"CLUSTER_SPEC": json.dumps(SPEC), "MASTER_PORT": "2223"})
    return worker_env(
        base or {"PATH": "/bin"},
        TrainConfig(epochs=3),
        cluster,
        local_rank=local_rank,
        master_port=2223,
        device="cpu",
        error_file=Path("/tmp/rank.err"),
        parent_pid=42,
        listen_fd=None,
        cores=cores,
    )


def test_worker_gets_torchrun_variables_with_global_ranks() -> None:
    env = env_for(local_rank=3)
    assert {k: env[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK")} == {
        "RANK": "11",  # node 2 of 3, 4 processes each: 2 * 4 + 3
        "LOCAL_RANK": "3",
        "WORLD_SIZE": "12",
        "LOCAL_WORLD_SIZE": "4",
        "GROUP_RANK": "2",
    }
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("10.0.0.2", "2223")
    assert TrainConfig.from_json(env["TRAINER_PKG_CONFIG"]) == TrainConfig(epochs=3)
    assert env["PATH"] == "/bin" and env["TRAINER_PKG_PARENT_PID"] == "42"
    assert "TRAINER_PKG_LISTEN_FD" not in env


def test_threads_split_the_cores_unless_the_user_chose() -> None:
    assert (env_for(0, cores=8)["OMP_NUM_THREADS"], env_for(0, cores=8)["TRAINER_PKG_THREADS"]) == ("2", "2")
    assert env_for(0, cores=2)["TRAINER_PKG_THREADS"] == "1"
    chosen = env_for(0, base={"OMP_NUM_THREADS": "3"}, cores=8)
    assert (chosen["OMP_NUM_THREADS"], chosen["TRAINER_PKG_THREADS"]) == ("3", "3")


@pytest.mark.parametrize(("value", "method"), [("fork", "fork"), ("exec", "exec")])
def test_start_method(value: str, method: str) -> None:
    assert start_method_from_env({"TRAINER_PKG_START_METHOD": value}) == method


def test_unknown_start_method_is_named() -> None:
    with pytest.raises(TrainerError, match="TRAINER_PKG_START_METHOD='spawn'"):
        start_method_from_env({"TRAINER_PKG_START_METHOD": "spawn"})


def test_the_rank_that_lost_its_peer_is_not_the_cause(tmp_path: Path) -> None:
    lost = tmp_path / "lost.err"
    lost.write_text("RuntimeError: [pair.cc:553] Connection closed by peer [127.0.0.1]:4242\n")
    own = tmp_path / "own.err"
    own.write_text("data.csv:3: column 'a': 'x' is not a number\n")
    lost_peer = Running(0, 0, 1, lost, status=1)
    killed = Running(1, 1, 2, tmp_path / "none.err", status=-9)
    failed_itself = Running(1, 1, 2, own, status=1)
    assert min([lost_peer, killed], key=_consequence_rank) is killed
    assert min([lost_peer, failed_itself], key=_consequence_rank) is failed_itself
