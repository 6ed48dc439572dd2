"""The typed job of a CustomJobSpec dict: pools, output location and scheduling, read once per path.

Follows docs/reference/vertex.md §2.1 (pool slots, `{}` for a skipped pool) and §5.1 (proto-JSON). The dict
goes through `proto_json.normalize_job_spec` first, so camelCase and snake_case keys, numbers sent as floats
and enums sent as numbers all read the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from vertexdist.errors import VertexdistError
from vertexdist.spec.durations import parse_duration
from vertexdist.wire.proto_json import normalize_job_spec

POOL_ROLES = ("chief", "worker", "ps", "evaluator")
# Vertex's Reduction Server image; locally a stand-in process holds the replica's place (no GPUs, no NCCL).
REDUCTION_SERVER_IMAGE_MARK = "reductionserver"

PoolKind = Literal["python_package", "container", "reduction_server"]


class JobSpecError(VertexdistError):
    """The CustomJobSpec cannot be run locally as given."""


@dataclass(frozen=True)
class PoolSpec:
    """One configured worker pool (`workerPoolSpecs[index]`) with at least one replica."""

    index: int
    replica_count: int
    kind: PoolKind
    machine_type: str = ""
    accelerator_count: int = 0
    python_module: str | None = None
    package_uris: tuple[str, ...] = ()
    image_uri: str | None = None
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    @property
    def name(self) -> str:
        return f"workerpool{self.index}"

    @property
    def role(self) -> str:
        """The pool's TF_CONFIG task type (docs/reference/vertex.md §1.2)."""
        return POOL_ROLES[self.index]

    @property
    def is_training(self) -> bool:
        """Only pools 0 and 1 are training nodes; reducers/ps (2) and evaluators (3) are never ranks."""
        return self.index in (0, 1)


@dataclass(frozen=True)
class JobSpec:
    pools: tuple[PoolSpec, ...]
    output_uri_prefix: str | None = None
    timeout_s: float | None = None
    restart_job_on_worker_restart: bool = False
    disable_retries: bool = False
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def replica_total(self) -> int:
        return sum(pool.replica_count for pool in self.pools)

    @property
    def node_count(self) -> int:
        return sum(pool.replica_count for pool in self.pools if pool.is_training)

    def pool(self, index: int) -> PoolSpec | None:
        return next((pool for pool in self.pools if pool.index == index), None)


def _get(obj: Mapping[str, Any], key: str, default: Any = None) -> Any:
    value = obj.get(key, default) if isinstance(obj, Mapping) else default
    return default if value is None else value


def _env_pairs(entries: Sequence[Mapping[str, Any]] | None, where: str) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    for entry in entries or ():
        name = entry.get("name") if isinstance(entry, Mapping) else None
        if not isinstance(name, str) or not name:
            raise JobSpecError(f"{where}.env: every entry needs a name, got {entry!r}")
        pairs.append((name, str(entry.get("value", ""))))
    return tuple(pairs)


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise JobSpecError(f"{where}: expected a list of strings, got {value!r}")
    return tuple(str(item) for item in value)


