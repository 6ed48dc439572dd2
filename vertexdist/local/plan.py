"""The launch plan of a local job: per replica its argv, env, working folder and log file (no processes yet).

Like torchx's `PopenRequest` (local_scheduler.py): everything a replica process will get is decided here, by
pure functions, so `local-run --plan` can print it and tests can check it without starting anything.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from vertexdist.local.environment import (
    JobContext,
    cluster_addresses,
    hostname_cluster_addresses,
    replica_env,
    replica_slots,
    split_gpus,
)
from vertexdist.local.ports import LOOPBACK
from vertexdist.render import mask_secrets
from vertexdist.shipped import LAUNCHER_DIR, LAUNCHER_PACKAGE, WATCHED_MODULE
from vertexdist.spec.names import BUNDLED_TRAINER
from vertexdist.wire.job_spec import JobSpec, JobSpecError, PoolSpec

DEFAULT_MAX_RESTARTS = 3
# Vertex's restart rules (docs/reference/vertex.md §8.1): a worker whose exit is not permanent is restarted
# in place up to this many times; past that the whole job is retried, up to DEFAULT_MAX_RESTARTS times.
MAX_REPLICA_RESTARTS = 5

ReplicaKind = Literal["trainer", "container", "standin"]
# How replicas reach each other: `loopback` gives each a free 127.0.0.1 port (processes on this host);
# `hostnames` names each `workerpoolP-I:2222` as Vertex does (one container per replica on a shared network).
Addressing = Literal["loopback", "hostnames"]

# Holds a reduction server's place in the cluster (a script, so a warm pool forks it); its text is what runs
# inside a job's image under --docker.
STANDIN_SCRIPT = Path(__file__).resolve().with_name("reduction_standin.py")
STANDIN_CODE = STANDIN_SCRIPT.read_text()


def masked_env(env: Mapping[str, str]) -> dict[str, str]:
    """A replica's env for printing: secret-looking values masked, inside CLUSTER_SPEC/TF_CONFIG's job too."""
    masked: dict[str, str] = mask_secrets(dict(env))
    for key in ("CLUSTER_SPEC", "TF_CONFIG"):
        if key in masked:  # their `job` holds the pools' env, secrets included
            value = json.loads(masked[key])
            value["job"] = mask_secrets(value.get("job"))
            masked[key] = json.dumps(value, separators=(",", ":"))
    return masked


@dataclass(frozen=True)
class ReplicaLaunch:
    """One replica process: what runs, with which environment, where, and where its output goes."""

    name: str
    pool: int
    index: int
    kind: ReplicaKind
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: Path
    log_path: Path
    address: str
    # Run once the replica's process group is gone, to end what it started outside that group: a `docker
    # run` client killed after its grace period leaves its container running until `docker rm -f`.
    stop_argv: tuple[str, ...] = ()

    @property
    def is_training(self) -> bool:
        """The job's outcome is the training replicas' (pools 0 and 1); the others end with the job."""
        return self.pool in (0, 1)


HOST_TMPDIR_ENV = "VERTEXDIST_HOST_TMPDIR"  # the temp folder replicas would have had
TMP_DIR = "tmp"  # <run folder>/tmp/<replica>: each host replica's TMPDIR, removed when the job ends


@dataclass(frozen=True)
class LaunchPlan:
    job_id: str
    run_dir: Path
    replicas: tuple[ReplicaLaunch, ...]
    timeout_s: float | None
    # restartJobOnWorkerRestart: the whole job is restarted, up to this many times, when any replica fails.
    max_restarts: int
    # The job's gs:// folder, which its replicas see at /gcs (`gcs_mount`); None where the launcher binds it
    # itself (`--docker` and the emulator's containers mount it into each container).
    gcs_root: Path | None = None
    # Otherwise (`local.exits`): a replica whose exit is not permanent is restarted alone, up to
    # `replica_restarts` times in one attempt, then the whole job is retried up to `job_retries` times.
    replica_restarts: int = 0
    job_retries: int = 0

    def replica(self, name: str) -> ReplicaLaunch:
        return next(r for r in self.replicas if r.name == name)

    def to_dict(self, *, masked: bool = True) -> dict[str, Any]:
        """A JSON-able view; secret-looking env values are masked unless `masked` is False."""
        return {
            "job_id": self.job_id,
            "run_dir": str(self.run_dir),
            "timeout_s": self.timeout_s,
            "max_restarts": self.max_restarts,
            "replica_restarts": self.replica_restarts,
            "job_retries": self.job_retries,
            "replicas": [
                {
                    "name": r.name,
                    "kind": r.kind,
                    "address": r.address,
                    "argv": list(r.argv),
                    "cwd": str(r.cwd),
                    "log": str(r.log_path),
                    "env": masked_env(r.env) if masked else dict(r.env),
                    **({"stop_argv": list(r.stop_argv)} if r.stop_argv else {}),
                }
                for r in self.replicas
            ],
        }


def _argv(pool: PoolSpec, python: str, address: str, name: str) -> tuple[ReplicaKind, tuple[str, ...]]:
    if pool.kind == "reduction_server":
        host, port = address.rsplit(":", 1)
        return "standin", (python, str(STANDIN_SCRIPT), host, port, name)
    if pool.kind == "python_package":
        assert pool.python_module is not None
        return "trainer", (python, "-m", pool.python_module, *pool.args)
    return "container", (*pool.command, *pool.args)


STORE_MODULE = f"{LAUNCHER_PACKAGE}.rendezvous_store"


def _users_target(pool: PoolSpec) -> tuple[str, ...] | None:
    """`-m MODULE ARGS` where this pool runs the user's own module under `launcher: python`, else None (the
    shipped launcher starts each worker's watcher itself, the bundled trainer starts its own).

    vertexdist renders such a pool as `pythonModule: vertexdist_launcher.watched` with args `-m MODULE
    ARGS`; a job submitted by an older vertexdist names the user's module itself."""
    module = pool.python_module or ""
    if pool.kind != "python_package":
        return None
    if module == WATCHED_MODULE:
        return pool.args
    if module.split(".")[0] in (LAUNCHER_PACKAGE, BUNDLED_TRAINER):
        return None
    return ("-m", module, *pool.args)


