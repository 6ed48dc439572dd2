"""`vertexdist shell JOB`: a shell in a live replica's environment.

A local or emulator job's replica is a process group on this machine, started with the job's run folder's
`health` folder in VERTEXDIST_HEALTH_DIR and its task in CLUSTER_SPEC: its leader is found among the
caller's own processes (`/proc/PID/environ`) by the job's private token (the run folder's 0600 `job-token`,
also in every replica's VERTEXDIST_JOB_TOKEN), never another user's. The shell gets its variables (less
vertexdist's own, and less every loader or shell start-up variable, which come from the caller), its working
folder, and, where the replica runs in a mount namespace of its own for `/gcs` (`local.gcs_namespace`), that
namespace too, entered with `nsenter` (as the same user: `--preserve-credentials`). A Vertex replica's shell
is Vertex's own: the job's `webAccessUris`, when the template sets `enable_web_access: true`.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vertexdist.local.watchdog import JOB_TOKEN_FILE, TOKEN_VARIABLE

HEALTH_VARIABLE = "VERTEXDIST_HEALTH_DIR"
# What the shell does not take from the replica: the watcher's folder and fault plan (a script run in the
# shell must not write the ranks' heartbeats), and the job's watchdog token (its processes are not the job's).
DROPPED = ("VERTEXDIST_HEALTH_DIR", "VERTEXDIST_HEALTH_FAULTS", "VERTEXDIST_JOB_TOKEN")
KEPT_FROM_CALLER = ("TERM", "COLORTERM", "LANG")
# Never taken from the replica: what the dynamic loader (LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT, ...) or a
# shell (BASH_ENV, ENV, HOME's start-up files, exported functions, PROMPT_COMMAND, ...) runs or reads as it
# starts; the caller's own values are used.
STARTUP_PREFIXES = ("LD_", "BASH_FUNC_", "DYLD_")
STARTUP_VARIABLES = frozenset(
    {
        "BASH_ENV",
        "ENV",
        "HOME",
        "ZDOTDIR",
        "PROMPT_COMMAND",
        "PS0",
        "PS1",
        "PS2",
        "PS4",
        "SHELLOPTS",
        "BASHOPTS",
        "IFS",
        "CDPATH",
        "GLOBIGNORE",
        "INPUTRC",
        "HISTFILE",
        "GCONV_PATH",
        "LOCPATH",
        "NLSPATH",
        "MALLOC_CHECK_",
        "HOSTALIASES",
        "RESOLV_HOST_CONF",
        "PYTHONSTARTUP",
        "SHELL",
    }
)
SHELL_MARK = "VERTEXDIST_SHELL"  # the replica the shell is in (for a prompt)
PROC = Path("/proc")


@dataclass(frozen=True)
class Replica:
    """A replica's running leader: its pid, variables, working folder, and its namespaces against ours."""

    pid: int
    env: dict[str, str]
    cwd: str
    own_mounts: bool  # its mount namespace is not ours (/gcs mapped)
    own_users: bool  # nor its user namespace (made for the mapping by a user other than root)


def parse_environ(data: bytes) -> dict[str, str]:
    """`/proc/PID/environ`: NUL-separated NAME=VALUE."""
    env = {}
    for item in data.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep and name:
            env[name.decode(errors="replace")] = value.decode(errors="replace")
    return env


def task_of(env: Mapping[str, str]) -> str | None:
    """The replica `env` belongs to, from CLUSTER_SPEC (`workerpool1-0`), or None."""
    with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
        task = json.loads(env.get("CLUSTER_SPEC", ""))["task"]
        return f"{task['type']}-{int(task['index'])}"
    return None


def _ppid(stat: str) -> int:
    return int(stat.rsplit(")", 1)[1].split()[1])


def job_token(health_dir: Path) -> str | None:
    """The job's private token, from its run folder's `job-token` (the runner writes it 0600), only where the
    caller owns that file and no one else may read or write it; None otherwise."""
    path = Path(health_dir).parent / JOB_TOKEN_FILE
    with contextlib.suppress(OSError, UnicodeDecodeError):
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        try:
            info = os.fstat(fd)
            if info.st_uid != os.getuid() or info.st_mode & 0o077:
                return None
            token = os.read(fd, 256).decode().strip()
        finally:
            os.close(fd)
        return token or None
    return None


def _owner(entry: Path) -> int:
    return entry.stat().st_uid


