"""Template -> the CustomJobSpec every kind of request carries (a pipeline's training task, a tuning job's
trial job), and the job's output folder. Pure functions.

Pools follow Vertex's rules (docs/reference/vertex.md §2): pool 0 one replica, pool 1 the other replicas,
pool 2 the reduction servers, `{}` for a skipped pool, no trailing empty pools. Training pools match what
`CustomTrainingJob.run()` sends, in proto-JSON camelCase (what `gcloud ai custom-jobs create --config` takes).
One deliberate difference from the SDK: the reduction pool always gets the reduction-server image and an
explicit machine type (the SDK sends `machine_type: null` and runs the training package there by default).
With a launcher other than `python`, the training pools run the shipped `vertexdist_launcher` (inside the
package or the image) with the launcher's arguments, `--`, then the user's module and its args. With
`launcher: python`, a Python package's pools run the user's own module through the launcher's `watched`
runner (`pythonModule: vertexdist_launcher.watched`, args `-m MODULE ARGS`), which starts the rank's health
watcher and then runs the module as `python -m` would; the bundled trainer starts its own watcher and runs
as it is. A built image runs `python -m MODULE` as before: the image holds the launcher only when the
template's Dockerfile copies it in, which the render cannot know.

Output folders: every job gets its own, `<base>/<job folder>`, as the SDK's default does (a timestamped
folder per run), so no job resumes from another's checkpoints. `<base>` is the template's `base_output_dir`,
else `<staging_bucket>/vertexdist/output/<display name>`. A render is a pure function of the template, so
the job folder is the placeholder `JOB_FOLDER` here; whoever starts a job fills it in (`with_job_folder`):
submit with a fresh UTC-time-and-random name, local-run with its job id. The `vertexdist-request` hash is
taken with the placeholder in place, before the folder is filled in, so two submits of one template still
carry the same hash and the second is caught as a duplicate. Continuing an earlier job is explicit:
`resume_from` (that job's own output folder) replaces `<base>/<job folder>` and is part of the hash.
A tuning job's folder is its trials' base (Vertex puts each trial under `<folder>/<trial id>/`).
"""

from __future__ import annotations

import copy
import re
from typing import TYPE_CHECKING, Any

from vertexdist.shipped import LAUNCHER_PACKAGE, WATCHED_MODULE
from vertexdist.shipped.vertexdist_launcher.options import launch_args
from vertexdist.spec.durations import format_duration
from vertexdist.spec.health import CONFIG_VARIABLE as HEALTH_VARIABLE
from vertexdist.spec.names import BUNDLED_TRAINER, SCRIPT_PACKAGE

if TYPE_CHECKING:
    from vertexdist.spec.models import JobTemplate

PENDING = "<pending>"
# Stands for the per-job output folder until a job is started (see the module docstring).
JOB_FOLDER = "<job-folder>"
# The SDK's reduction pool disk (worker_spec_utils._WorkerPoolSpec defaults).
REDUCTION_SERVER_DISK = {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100}


def default_base_output_dir(t: JobTemplate) -> str:
    """The base of a template's job folders when it names no base_output_dir: one per display name."""
    folder = re.sub(r"[^A-Za-z0-9._-]+", "-", t.display_name).strip("-") or "job"
    return f"{t.staging_bucket.rstrip('/')}/vertexdist/output/{folder}"


def job_output_dir(t: JobTemplate, *, job_folder: str = JOB_FOLDER, resume_from: str | None = None) -> str:
    """The job's own output folder: `<base>/<job_folder>`, or the earlier job's folder it resumes."""
    if resume_from is not None:
        return resume_from
    base = (t.base_output_dir or default_base_output_dir(t)).rstrip("/")
    return f"{base}/{job_folder}"


def _job_spec_in(request: dict[str, Any]) -> dict[str, Any]:
    """The CustomJobSpec a request carries (a pipeline's task inputs, a tuning job's trialJobSpec), or the
    request itself when it is a CustomJobSpec."""
    for resource, key in (
        ("trainingPipeline", "trainingTaskInputs"),
        ("hyperparameterTuningJob", "trialJobSpec"),
    ):
        spec = (request.get(resource) or {}).get(key)
        if isinstance(spec, dict):
            return spec
    return request


