"""How a trainer worker ends (`trainer_pkg.worker.exit_now`, from `trainer_pkg.process_exit`): threads
joined, atexit handlers run, stdio flushed, as a normal exit looks from outside, then `os._exit` (no
interpreter shutdown, where gloo's threads can abort or hang a run that succeeded). A finalizer that only
interpreter shutdown would run never runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

PROGRAM = """
import atexit, io, os, sys, threading, time
from trainer_pkg.process_exit import exit_now

MARKS = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)


def mark(word, write=os.write, fd=MARKS):
    write(fd, (word + "\\n").encode())


class AtShutdown:
    def __del__(self, mark=mark):
        mark("finalizer")


sys.held_until_shutdown = AtShutdown()
atexit.register(mark, "atexit")
threading.Thread(target=lambda: (time.sleep(0.3), mark("thread"))).start()
sys.stdout = io.TextIOWrapper(open(1, "wb", closefd=False))
print("unflushed tail", end="")
exit_now(7)
"""


def test_the_worker_and_the_forking_launcher_end_through_it() -> None:
    from trainer_pkg import process_exit, worker

    assert worker.exit_now is process_exit.exit_now


def test_a_worker_ends_as_a_normal_exit_looks_then_leaves_without_shutdown(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.write_text("")
    env = {**os.environ, "PYTHONPATH": f"{REPO_ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(marks)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 7, done.stderr
    assert sorted(marks.read_text().split()) == ["atexit", "thread"]
    assert done.stdout == "unflushed tail"


NODE_PROGRAM = """
import atexit, json, os, runpy, sys

MARKS = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)


def mark(word, write=os.write, fd=MARKS):
    write(fd, (word + "\\n").encode())


class AtShutdown:
    def __del__(self, mark=mark):
        mark("finalizer")


sys.held_until_shutdown = AtShutdown()
atexit.register(mark, "atexit")
sys.argv = ["trainer_pkg.task"]
runpy.run_module("trainer_pkg.task", run_name="__main__", alter_sys=True)
"""


def test_a_node_launcher_ends_without_interpreter_shutdown(tmp_path: Path) -> None:
    """`python -m trainer_pkg.task` (the node's launcher, which imported torch to fork its workers) ends
    through exit_now as well: tearing down torch's modules at shutdown took 5-14 s per replica on a loaded
    machine, after the job's work was done (bench_docker, bench_local_run)."""
    marks = tmp_path / "marks"
    marks.write_text("")
    # An evaluator replica: the launcher returns at once (nothing to train), through the same exit.
    cluster = {
        "cluster": {"workerpool0": ["a:1"], "workerpool3": ["e:1"]},
        "task": {"type": "workerpool3", "index": 0, "trial": ""},
    }
    env = {
        **os.environ,
        "PYTHONPATH": f"{REPO_ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "CLUSTER_SPEC": json.dumps(cluster),
    }
    done = subprocess.run(
        [sys.executable, "-c", NODE_PROGRAM, str(marks)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "not a training rank" in done.stdout
    assert marks.read_text().split() == ["atexit"]
