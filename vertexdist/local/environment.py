"""The environment Vertex gives each replica, as a pure function of the typed job.

What Vertex sets: docs/reference/vertex.md §1.

Per replica: CLUSTER_SPEC (every pool, this replica's task), TF_CONFIG (distributed jobs only;
chief/worker/ps, never evaluator), MASTER_ADDR/MASTER_PORT/WORLD_SIZE (= nodes, pools 0+1) and RANK
(= node index) for distributed jobs, AIP_*_DIR under the base output directory, CLOUD_ML_* (with
CLOUD_ML_TRIAL_ID and CLOUD_ML_HP_METRIC_FILE for a tuning trial), and the pool's own env. Local additions:
VERTEXDIST_GCS_ROOT (where gs:// lives on this machine), VERTEXDIST_NPROC_PER_NODE, CUDA_VISIBLE_DEVICES.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vertexdist.errors import VertexdistError
from vertexdist.local.ports import LOOPBACK
from vertexdist.shipped import LAUNCHER_PACKAGE
from vertexdist.shipped.vertexdist_launcher.options import (
    LauncherUsageError,
    LaunchOptions,
    parse_launch_args,
)
from vertexdist.wire.job_spec import JobSpec, JobSpecError, PoolSpec

# Variables a launcher or the user's shell may have set that would contradict what a replica must see.
_SCRUBBED_PREFIXES = ("AIP_", "CLOUD_ML_", "TORCHELASTIC_", "VERTEXDIST_", "PET_")
_SCRUBBED = frozenset(
    {
        "CLUSTER_SPEC",
        "TF_CONFIG",
        "MASTER_ADDR",
        "MASTER_PORT",
        "WORLD_SIZE",
        "RANK",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "NODE_RANK",
        "GROUP_RANK",
        "ROLE_RANK",
        "PYTHONPATH",
    }
)
# CUDA_VISIBLE_DEVICES is not scrubbed: with GPUs every replica gets its own share (split_gpus), and without
# any the user's value (say "" to keep a job on CPU) must hold, or every replica would see every GPU.


@dataclass(frozen=True)
class JobContext:
    """Where and as what a job runs: what Vertex knows about a job besides its spec."""

    job_id: str
    project: str
    region: str
    gcs_root: str
    procs_per_replica: int | None = None
    # Used when the spec has no baseOutputDirectory, so the model still lands in the run folder.
    default_output_uri: str | None = None
    # A tuning trial: its id (CLOUD_ML_TRIAL_ID, CLUSTER_SPEC task.trial) and the folder of its replicas'
    # cloudml-hypertune metric files, one per replica as each Vertex VM has its own.
    trial_id: str = ""
    hp_metric_dir: str | None = None


@dataclass(frozen=True)
class ReplicaSlot:
    pool: PoolSpec
    index: int

    @property
    def name(self) -> str:
        return f"{self.pool.name}-{self.index}"

    @property
    def node_rank(self) -> int | None:
        """0 for the chief, 1 + index for workers; None for reducers, ps and evaluators."""
        if self.pool.index == 0:
            return 0
        if self.pool.index == 1:
            return 1 + self.index
        return None


def replica_slots(job: JobSpec) -> list[ReplicaSlot]:
    return [ReplicaSlot(pool, i) for pool in job.pools for i in range(pool.replica_count)]


def cluster_addresses(job: JobSpec, ports: Sequence[int], host: str = LOOPBACK) -> dict[str, list[str]]:
    """Pool name -> `host:port` per replica, in replica_slots order; only configured pools appear."""
    slots = replica_slots(job)
    if len(ports) != len(slots):
        raise ValueError(f"{len(slots)} replicas need {len(slots)} ports, got {len(ports)}")
    cluster: dict[str, list[str]] = {}
    for slot, port in zip(slots, ports, strict=True):
        cluster.setdefault(slot.pool.name, []).append(f"{host}:{port}")
    return cluster


# Vertex gives every replica its own VM and names it `workerpoolP-I:2222` in CLUSTER_SPEC
# (docs/reference/vertex.md §1); containers on one user-defined network can do the same.
VERTEX_CLUSTER_PORT = 2222


def hostname_cluster_addresses(job: JobSpec, port: int = VERTEX_CLUSTER_PORT) -> dict[str, list[str]]:
    """Pool name -> `workerpoolP-I:port` per replica: addresses for replicas that each have a host name."""
    cluster: dict[str, list[str]] = {}
    for slot in replica_slots(job):
        cluster.setdefault(slot.pool.name, []).append(f"{slot.name}:{port}")
    return cluster


def launcher_options(pool: PoolSpec) -> LaunchOptions | None:
    """The shipped launcher's options where the pool runs it (`python -m vertexdist_launcher ...`)."""
    if pool.kind == "python_package" and pool.python_module == LAUNCHER_PACKAGE:
        argv: tuple[str, ...] = pool.args
    elif pool.kind == "container" and pool.command[1:3] == ("-m", LAUNCHER_PACKAGE):
        argv = (*pool.command[3:], *pool.args)
    else:
        return None
    try:
        return parse_launch_args(argv)
    except LauncherUsageError as exc:
        raise JobSpecError(f"{pool.name}: the vertexdist_launcher arguments are wrong: {exc}") from None


