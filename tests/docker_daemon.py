"""The test suite's private Docker daemon: `make test` runs pytest through this script.

    python tests/docker_daemon.py -- COMMAND...

Where no Docker daemon answers and this runs as root, it starts Debian's `dockerd` (package `docker.io`) with
its socket, state and image store under one fixed folder (`/var/cache/vertexdist-test-dockerd`, or
VERTEXDIST_TEST_DOCKERD_DIR), so the images the tests build stay cached from one run to the next; runs
COMMAND with DOCKER_HOST pointing at it; and stops the daemon when COMMAND ends, fails or is interrupted.
Where a daemon answers already it is used as it is; where none answers and this is not root (or dockerd is not
installed), COMMAND runs without one and the daemon's tests skip, saying why.

Two runs at once share the daemon: each holds a shared lock on `users.lock` while its command runs, and the
last one out stops it. vertexdist itself never starts a daemon; this is the test suite's, for this machine.

The flags are the ones that work inside these machines' VMs: no default bridge and no iptables (the jobs'
user-defined networks still give name resolution between containers), overlay2 where the kernel allows it and
vfs otherwise.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_DIR = Path("/var/cache/vertexdist-test-dockerd")
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
_STARTED: list[subprocess.Popen[bytes]] = []


def _say(line: str) -> None:
    print(f"docker_daemon: {line}", file=sys.stderr, flush=True)


def daemon_answers(env: dict[str, str]) -> bool:
    """`docker version` reaches a server (DOCKER_HOST in `env`, or the default socket)."""
    if shutil.which("docker") is None:
        return False
    try:
        result = subprocess.run(
            ["docker", "version", "--format", "{{.Server.Version}}"],
            capture_output=True,
            text=True,
            timeout=10,
            env=env,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0 and bool(result.stdout.strip())


def dockerd_argv(folder: Path, storage_driver: str) -> list[str]:
    return [
        "dockerd",
        f"--storage-driver={storage_driver}",
        "--bridge=none",
        "--iptables=false",
        "--ip6tables=false",
        "--data-root",
        str(folder / "data"),
        "--exec-root",
        str(folder / "exec"),
        "--pidfile",
        str(folder / "dockerd.pid"),
        "-H",
        f"unix://{folder / 'docker.sock'}",
    ]


def _pid(folder: Path) -> int | None:
    try:
        return int((folder / "dockerd.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start(folder: Path, env: dict[str, str]) -> bool:
    """Start the private daemon (or find it running); True once it answers."""
    for driver in ("overlay2", "vfs"):
        log = open(folder / "dockerd.log", "ab")  # noqa: SIM115 - handed to the daemon
        _say(f"starting dockerd ({driver}) under {folder}; its log: {folder / 'dockerd.log'}")
        daemon = subprocess.Popen(
            dockerd_argv(folder, driver),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in the terminal reaches the tests, not the daemon
        )
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and daemon.poll() is None:
            if daemon_answers(env):
                _STARTED.append(daemon)  # reaped by stop()
                return True
            time.sleep(0.2)
        if daemon.poll() is None:
            daemon.terminate()
            daemon.wait(STOP_TIMEOUT_S)
        _say(f"dockerd ({driver}) did not answer (exit {daemon.returncode})")
    return False


def prepare_standin(env: dict[str, str]) -> None:
    """The offline base image the container tests build on (vertexdist.container.standin), made before the
    tests start so that no test's timeout includes it: minutes on a first run, nothing once cached."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "vertexdist.container.standin"], env=env, check=False)
    spent = time.monotonic() - started
    if done.returncode != 0:
        _say(f"the stand-in base image could not be made (exit {done.returncode}); the container tests fail")
    elif spent > 5:
        _say(f"the stand-in base image is made ({spent:.0f} s, once per daemon folder)")


def stop(folder: Path) -> None:
    pid = _pid(folder)
    if pid is None or not _alive(pid):
        return
    _say(f"stopping dockerd (pid {pid})")
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
    for daemon in _STARTED:  # this process's child: reap it, so no zombie stays behind
        if daemon.pid == pid:
            daemon.wait(STOP_TIMEOUT_S)


def run(command: list[str]) -> int:
    env = dict(os.environ)
    folder = Path(env.get("VERTEXDIST_TEST_DOCKERD_DIR", str(DEFAULT_DIR)))
    if daemon_answers(env):
        _say("a Docker daemon answers; the tests use it")
        return subprocess.call(command, env=env)
    if os.geteuid() != 0 or shutil.which("dockerd") is None:
        why = "not root" if os.geteuid() != 0 else "dockerd is not installed (apt-get install docker.io)"
        _say(f"no Docker daemon answers and none is started here ({why}): the daemon's tests skip")
        return subprocess.call(command, env=env)
    folder.mkdir(parents=True, exist_ok=True)
    env["DOCKER_HOST"] = f"unix://{folder / 'docker.sock'}"
    users = open(folder / "users.lock", "a+b")  # noqa: SIM115 - held for the whole run
    fcntl.flock(users, fcntl.LOCK_SH)
    try:
        with open(folder / "start.lock", "a+b") as starting:
            fcntl.flock(starting, fcntl.LOCK_EX)
            if not daemon_answers(env) and not start(folder, env):
                _say("the private daemon did not start: the daemon's tests skip")
                del env["DOCKER_HOST"]
            else:
                prepare_standin(env)
        child = subprocess.Popen(command, env=env)
        # The terminal's Ctrl-C reaches the child (same process group); this process waits for it to end.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, lambda _sig, _frame: child.terminate())
        return child.wait()
    finally:
        fcntl.flock(users, fcntl.LOCK_UN)
        try:
            fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the last one out stops the daemon
        except BlockingIOError:
            _say("another run still uses the private daemon; it stops it")
        else:
            stop(folder)
        users.close()


def main(argv: list[str]) -> int:
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    return run(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