def with_job_folder(request: dict[str, Any], job_folder: str) -> dict[str, Any]:
    """A copy of a rendered request (or CustomJobSpec) with its job-folder placeholder filled in.

    A request that resumes an earlier job's folder has no placeholder and comes back unchanged. The
    request-hash label is left as rendered, so it still matches every other submit of the template.
    """
    filled = copy.deepcopy(request)
    output = _job_spec_in(filled).get("baseOutputDirectory") or {}
    prefix = output.get("outputUriPrefix")
    if isinstance(prefix, str) and prefix.endswith(f"/{JOB_FOLDER}"):
        output["outputUriPrefix"] = prefix.removesuffix(JOB_FOLDER) + job_folder
    return filled


def output_dir_of(request: dict[str, Any]) -> str | None:
    """The outputUriPrefix of a request or CustomJobSpec, if it has one."""
    prefix = (_job_spec_in(request).get("baseOutputDirectory") or {}).get("outputUriPrefix")
    return prefix if isinstance(prefix, str) else None


def placeholder_package_uri(t: JobTemplate) -> str:
    """The package URI shown before the sdist is built (its digest names the real folder)."""
    name = (
        SCRIPT_PACKAGE
        if t.trainer.script is not None
        else (t.trainer.package.name if t.trainer.package else "")
    )
    return f"{t.staging_bucket.rstrip('/')}/vertexdist/packages/{PENDING}/{name}.tar.gz"


def placeholder_image_uri(t: JobTemplate) -> str:
    assert t.build is not None
    return f"{t.build.repository}/{t.build.image}:{PENDING}"


def _machine_spec(t: JobTemplate) -> dict[str, Any]:
    spec: dict[str, Any] = {"machineType": t.machine_type}
    # As in the SDK: accelerator fields only with a type and a positive count.
    if (
        t.accelerator_type
        and t.accelerator_type != "ACCELERATOR_TYPE_UNSPECIFIED"
        and t.accelerator_count > 0
    ):
        spec["acceleratorType"] = t.accelerator_type
        spec["acceleratorCount"] = t.accelerator_count
    return spec


def _env(t: JobTemplate) -> list[dict[str, str]]:
    env = [{"name": name, "value": value} for name, value in t.trainer.env.items()]
    if t.health is not None:  # the watcher in every worker reads it (vertexdist_launcher.health)
        env.append({"name": HEALTH_VARIABLE, "value": t.health.env_value()})
    return env


def launcher_argv(t: JobTemplate) -> list[str] | None:
    """The shipped launcher's arguments up to the user's module (its args follow); None for `python`."""
    trainer = t.trainer
    if trainer.launcher == "python":
        return None
    return launch_args(
        trainer.launcher,
        module=trainer.module,
        nproc_per_node=trainer.nproc_per_node,
        max_restarts=trainer.max_restarts,
    )


def _package_entry(t: JobTemplate, launcher: list[str] | None) -> tuple[str, list[str]]:
    """A Python package's `pythonModule` and the args before the user's own: the shipped launcher and its
    arguments (`launcher`, `launcher_argv`'s), `watched` and `-m MODULE` for the user's own module under
    `launcher: python`, or the bundled trainer's module alone."""
    if launcher is not None:
        return LAUNCHER_PACKAGE, launcher
    if t.trainer.is_bundled:
        return t.trainer.module, []
    return WATCHED_MODULE, ["-m", t.trainer.module]


def _training_code(t: JobTemplate, package_uri: str | None, image_uri: str | None) -> dict[str, Any]:
    launcher = launcher_argv(t)
    if t.build is not None:
        container: dict[str, Any] = {"imageUri": image_uri or placeholder_image_uri(t)}
        if launcher is not None:
            container["command"] = ["python", "-m", LAUNCHER_PACKAGE, *launcher]
        elif t.trainer.module != f"{BUNDLED_TRAINER}.task":
            # The image's ENTRYPOINT runs the bundled trainer; another module needs its own command. Not
            # through `watched`: the launcher is in the image only where the template's Dockerfile copies it.
            container["command"] = ["python", "-m", t.trainer.module]
        return {"containerSpec": {**container, "args": list(t.trainer.args), "env": _env(t)}}
    module, head = _package_entry(t, launcher)
    return {
        "pythonPackageSpec": {
            "executorImageUri": t.container_uri,
            "packageUris": [package_uri or placeholder_package_uri(t)],
            "pythonModule": module,
            "args": [*head, *t.trainer.args],
            "env": _env(t),
        }
    }