def procs_per_node(pool: PoolSpec, procs_per_replica: int | None) -> int:
    """One process per GPU of the pool's machine (or the launcher's --nproc-per-node), unless the user
    scales it down (or up) explicitly."""
    if procs_per_replica is not None:
        return procs_per_replica
    options = launcher_options(pool)
    if options is not None and options.nproc_per_node is not None:
        return options.nproc_per_node
    return max(1, pool.accelerator_count)


def split_gpus(job: JobSpec, host_gpus: Sequence[str], procs_per_replica: int | None) -> dict[str, str]:
    """Replica name -> CUDA_VISIBLE_DEVICES, giving each replica its own GPUs as separate VMs would have.

    Empty dict without host GPUs. Replicas of pools without accelerators get "" so they stay on CPU.
    """
    if not host_gpus:
        return {}
    wanted = {
        slot.name: (procs_per_node(slot.pool, procs_per_replica) if slot.pool.accelerator_count else 0)
        for slot in replica_slots(job)
    }
    needed = sum(wanted.values())
    if needed > len(host_gpus):
        per = ", ".join(f"{name}: {n}" for name, n in wanted.items() if n)
        raise VertexdistError(
            f"the job needs {needed} GPUs ({per}) but this machine has {len(host_gpus)} visible",
            hint="pass --procs-per-replica N to give each replica fewer GPUs, or use fewer replicas",
        )
    split: dict[str, str] = {}
    cursor = 0
    for name, count in wanted.items():
        split[name] = ",".join(host_gpus[cursor : cursor + count])
        cursor += count
    return split


def output_dirs(prefix: str) -> dict[str, str]:
    base = prefix.rstrip("/")
    return {
        "AIP_MODEL_DIR": f"{base}/model/",
        "AIP_CHECKPOINT_DIR": f"{base}/checkpoints/",
        "AIP_TENSORBOARD_LOG_DIR": f"{base}/logs/",
    }


def _tf_config(
    job: JobSpec, cluster: Mapping[str, list[str]], slot: ReplicaSlot, ctx: JobContext
) -> dict[str, object]:
    tf_cluster = {pool.role: list(cluster[pool.name]) for pool in job.pools if pool.role != "evaluator"}
    return {
        "cluster": tf_cluster,
        "task": {
            "type": slot.pool.role,
            "index": slot.index,
            **({"trial": ctx.trial_id} if ctx.trial_id else {}),
            "cloud": f"{ctx.job_id}-{slot.name}",
        },
        "job": dict(job.raw),
        "environment": "cloud",
    }


