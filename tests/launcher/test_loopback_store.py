"""A local torchrun job listens on loopback only: its rendezvous store (torch's TCPStore, which on its own
listens on every interface), read from /proc/net/tcp{,6} while the job runs. The workers need no torch here:
the store is the agent's, and they find it up when they start (gloo's own sockets bind the address the host
name resolves to: docs/commands/local-run.md, "What a local job listens on")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vertexdist.shipped import LAUNCHER_DIR

pytestmark = pytest.mark.integration

# Local rank 0 lists the LISTEN sockets of the launcher's whole process tree.
SCRIPT = """\
import json, os, sys

def tree(root):
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        found.add(pid)
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                todo += [int(c) for c in open(f"/proc/{pid}/task/{task}/children").read().split()]
            except OSError:
                pass
    return found

def listeners(pids):
    inodes = set()
    for pid in pids:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    found = []
    for table in ("tcp", "tcp6"):
        for line in open(f"/proc/net/{table}").read().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                found.append([table, fields[1]])
    return found

if os.environ["LOCAL_RANK"] == "0":
    launcher = int(os.environ["VERTEXDIST_LAUNCHER_PID"])
    with open(sys.argv[1], "w") as out:
        json.dump(listeners(tree(launcher)), out)
"""

ALL_INTERFACES = {"00000000", "00000000000000000000000000000000"}


def test_a_local_torchrun_job_listens_on_loopback_only(tmp_path: Path) -> None:
    script = tmp_path / "listeners.py"
    script.write_text(SCRIPT)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "CLUSTER_SPEC")
        and not k.startswith(("TORCHELASTIC_", "VERTEXDIST_"))
    }
    env["PYTHONPATH"] = str(LAUNCHER_DIR.parent)
    env["TMPDIR"] = str(tmp_path)  # torchrun's torchelastic_* folder stays in the test's
    out = tmp_path / "listeners.json"
    launcher = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import os, runpy, sys; os.environ['VERTEXDIST_LAUNCHER_PID'] = str(os.getpid());"
            f" sys.argv = ['vertexdist_launcher', 'torchrun', '--nproc-per-node', '2', '--', {str(script)!r},"
            f" {str(out)!r}]; runpy.run_module('vertexdist_launcher', run_name='__main__')",
        ],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output, _ = launcher.communicate(timeout=120)
    assert launcher.returncode == 0, output
    found = json.loads(out.read_text())
    store = [(table, address) for table, address in found if address.startswith("0100007F:")]
    assert store, f"no loopback listener found at all: {found}"  # the rendezvous store is there
    wide = [(table, address) for table, address in found if address.split(":")[0] in ALL_INTERFACES]
    assert wide == [], f"listening on all interfaces: {wide}\n{output}"


# `launcher: python` user code: plain init_process_group from env://, nothing of vertexdist's. Rank 0
# (the chief, run as the local plan runs it) lists its process tree's listeners once the group is up.
DDP_SCRIPT = (
    SCRIPT.split("if os.environ")[0]
    + """
import torch, torch.distributed as dist
dist.init_process_group("gloo")
total = torch.ones(1) * (dist.get_rank() + 1)
dist.all_reduce(total)
assert total.item() == 3, total
if dist.get_rank() == 0:
    with open(sys.argv[1], "w") as out:
        json.dump(listeners(tree(os.getpid())), out)
dist.barrier()
dist.destroy_process_group()
"""
)


def test_a_local_python_launcher_ddp_job_listens_on_loopback_only(tmp_path: Path) -> None:
    from vertexdist.local.ports import reserved_ports

    script = tmp_path / "ddp.py"
    script.write_text(DDP_SCRIPT)
    out = tmp_path / "listeners.json"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHELASTIC_", "VERTEXDIST_"))}
    with reserved_ports(1) as (port,):
        pass  # free again for the chief's store
    env = {**base, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": "2"}
    env["PYTHONPATH"] = str(LAUNCHER_DIR.parent)
    chief_argv = [sys.executable, "-m", "vertexdist_launcher.rendezvous_store", str(script), str(out)]
    ranks = [
        subprocess.Popen(
            argv,
            env={**env, "RANK": str(rank)},
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for rank, argv in enumerate([chief_argv, [sys.executable, str(script), str(out)]])
    ]
    outputs = [p.communicate(timeout=120)[0].decode() for p in ranks]
    assert [p.returncode for p in ranks] == [0, 0], outputs
    found = json.loads(out.read_text())
    port_hex = f"{port:04X}"
    assert ["tcp", f"0100007F:{port_hex}"] in found, f"the store is not on loopback: {found}"
    wide = [(table, address) for table, address in found if address.split(":")[0] in ALL_INTERFACES]
    assert wide == [], f"listening on all interfaces: {wide}\n{outputs[0]}"


@pytest.mark.parametrize(
    "env",
    [
        {"MASTER_ADDR": "10.128.0.7", "MASTER_PORT": "2222"},  # real Vertex: the chief's VM, left to torch
        {"MASTER_ADDR": "workerpool0-0", "MASTER_PORT": "2222"},  # --docker: each replica has its own host
        {
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "2222",
            "TORCHELASTIC_USE_AGENT_STORE": "False",
        },  # opt-out
        {"MASTER_ADDR": "127.0.0.1"},  # no port: not a distributed job
    ],
)
def test_the_chief_holds_no_store_off_loopback_or_when_the_job_says_so(env: dict[str, str]) -> None:
    from vertexdist.shipped.vertexdist_launcher.rendezvous_store import _held, hold_for_user_code

    assert hold_for_user_code(env) == {} and _held == []