def find_replica(health_dir: Path, replica: str, proc: Path = PROC) -> Replica | None:
    """The outermost running process of `replica` of the job whose health folder is `health_dir`: only a
    process of the caller's own uid that carries the job's private token (`job_token`), so another user's
    process, or one of the caller's that merely names the job's folder, is never entered."""
    token = job_token(health_dir)
    if token is None:
        return None
    wanted = os.path.realpath(health_dir)
    me = os.getuid()
    found: dict[int, tuple[dict[str, str], int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            if _owner(entry) != me:
                continue
            env = parse_environ((entry / "environ").read_bytes())
            seen = env.get(HEALTH_VARIABLE)
            if (
                seen
                and os.path.realpath(seen) == wanted
                and env.get(TOKEN_VARIABLE) == token
                and task_of(env) == replica
                and _owner(entry) == me  # still the same process's owner after reading it
            ):
                found[int(entry.name)] = (env, _ppid((entry / "stat").read_text()))
    leaders = sorted(pid for pid, (_env, parent) in found.items() if parent not in found)
    for pid in leaders:
        with contextlib.suppress(OSError):
            cwd = os.readlink(proc / str(pid) / "cwd")
            root = os.readlink(proc / str(pid) / "root")  # chrooted for /gcs: the same path inside
            if root != "/" and cwd.startswith(root + "/"):
                cwd = cwd[len(root) :]
            ours, theirs = proc / "self" / "ns", proc / str(pid) / "ns"
            return Replica(
                pid,
                found[pid][0],
                cwd,
                own_mounts=os.readlink(ours / "mnt") != os.readlink(theirs / "mnt"),
                own_users=os.readlink(ours / "user") != os.readlink(theirs / "user"),
            )
    return None


def _start_up(name: str) -> bool:
    """A variable the dynamic loader or a shell acts on as it starts (code it runs, files it reads)."""
    return name.startswith(STARTUP_PREFIXES) or name in STARTUP_VARIABLES


def shell_env(replica_env: Mapping[str, str], caller_env: Mapping[str, str], replica: str) -> dict[str, str]:
    """The shell's variables: the replica's, less `DROPPED` and every loader or shell start-up variable
    (those come from the caller, as they would in any shell the caller opens), with the caller's terminal
    settings."""
    env = {k: v for k, v in replica_env.items() if k not in DROPPED and not _start_up(k)}
    for name, value in caller_env.items():
        if _start_up(name):
            env[name] = value
    for name in KEPT_FROM_CALLER:
        if name in caller_env and name not in env:
            env[name] = caller_env[name]
    env[SHELL_MARK] = replica
    return env


def shell_argv(
    shell: str, command: str | None, replica: Replica, nsenter: str | None
) -> tuple[list[str], str | None]:
    """The argv that opens the shell (behind `nsenter` into the replica's /gcs namespace when it has one and
    nsenter is there), and the working folder to start it in (None: nsenter's `-w` sets it)."""
    inner = [shell] + (["-c", command] if command is not None else [])
    if not replica.own_mounts or nsenter is None:
        return inner, replica.cwd
    enter = [nsenter, "--target", str(replica.pid)]
    if replica.own_users:
        enter += ["--user", "--preserve-credentials"]
    return [*enter, "--mount", "--root", "--wd", "--", *inner], None


def gcs_note(replica: Replica, nsenter: str | None) -> str | None:
    """What to say of `/gcs` in the shell, when it is not the replica's view."""
    root = replica.env.get("VERTEXDIST_GCS_ROOT", "the job's gcs folder")
    if replica.own_mounts and nsenter is None:
        return f"note: nsenter not found, so /gcs is not mapped in this shell: gs://B/PATH is {root}/B/PATH"
    if not replica.own_mounts and replica.env.get("VERTEXDIST_GCS_UNMAPPED"):
        why = replica.env["VERTEXDIST_GCS_UNMAPPED"]
        return f"note: the replica has no /gcs either ({why}): gs://B/PATH is {root}/B/PATH"
    return None


def vertex_message(replica: str, uris: Mapping[str, str], enabled: bool) -> str:
    """What `shell` prints for a Vertex replica: its interactive-shell URI, or how to get one."""
    if replica in uris:
        return f"{replica}: open {uris[replica]} in a browser (Vertex's interactive shell)"
    if not enabled:
        return (
            f"this job has no interactive shell: set `enable_web_access: true` in its template and submit it"
            f" again; Vertex then gives each replica a shell URI (vertexdist shell JOB --replica {replica})"
        )
    if uris:
        return f"no shell URI for {replica}; the job's replicas with one: {', '.join(sorted(uris))}"
    return "no shell URI yet: Vertex gives them once the replicas run; try again in a minute"


def web_access(backend: Any, name: str) -> tuple[dict[str, str], bool]:
    """A Vertex job's `webAccessUris` and `enableWebAccess` (a pipeline's: its backing custom job's, once it
    has one)."""
    from google.protobuf import json_format

    if "/customJobs/" not in name:
        status = backend.describe(name)
        if not status.backing_job:
            return {}, bool(status.spec.get("enableWebAccess"))
        name = str(status.backing_job)
    job = backend.clients.jobs.get_custom_job(name=name)
    data: dict[str, Any] = json_format.MessageToDict(type(job).pb(job))
    uris = {str(k): str(v) for k, v in (data.get("webAccessUris") or {}).items()}
    return uris, bool((data.get("jobSpec") or {}).get("enableWebAccess"))