def replica_env(
    job: JobSpec,
    ctx: JobContext,
    cluster: Mapping[str, list[str]],
    slot: ReplicaSlot,
    *,
    cuda_visible_devices: str | None = None,
) -> dict[str, str]:
    """Exactly the variables this replica gets from Vertex (plus the documented local additions)."""
    # The pool's own env first: the platform's variables win, as they describe the cluster itself.
    env: dict[str, str] = dict(slot.pool.env)
    env["CLUSTER_SPEC"] = json.dumps(
        {
            "cluster": {name: list(addresses) for name, addresses in cluster.items()},
            "environment": "cloud",
            "task": {"type": slot.pool.name, "index": slot.index, "trial": ctx.trial_id},
            "job": dict(job.raw),
        },
        separators=(",", ":"),
    )
    if job.replica_total > 1:
        env["TF_CONFIG"] = json.dumps(_tf_config(job, cluster, slot, ctx), separators=(",", ":"))
        master_host, master_port = cluster["workerpool0"][0].rsplit(":", 1)
        env["MASTER_ADDR"] = master_host
        env["MASTER_PORT"] = master_port
        env["WORLD_SIZE"] = str(job.node_count)
        if slot.node_rank is not None:
            env["RANK"] = str(slot.node_rank)
    prefix = job.output_uri_prefix or ctx.default_output_uri
    if prefix:
        env.update(output_dirs(prefix))
    env.update(experiment_env(job.raw))
    env["CLOUD_ML_PROJECT_ID"] = ctx.project
    env["CLOUD_ML_JOB_ID"] = ctx.job_id
    env["CLOUD_ML_REGION"] = ctx.region
    if ctx.trial_id:
        env["CLOUD_ML_TRIAL_ID"] = ctx.trial_id
        if ctx.hp_metric_dir:
            env["CLOUD_ML_HP_METRIC_FILE"] = hp_metric_file(ctx.hp_metric_dir, slot.name)
    env["VERTEXDIST_GCS_ROOT"] = ctx.gcs_root
    if slot.pool.kind != "reduction_server":
        env["VERTEXDIST_NPROC_PER_NODE"] = str(procs_per_node(slot.pool, ctx.procs_per_replica))
    if cuda_visible_devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = cuda_visible_devices
    return env


def experiment_env(job_spec: Mapping[str, object]) -> dict[str, str]:
    """`AIP_EXPERIMENT_NAME` / `AIP_EXPERIMENT_RUN_NAME` for a job with `jobSpec.experiment`(`Run`): the
    variables the SDK's `aiplatform.autolog()` (which `from_local_script(enable_autolog=True)` prepends to
    the script) reads its experiment and run from (google/cloud/aiplatform/metadata/metadata.py)."""
    found = {
        "AIP_EXPERIMENT_NAME": job_spec.get("experiment"),
        "AIP_EXPERIMENT_RUN_NAME": job_spec.get("experimentRun"),
    }
    return {key: value for key, value in found.items() if isinstance(value, str) and value}


def hp_metric_file(metric_dir: str, replica: str) -> str:
    """Where a trial's replica writes its cloudml-hypertune reports (the tuning loop reads the chief's)."""
    return f"{metric_dir.rstrip('/')}/{replica}.metrics"


def child_environment(base: Mapping[str, str], replica: Mapping[str, str]) -> dict[str, str]:
    """The full environment of a replica process: the host's (minus anything that would contradict the
    replica contract, e.g. a RANK left in the user's shell) with the replica's variables on top."""
    kept = {
        key: value
        for key, value in base.items()
        if key not in _SCRUBBED and not key.startswith(_SCRUBBED_PREFIXES)
    }
    # Unbuffered output, so the live view and the log files show lines as they are printed.
    kept["PYTHONUNBUFFERED"] = "1"
    kept.update(replica)
    return kept