def _parse_pool(index: int, raw: Mapping[str, Any], require_command: bool = True) -> PoolSpec | None:
    where = f"workerPoolSpecs[{index}]"
    replicas = int(_get(raw, "replicaCount", 0) or 0)
    if not raw or replicas <= 0:
        return None
    machine = _get(raw, "machineSpec", {}) or {}
    accelerators = int(_get(machine, "acceleratorCount", 0) or 0)
    if _get(machine, "acceleratorType", "ACCELERATOR_TYPE_UNSPECIFIED") == "ACCELERATOR_TYPE_UNSPECIFIED":
        accelerators = 0  # a count without a type gives no GPU on Vertex (docs/reference/vertex.md §2.2)
    common: dict[str, Any] = {
        "index": index,
        "replica_count": replicas,
        "machine_type": str(_get(machine, "machineType", "") or ""),
        "accelerator_count": accelerators,
    }
    package = _get(raw, "pythonPackageSpec")
    container = _get(raw, "containerSpec")
    if package and container:
        raise JobSpecError(f"{where}: has both pythonPackageSpec and containerSpec")
    if package:
        module = _get(package, "pythonModule")
        uris = _strings(_get(package, "packageUris"), f"{where}.pythonPackageSpec.packageUris")
        if not module or not uris:
            raise JobSpecError(f"{where}.pythonPackageSpec needs pythonModule and packageUris")
        return PoolSpec(
            kind="python_package",
            python_module=str(module),
            package_uris=uris,
            image_uri=_get(package, "executorImageUri"),
            args=_strings(_get(package, "args"), f"{where}.pythonPackageSpec.args"),
            env=_env_pairs(_get(package, "env"), f"{where}.pythonPackageSpec"),
            **common,
        )
    if container:
        image = str(_get(container, "imageUri", "") or "")
        command = _strings(_get(container, "command"), f"{where}.containerSpec.command")
        if index == 2 and REDUCTION_SERVER_IMAGE_MARK in image:
            return PoolSpec(kind="reduction_server", image_uri=image, **common)
        if not command and require_command:
            raise JobSpecError(
                f"{where}.containerSpec ({image or 'no image'}) has no command",
                hint="without docker or podman a container pool runs its command, isolated, on this host:"
                " set containerSpec.command, or start a container runtime to run the image's ENTRYPOINT",
            )
        return PoolSpec(
            kind="container",
            image_uri=image,
            command=command,
            args=_strings(_get(container, "args"), f"{where}.containerSpec.args"),
            env=_env_pairs(_get(container, "env"), f"{where}.containerSpec"),
            **common,
        )
    raise JobSpecError(f"{where}: needs a pythonPackageSpec or a containerSpec")


def parse_job_spec(spec: Mapping[str, Any], *, require_command: bool = True) -> JobSpec:
    """The typed job from a CustomJobSpec dict; raises JobSpecError naming the field that is wrong.

    `require_command=False` accepts container pools without a command: in a container the image's
    ENTRYPOINT runs, as on Vertex (`local-run --docker`); on the host there is nothing to run.
    """
    if not isinstance(spec, Mapping):
        raise JobSpecError(f"a CustomJobSpec is an object, got {type(spec).__name__}")
    spec_dict = dict(spec)
    for key in ("workerPoolSpecs", "worker_pool_specs"):
        # gcloud's one-pool shorthand (docs/reference/vertex.md §5.1)
        if isinstance(spec_dict.get(key), Mapping):
            spec_dict[key] = [spec_dict[key]]
    try:
        normalized = normalize_job_spec(spec_dict)
    except ValueError as exc:
        raise JobSpecError(str(exc)) from None
    raw_pools = normalized.get("workerPoolSpecs")
    if not isinstance(raw_pools, Sequence) or isinstance(raw_pools, str) or not raw_pools:
        raise JobSpecError("the job has no workerPoolSpecs")
    if len(raw_pools) > len(POOL_ROLES):
        raise JobSpecError(f"the job has {len(raw_pools)} worker pools; Vertex allows at most 4")
    pools = tuple(
        pool
        for index, raw in enumerate(raw_pools)
        if (pool := _parse_pool(index, raw or {}, require_command)) is not None
    )
    chief = next((pool for pool in pools if pool.index == 0), None)
    if chief is None:
        raise JobSpecError("workerPoolSpecs[0] (the primary replica) is missing or has no replicas")
    if chief.replica_count != 1:
        raise JobSpecError(f"workerPoolSpecs[0].replicaCount must be 1, got {chief.replica_count}")
    output = _get(normalized, "baseOutputDirectory", {})
    scheduling = _get(normalized, "scheduling", {})
    timeout = _get(scheduling, "timeout")
    try:
        timeout_s = parse_duration(timeout) if timeout else None
    except ValueError as exc:
        raise JobSpecError(f"scheduling.timeout: {exc}") from None
    return JobSpec(
        pools=pools,
        output_uri_prefix=_get(output, "outputUriPrefix") or None,
        timeout_s=timeout_s,
        restart_job_on_worker_restart=bool(_get(scheduling, "restartJobOnWorkerRestart", False)),
        disable_retries=bool(_get(scheduling, "disableRetries", False)),
        raw=spec,
    )