def _training_pool(
    t: JobTemplate, replicas: int, package_uri: str | None, image_uri: str | None
) -> dict[str, Any]:
    # Built fresh for each pool: shared dicts would come out as YAML anchors.
    return {
        "machineSpec": _machine_spec(t),
        "replicaCount": replicas,
        "diskSpec": {"bootDiskType": t.boot_disk_type, "bootDiskSizeGb": t.boot_disk_size_gb},
        **_training_code(t, package_uri, image_uri),
    }


def render_worker_pools(
    t: JobTemplate, *, package_uri: str | None = None, image_uri: str | None = None
) -> list[dict[str, Any]]:
    """The workerPoolSpecs list: chief, workers, reduction servers."""
    pools: list[dict[str, Any]] = [_training_pool(t, 1, package_uri, image_uri)]
    workers = t.replica_count - 1
    if workers > 0:
        pools.append(_training_pool(t, workers, package_uri, image_uri))
    if t.reduction_server_count > 0:
        if workers == 0:
            pools.append({})  # Vertex skips a pool given as an empty object
        pools.append(
            {
                "machineSpec": {"machineType": t.reduction_server_machine_type},
                "replicaCount": t.reduction_server_count,
                "diskSpec": dict(REDUCTION_SERVER_DISK),
                "containerSpec": {"imageUri": t.reduction_server_container_uri},
            }
        )
    return pools


def _scheduling(t: JobTemplate) -> dict[str, Any] | None:
    scheduling: dict[str, Any] = {}
    if t.timeout is not None:
        scheduling["timeout"] = format_duration(t.timeout)
    if t.restart_job_on_worker_restart:
        scheduling["restartJobOnWorkerRestart"] = True
    if t.scheduling_strategy is not None:
        scheduling["strategy"] = t.scheduling_strategy
    if t.max_wait_duration is not None:
        scheduling["maxWaitDuration"] = format_duration(t.max_wait_duration)
    return scheduling or None


def render_job_spec(
    t: JobTemplate,
    *,
    package_uri: str | None = None,
    image_uri: str | None = None,
    job_folder: str = JOB_FOLDER,
    resume_from: str | None = None,
) -> dict[str, Any]:
    """The CustomJobSpec in proto-JSON camelCase; placeholders stand in for what is not built or not
    started yet (the package digest, the image, the job's own output folder)."""
    output = job_output_dir(t, job_folder=job_folder, resume_from=resume_from)
    spec: dict[str, Any] = {
        "workerPoolSpecs": render_worker_pools(t, package_uri=package_uri, image_uri=image_uri),
        "baseOutputDirectory": {"outputUriPrefix": output},
    }
    scheduling = _scheduling(t)
    if scheduling is not None:
        spec["scheduling"] = scheduling
    if t.service_account is not None:
        spec["serviceAccount"] = t.service_account
    if t.network is not None:
        spec["network"] = t.network
    if t.tensorboard is not None:
        spec["tensorboard"] = t.tensorboard
    if t.enable_web_access:
        spec["enableWebAccess"] = True
    if t.experiment is not None:  # the context names CustomJob.run(experiment=, experiment_run=) sets
        store = f"projects/{t.project}/locations/{t.location}/metadataStores/default/contexts"
        spec["experiment"] = f"{store}/{t.experiment.name}"
        if t.experiment.experiment_run is not None:
            spec["experimentRun"] = f"{store}/{t.experiment.run_context_id(t.experiment.experiment_run)}"
    if t.persistent_resource_id is not None:
        spec["persistentResourceId"] = t.persistent_resource_id
    return spec