def _holds_store(pool: PoolSpec, node_rank: int | None, env: Mapping[str, str]) -> bool:
    """Whether this replica runs user code under `launcher: python` as the chief of a loopback rendezvous:
    its rank 0 would make a TCPStore listening on every interface (rendezvous_store holds one on loopback).
    The shipped launcher and the bundled trainer hold theirs themselves."""
    return _users_target(pool) is not None and node_rank == 0 and env.get("MASTER_ADDR") == LOOPBACK


def build_plan(
    job: JobSpec,
    ctx: JobContext,
    *,
    ports: Sequence[int],
    run_dir: Path,
    python: str,
    package_dirs: Mapping[str, str],
    host_gpus: Sequence[str] = (),
    max_restarts: int = DEFAULT_MAX_RESTARTS,
    addressing: Addressing = "loopback",
) -> LaunchPlan:
    """The plan for `job`: one launch per replica, ports in replica order (pools 0..3, index within pool).

    `package_dirs` maps each packageUri to the folder it is installed in (it goes on PYTHONPATH).
    With `addressing="hostnames"` the cluster is `workerpoolP-I:2222` and `ports` is not used.
    """
    cluster = hostname_cluster_addresses(job) if addressing == "hostnames" else cluster_addresses(job, ports)
    gpus = split_gpus(job, host_gpus, ctx.procs_per_replica)
    launches: list[ReplicaLaunch] = []
    for slot in replica_slots(job):
        address = cluster[slot.pool.name][slot.index]
        env = replica_env(job, ctx, cluster, slot, cuda_visible_devices=gpus.get(slot.name))
        if slot.pool.kind == "python_package":
            missing = [uri for uri in slot.pool.package_uris if uri not in package_dirs]
            if missing:
                raise JobSpecError(f"{slot.pool.name}: package {missing[0]} was not fetched")
            env["PYTHONPATH"] = ":".join(package_dirs[uri] for uri in slot.pool.package_uris)
        if addressing == "loopback" and "TMPDIR" not in env:
            # A temp folder of its own, inside the job's folder and removed with the job (`runner`): what
            # torchrun (torchelastic_*), Ray's links and the user's tempfile calls leave is never spread
            # over the machine's temp folder. Containers keep their own /tmp.
            env["TMPDIR"] = str(run_dir / TMP_DIR / slot.name)
            # Ray's short links (ray_node) belong in the machine's temp folder: this one is too long.
            env[HOST_TMPDIR_ENV] = tempfile.gettempdir()
        kind, argv = _argv(slot.pool, python, address, slot.name)
        target = _users_target(slot.pool)
        if addressing == "loopback" and target is not None:
            # The store's runner (a loopback chief) or `watched`, once: each starts the rank's watcher, then
            # runs `-m MODULE ARGS`. A rendered pool runs `watched` already, which the store's runner replaces
            # on the chief; an older job's pool names the module, which either wraps.
            wrapper = STORE_MODULE if _holds_store(slot.pool, slot.node_rank, env) else WATCHED_MODULE
            argv = (python, "-m", wrapper, *target)
            env["PYTHONPATH"] = f"{LAUNCHER_DIR.parent}:{env['PYTHONPATH']}"  # this vertexdist's launcher
        launches.append(
            ReplicaLaunch(
                name=slot.name,
                pool=slot.pool.index,
                index=slot.index,
                kind=kind,
                argv=argv,
                env=env,
                cwd=run_dir / "replicas" / slot.name,
                log_path=run_dir / "logs" / f"{slot.name}.log",
                address=address,
            )
        )
    whole_job = job.restart_job_on_worker_restart and not job.disable_retries
    in_place = not job.restart_job_on_worker_restart and not job.disable_retries
    return LaunchPlan(
        job_id=ctx.job_id,
        run_dir=run_dir,
        replicas=tuple(launches),
        timeout_s=job.timeout_s,
        max_restarts=max_restarts if whole_job else 0,
        gcs_root=Path(ctx.gcs_root),
        replica_restarts=MAX_REPLICA_RESTARTS if in_place else 0,
        job_retries=max_restarts if in_place else 0,
    )
