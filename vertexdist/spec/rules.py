"""Checks across fields and against the machine catalog. Each rule is a small function returning findings.

Errors are what Vertex would reject (or silently get wrong, like a GPU type with count 0); warnings are what
Vertex accepts but is probably a mistake. Sources: docs/reference/vertex.md §2-§3,
docs/reference/perf-reliability.md §(b).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from vertexdist.spec import (
    catalog,
    health,
    limits,
    model_upload,
    ray_rules,
    ray_script_rules,
    script_rules,
    strategy_rules,
)
from vertexdist.spec.catalog_data import (
    BOOT_DISK_TYPES,
    DEPRECATED_STRATEGIES,
    MACHINES,
    REGIONS,
    SCHEDULING_STRATEGIES,
)
from vertexdist.spec.findings import Finding
from vertexdist.spec.machine_rules import MachineChoice, check_machine, requested_accelerator
from vertexdist.spec.names import label_key_problem, label_value_problem, labels_count_problem
from vertexdist.spec.recovery_rules import fallbacks_are_valid_jobs, strategy_needs_recovery_to_recover
from vertexdist.spec.tuning_rules import TUNING_RULES

if TYPE_CHECKING:
    from vertexdist.spec.models import JobTemplate


def _did_you_mean(value: str, choices: list[str] | tuple[str, ...]) -> str:
    return catalog.did_you_mean(value, choices)


def _join(*parts: str) -> str:
    return " ".join(p for p in parts if p)


def _accelerator(t: JobTemplate) -> str | None:
    return requested_accelerator(t.accelerator_type)


def machine_fits(t: JobTemplate) -> Iterator[Finding]:
    """The machine rules (`machine_rules`), which the emulator applies to every pool of a request."""
    yield from check_machine(MachineChoice(t.machine_type, t.accelerator_type, t.accelerator_count))


def replica_count_positive(t: JobTemplate) -> Iterator[Finding]:
    if t.replica_count < 1:  # the model already enforces ge=1; kept for templates built with model_construct
        yield Finding("replica_count", f"replica_count must be at least 1, got {t.replica_count}", None)


def reduction_server_needs_gpu_workers(t: JobTemplate) -> Iterator[Finding]:
    if t.reduction_server_count > 0 and (_accelerator(t) is None or t.accelerator_count == 0):
        yield Finding(
            "reduction_server_count",
            "Reduction Server needs GPU workers (it speeds up NCCL all-reduce between GPU nodes)",
            "set accelerator_type and accelerator_count, or remove reduction_server_count",
        )


def reduction_server_machine_is_cpu(t: JobTemplate) -> Iterator[Finding]:
    if t.reduction_server_count == 0:
        return
    name = t.reduction_server_machine_type
    if name not in MACHINES:
        yield Finding(
            "reduction_server_machine_type",
            f"{name!r} is not a Vertex AI training machine type",
            _join(_did_you_mean(name, list(MACHINES)), "n1-highcpu-16 is the recommended reducer machine"),
        )
    elif catalog.is_accelerator_optimized(name):
        yield Finding(
            "reduction_server_machine_type",
            f"reduction servers run on CPU machines; {name} is a GPU machine",
            "use n1-highcpu-16 (32 Gbps egress) or n2-highcpu-16",
        )


def reduction_server_speedup(t: JobTemplate) -> Iterator[Finding]:
    if t.reduction_server_count > 0 and t.replica_count <= 2:
        yield Finding(
            "reduction_server_count",
            f"reduction servers speed up all-reduce only from 3 nodes up; this job has {t.replica_count}"
            " (at 2 nodes a ring all-reduce already sends each gradient once)",
            "use reduction servers from 3 nodes up (the gain is 2(N-1)/N: 1.5x at 4 nodes), or remove them;"
            " `vertexdist estimate TEMPLATE --params 350M` gives the figures",
            "warning",
        )


def reduction_server_bandwidth(t: JobTemplate) -> Iterator[Finding]:
    if t.reduction_server_count == 0:
        return
    worker = catalog.machine(t.machine_type)
    reducer = catalog.machine(t.reduction_server_machine_type)
    if not worker or not reducer or worker.egress_gbps is None or reducer.egress_gbps is None:
        return
    worker_total = worker.egress_gbps * t.replica_count
    reducer_total = reducer.egress_gbps * t.reduction_server_count
    if reducer_total < worker_total:
        needed = -(-worker_total // reducer.egress_gbps)
        yield Finding(
            "reduction_server_count",
            f"reducer egress {reducer_total:g} Gbps is below the workers' {worker_total:g} Gbps"
            f" ({t.replica_count} x {t.machine_type}); the reducers would be the bottleneck",
            f"use at least {int(needed)} x {t.reduction_server_machine_type};"
            " `vertexdist estimate TEMPLATE --params 350M` gives the all-reduce time and cost",
            "warning",
        )


def reduction_server_with_custom_image(t: JobTemplate) -> Iterator[Finding]:
    if t.reduction_server_count > 0 and t.build is not None:
        yield Finding(
            "reduction_server_count",
            "reduction servers need the NCCL plugin in the built image (apt package google-reduction-server)",
            "the project's Dockerfile installs it; your own must too (apt repo google-fast-socket)",
            "warning",
        )


def _runs_ddp_across_nodes(t: JobTemplate) -> bool:
    """Whether the job's replicas form one process group: torchrun's always do, the bundled trainer's too;
    code of your own under `launcher: python` runs once per machine and may never join the others (on GPUs
    it most likely does, or it would leave them idle); a Ray job is ended by the launcher when a node goes
    (spec/ray_rules.py has its checks)."""
    launcher = t.trainer.launcher
    if launcher == "ray":
        return False
    if launcher == "torchrun" or t.trainer.is_bundled:
        return True
    return _accelerator(t) is not None and t.accelerator_count > 0


def ddp_restart_policy(t: JobTemplate) -> Iterator[Finding]:
    if t.replica_count > 1 and not t.restart_job_on_worker_restart and _runs_ddp_across_nodes(t):
        backend = "NCCL" if _accelerator(t) is not None and t.accelerator_count > 0 else "gloo"
        yield Finding(
            "restart_job_on_worker_restart",
            "multi-node DDP without restart_job_on_worker_restart: if one worker restarts, the others hang"
            f" in {backend} until the collective timeout",
            "set restart_job_on_worker_restart: true and resume from checkpoints",
            "warning",
        )


def launcher_options_need_a_launcher(t: JobTemplate) -> Iterator[Finding]:
    trainer = t.trainer
    if trainer.launcher != "python":
        return
    if trainer.nproc_per_node is not None:
        yield Finding(
            "trainer.nproc_per_node",
            "nproc_per_node applies only with a launcher that starts processes per node; with"
            " `launcher: python` Vertex runs the module once per machine",
            "set trainer.launcher: torchrun"
            + (
                ", or pass --nproc-per-node in trainer.args to the bundled trainer"
                if trainer.is_bundled
                else ""
            ),
        )
    if trainer.max_restarts:
        yield Finding(
            "trainer.max_restarts",
            "max_restarts sets torchrun's --max-restarts, and `launcher: python` runs no torchrun",
            "set trainer.launcher: torchrun, or use restart_job_on_worker_restart to restart the whole job",
        )


def python_launcher_leaves_gpus_idle(t: JobTemplate) -> Iterator[Finding]:
    # The bundled trainer starts one worker per GPU itself; other code runs once per machine.
    gpus = t.accelerator_count
    if t.trainer.launcher == "python" and not t.trainer.is_bundled and gpus > 1:
        yield Finding(
            "trainer.launcher",
            f"`launcher: python` runs {t.trainer.module} once per machine: unless it starts its own"
            f" processes, it leaves {gpus - 1} of the {gpus} GPUs of a node idle",
            "set trainer.launcher: torchrun to run one process per GPU (RANK, LOCAL_RANK, WORLD_SIZE set)",
            "warning",
        )


def nproc_per_node_fits_gpus(t: JobTemplate) -> Iterator[Finding]:
    wanted = t.trainer.nproc_per_node
    if wanted is not None and 0 < t.accelerator_count < wanted:
        yield Finding(
            "trainer.nproc_per_node",
            f"{wanted} processes per node on {t.accelerator_count} GPU(s): NCCL takes one GPU per rank",
            f"use nproc_per_node: {t.accelerator_count} (or leave it out: one process per GPU)",
            "warning",
        )


def model_fits_gpus(t: JobTemplate) -> Iterator[Finding]:
    """With `model_params`: warn when no strategy the code can use fits its model states in the GPUs.

    The memory model is `vertexdist estimate`'s (estimate/memory.py: ZeRO paper, mixed-precision Adam, 20%
    kept for activations) over the job's data-parallel GPUs; model parallelism is not known here.
    """
    if t.model_params is None or catalog.gpu_memory_gb(t.accelerator_type) is None:
        return
    from vertexdist.estimate import memory

    plan = memory.plan_memory(t.model_params, memory.template_layout(t), t.accelerator_type)
    usable, fits = memory.usable_strategies(t), plan.fits
    if not any(fits[s] for s in usable):
        advice = memory.memory_advice(plan, usable)[0].message
        yield Finding(
            "model_params",
            advice,
            "more machines (replica_count), GPUs with more memory, or model parallelism: `vertexdist"
            " estimate TEMPLATE --tensor-parallel N --pipeline-parallel M` shows what they need",
            "warning",
        )
    elif memory.trainer_strategy(t) == "ddp" and not fits["ddp"] and "zero3" in usable:
        gb = plan.per_gpu_gb
        yield Finding(
            "trainer.args",
            f"the bundled trainer runs DDP here, whose model states need {memory.format_gb(gb['ddp'])} GB"
            f" per GPU of the {plan.usable_gb:.3g} GB usable; FSDP over the {plan.layout.gpus} GPUs needs"
            f" {memory.format_gb(gb['zero3'])} GB",
            "add --strategy=fsdp to trainer.args",
            "warning",
        )


_BUCKET_URI = re.compile(r"^gs://[a-z0-9][a-z0-9._-]{1,220}[a-z0-9](/[^\s]*)?$")


def project_from_flag_or_environment(t: JobTemplate) -> Iterator[Finding]:
    if t.project is None:
        yield Finding(
            "project",
            "no `project:`; submit takes it from --project, then GOOGLE_CLOUD_PROJECT",
            "add `project: PROJECT_ID` to send this job to one project whatever the environment says",
            "note",
        )


def gcs_uris(t: JobTemplate) -> Iterator[Finding]:
    for name in ("staging_bucket", "base_output_dir"):
        value = getattr(t, name)
        if value is None or _BUCKET_URI.match(value):
            continue
        hint = "write gs://BUCKET/folder"
        bucket = value.removeprefix("gs://").partition("/")[0]
        if value.startswith("gs://") and bucket:
            yield Finding(
                name,
                f"{value!r}: the bucket name {bucket!r} is not a Cloud Storage bucket name",
                "3-63 lowercase letters, digits, '-', '_' and '.' (up to 222 with dots),"
                " starting and ending with a letter or digit",
            )
            continue
        if value.startswith("/") or value.startswith("."):
            hint = "a Cloud Storage folder is meant, not a local path: write gs://BUCKET/folder"
        elif value.startswith("gcs://") or value.startswith("gs:/") or value.startswith("GS://"):
            hint = "the scheme is gs:// (two slashes, lowercase)"
        yield Finding(name, f"{value!r} is not a gs:// URI", hint)


def label_rules(t: JobTemplate) -> Iterator[Finding]:
    too_many = labels_count_problem(len(t.labels))
    if too_many:
        yield Finding("labels", too_many, None)
    for key, value in t.labels.items():
        key_problem = label_key_problem(key)
        if key_problem:
            yield Finding(
                f"labels.{key}",
                key_problem,
                "keys are 1-63 lowercase letters, digits, _ or -, starting with a letter",
                on_key=True,
            )
        value_problem = label_value_problem(value)
        if value_problem:
            yield Finding(
                f"labels.{key}",
                value_problem,
                "values are 0-63 lowercase letters, digits, _ or -, e.g. "
                + repr(re.sub(r"[^a-z0-9_-]", "-", value.lower())[:63]),
            )


def location_known(t: JobTemplate) -> Iterator[Finding]:
    if t.location not in REGIONS:
        yield Finding(
            "location",
            f"{t.location!r} is not a Vertex AI training region",
            _join(_did_you_mean(t.location, REGIONS), "e.g. us-central1, europe-west4, asia-southeast1"),
        )


def strategy_known(t: JobTemplate) -> Iterator[Finding]:
    strategy = t.scheduling_strategy
    if strategy is None or strategy in SCHEDULING_STRATEGIES:
        return
    if strategy in DEPRECATED_STRATEGIES:
        yield Finding(
            "scheduling_strategy",
            f"{strategy} is deprecated",
            f"use {DEPRECATED_STRATEGIES[strategy]}",
            "warning",
        )
        return
    yield Finding(
        "scheduling_strategy",
        f"{strategy!r} is not a scheduling strategy; use one of {', '.join(SCHEDULING_STRATEGIES)}",
        _did_you_mean(strategy.upper(), SCHEDULING_STRATEGIES) or None,
    )


def max_wait_needs_flex_start(t: JobTemplate) -> Iterator[Finding]:
    if t.max_wait_duration is not None and t.scheduling_strategy != "FLEX_START":
        yield Finding(
            "max_wait_duration",
            "max_wait_duration applies only to scheduling_strategy FLEX_START",
            "set scheduling_strategy: FLEX_START, or remove max_wait_duration",
            "warning",
        )


def boot_disk_type_known(t: JobTemplate) -> Iterator[Finding]:
    if t.boot_disk_type not in BOOT_DISK_TYPES:
        yield Finding(
            "boot_disk_type",
            f"{t.boot_disk_type!r} is not a boot disk type; use one of {', '.join(BOOT_DISK_TYPES)}",
            _did_you_mean(t.boot_disk_type, BOOT_DISK_TYPES) or None,
        )
        return
    row = catalog.machine(t.machine_type)
    if (
        row is not None
        and row.default_boot_disk_type != t.boot_disk_type
        and t.boot_disk_type.startswith("pd-")
    ):
        yield Finding(
            "boot_disk_type",
            f"{t.machine_type} boots from {row.default_boot_disk_type}; {t.boot_disk_type} may be rejected",
            f"remove boot_disk_type (the default for {t.machine_type} is {row.default_boot_disk_type})",
            "warning",
        )


def boot_disk_size_range(t: JobTemplate) -> Iterator[Finding]:
    if not 100 <= t.boot_disk_size_gb <= 64000:  # the model enforces this; kept for model_construct
        yield Finding(
            "boot_disk_size_gb", f"boot disk must be 100..64000 GB, got {t.boot_disk_size_gb}", None
        )


_PREBUILT_MARKERS = ("docker.pkg.dev/vertex-ai/", "gcr.io/cloud-aiplatform/")


def container_is_prebuilt(t: JobTemplate) -> Iterator[Finding]:
    if t.build is not None:
        if "container_uri" in t.model_fields_set:
            yield Finding(
                "container_uri",
                "container_uri is not used when `build` is set: the built image runs the training pools",
                "remove container_uri, or remove `build` to run the package on this prebuilt image",
                "warning",
            )
        return
    uri = t.container_uri
    if not any(marker in uri for marker in _PREBUILT_MARKERS):
        yield Finding(
            "container_uri",
            f"{uri!r} is not a prebuilt Vertex training image; a Python package job must run on one",
            "use e.g. us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:latest,"
            " or add a `build` section to run your own image",
        )
        return
    if not uri.endswith(":latest"):
        yield Finding(
            "container_uri",
            "prebuilt Vertex training images support only the :latest tag",
            f"write {uri.rsplit(':', 1)[0] if ':' in uri.rsplit('/', 1)[-1] else uri}:latest",
            "warning",
        )
    if _accelerator(t) is not None and ("pytorch-xla" in uri or "pytorch-cpu" in uri or "-cpu." in uri):
        yield Finding(
            "container_uri",
            f"{uri} is a CPU image but the job asks for GPUs",
            "use a pytorch-gpu image, e.g. us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:latest",
            "warning",
        )


_EMAIL = re.compile(r"^[^@\s]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}$")
_NETWORK = re.compile(r"^projects/\d+/global/networks/[a-z]([-a-z0-9]*[a-z0-9])?$")
_TENSORBOARD = re.compile(r"^projects/[^/]+/locations/[^/]+/tensorboards/[^/]+$")


def identity_and_network(t: JobTemplate) -> Iterator[Finding]:
    if t.service_account is not None and not _EMAIL.match(t.service_account):
        yield Finding(
            "service_account",
            f"{t.service_account!r} is not a service account email",
            "write NAME@PROJECT.iam.gserviceaccount.com",
        )
    if t.network is not None and not _NETWORK.match(t.network):
        yield Finding(
            "network",
            f"{t.network!r} is not a network resource name",
            "write projects/PROJECT_NUMBER/global/networks/NETWORK (the project number, not its id)",
        )
    if t.tensorboard is not None:
        if not _TENSORBOARD.match(t.tensorboard):
            yield Finding(
                "tensorboard",
                f"{t.tensorboard!r} is not a Tensorboard resource name",
                "write projects/PROJECT/locations/LOCATION/tensorboards/ID",
            )
        if t.service_account is None:
            yield Finding(
                "tensorboard",
                "tensorboard needs a service_account (Vertex writes logs with it)",
                "set service_account to an account with access to the Tensorboard and the output bucket",
            )


# Vertex's rule for a PersistentResource id (projects.locations.persistentResources.create, query parameter
# persistentResourceId): at most 63 characters of /^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$/.
PERSISTENT_RESOURCE_ID = re.compile(r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$")
_PERSISTENT_RESOURCE_NAME = re.compile(r"^projects/([^/]+)/locations/([^/]+)/persistentResources/([^/]+)$")


def persistent_resource_id_problem(value: str) -> tuple[str, str] | None:
    """What is wrong with a persistent resource id, and what would be right; None when Vertex takes it."""
    if PERSISTENT_RESOURCE_ID.match(value):
        return None
    named = _PERSISTENT_RESOURCE_NAME.match(value)
    if named:
        return (f"{value!r} is a resource name, not an id", f"write only its id: {named.group(3)}")
    return (
        f"{value!r} is not a persistent resource id",
        "Vertex takes 1-63 characters of a-z, 0-9 and -, starting with a letter and not ending with -",
    )


def persistent_resource(t: JobTemplate) -> Iterator[Finding]:
    if t.persistent_resource_id is None:
        return
    problem = persistent_resource_id_problem(t.persistent_resource_id)
    if problem is not None:
        yield Finding("persistent_resource_id", problem[0], problem[1])


def env_limits(t: JobTemplate) -> Iterator[Finding]:
    if len(t.trainer.env) > limits.ENV_VARS:
        yield Finding(
            "trainer.env",
            f"{len(t.trainer.env)} environment variables; Vertex allows {limits.ENV_VARS}",
            None,
        )


def build_repository_region(t: JobTemplate) -> Iterator[Finding]:
    if t.build is None:
        return
    region = t.build.repository_region()
    if region not in REGIONS and region not in ("us", "europe", "asia"):
        yield Finding(
            "build.repository",
            f"{region!r} is not an Artifact Registry location",
            _join(_did_you_mean(region, REGIONS), "use the job's region, e.g. " + t.location),
        )
    elif region != t.location and not t.location.startswith(region + "-"):
        yield Finding(
            "build.repository",
            f"the repository is in {region} but the job runs in {t.location}:"
            " every replica pulls the image across regions",
            f"use a repository in {t.location}",
            "warning",
        )


Rule = Callable[["JobTemplate"], Iterator[Finding]]

RULES: tuple[Rule, ...] = (
    machine_fits,
    replica_count_positive,
    reduction_server_needs_gpu_workers,
    reduction_server_machine_is_cpu,
    reduction_server_speedup,
    reduction_server_bandwidth,
    reduction_server_with_custom_image,
    ddp_restart_policy,
    launcher_options_need_a_launcher,
    python_launcher_leaves_gpus_idle,
    nproc_per_node_fits_gpus,
    model_fits_gpus,
    project_from_flag_or_environment,
    gcs_uris,
    label_rules,
    location_known,
    strategy_known,
    max_wait_needs_flex_start,
    boot_disk_type_known,
    boot_disk_size_range,
    container_is_prebuilt,
    identity_and_network,
    persistent_resource,
    env_limits,
    build_repository_region,
    *limits.RULES,
    *ray_rules.RULES,
    *ray_script_rules.RULES,
    *strategy_rules.RULES,
    *script_rules.RULES,
    *model_upload.RULES,
    *health.RULES,
    *TUNING_RULES,
    fallbacks_are_valid_jobs(
        (machine_fits, location_known, strategy_known, gcs_uris, reduction_server_needs_gpu_workers)
    ),
    strategy_needs_recovery_to_recover,
)


def check_template(t: JobTemplate) -> list[Finding]:
    """Every finding of every rule, errors and warnings, in rule order."""
    return [finding for rule in RULES for finding in rule(t)]
