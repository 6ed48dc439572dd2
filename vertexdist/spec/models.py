"""The job template models (pydantic v2): one flat `JobTemplate` mirroring `CustomTrainingJob.run()`.

Field names follow the SDK's `CustomTrainingJob.run()` (docs/templates.md lists them); see
docs/reference/vertex.md §2 and §4 for what each maps to in Vertex.
Per-field checks live here; checks across fields and against the machine catalog live in `rules`.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import itertools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from vertexdist.errors import VertexdistError
from vertexdist.spec.catalog_data import (
    BOOT_DISK_SIZE_RANGE_GB,
    DEFAULT_CONTAINER_URI,
    DEFAULT_REDUCTION_SERVER_CONTAINER_URI,
    DEFAULT_REDUCTION_SERVER_MACHINE_TYPE,
    MACHINES,
)
from vertexdist.spec.durations import ACCEPTED_FORMS, DURATION_PATTERN, parse_duration
from vertexdist.spec.experiment import ExperimentSpec
from vertexdist.spec.health import HealthSpec
from vertexdist.spec.model_upload import ModelUploadSpec
from vertexdist.spec.names import BUNDLED_TRAINER, SCRIPT_PACKAGE, display_name_problem
from vertexdist.spec.recovery import RecoverySpec
from vertexdist.spec.tuning import TuningSpec

# How a training replica starts the module. `python`: Vertex runs `python -m module` once per machine;
# every other mode is one of the shipped launcher's (vertexdist_launcher.options.MODES).
Launcher = Literal["python", "torchrun", "ray"]
LAUNCHERS: tuple[str, ...] = get_args(Launcher)
_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _stringify_scalar(value: Any) -> Any:
    """Numbers in args and env become strings (`--epochs: 3` is common); booleans stay an error."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


def _duration(value: Any) -> Any:
    if value is None:
        return None
    seconds = parse_duration(value)
    if not seconds.is_integer():
        raise ValueError(f"{value!r}: a template's durations are whole seconds")
    return int(seconds)


def _param_count(value: Any) -> Any:
    """7.5B, 350M, 1.3e9 or 350000000 -> a number of parameters; anything else a clear error."""
    from vertexdist.estimate.units import UnitError, parse_params

    if value is None or isinstance(value, bool) or not isinstance(value, (int, float, str)):
        if value is None:
            return None
        raise ValueError(f"{value!r} is not a parameter count")
    try:
        return parse_params(str(value))
    except UnitError as exc:
        raise ValueError(str(exc)) from None


ParamCount = Annotated[
    float,
    BeforeValidator(_param_count),
    WithJsonSchema(
        {
            "type": ["string", "number"],
            "examples": ["7.5B", "350M", "1.3e9"],
            "description": "A parameter count: a number with K, M, B (or G) or T, or written out.",
        }
    ),
]
ArgString = Annotated[
    str,
    BeforeValidator(_stringify_scalar),
    WithJsonSchema({"type": ["string", "number"], "description": "Text; numbers are turned into text."}),
]
Duration = Annotated[
    int,
    BeforeValidator(_duration),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 1},
                {"type": "string", "pattern": DURATION_PATTERN, "examples": ["3600s", "90m", "24h", "7d"]},
            ],
            "description": f"A duration: {ACCEPTED_FORMS}.",
        }
    ),
]


def _base_dir(info: ValidationInfo) -> Path:
    context = info.context or {}
    base = context.get("base_dir")
    return Path(base) if base is not None else Path.cwd()


def _resolve(value: Any, info: ValidationInfo) -> Any:
    if value is None or not isinstance(value, (str, Path)):
        return value
    path = Path(value).expanduser()
    return (path if path.is_absolute() else _base_dir(info) / path).resolve()


# A folder of thousands of files is not searched for a did-you-mean.
_NEIGHBOURS_LOOKED_AT = 2000


def _shown_path(path: Path, info: ValidationInfo) -> str:
    base = _base_dir(info).resolve()
    return str(path.relative_to(base)) if path.is_relative_to(base) else str(path)


def not_found(
    message: str, path: Path, info: ValidationInfo, fits: Callable[[Path], bool]
) -> PydanticCustomError:
    """An error for a path that does not exist, with the nearest name beside it that would do, if any."""
    hint = None
    if path.parent.is_dir():
        names = [p.name for p in itertools.islice(path.parent.iterdir(), _NEIGHBOURS_LOOKED_AT) if fits(p)]
        close = difflib.get_close_matches(path.name, names, n=1, cutoff=0.6)
        if close:
            hint = f"did you mean `{_shown_path(path.parent / close[0], info)}`?"
    return PydanticCustomError("path_not_found", "{message}", {"message": message, "hint": hint})


def _module_names(package: Path) -> list[str]:
    found = itertools.islice(package.rglob("*.py"), _NEIGHBOURS_LOOKED_AT)
    names = []
    for file in found:
        parts = file.relative_to(package.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


@functools.lru_cache(maxsize=1)
def bundled_trainer_dir() -> Path:
    """The folder of the installed `trainer_pkg`, found without importing it (it imports torch)."""
    spec = importlib.util.find_spec(BUNDLED_TRAINER)
    if spec is None or not spec.submodule_search_locations:
        raise VertexdistError(
            "the bundled trainer package `trainer_pkg` is not installed",
            hint="install vertexdist with its trainer, or set `trainer.package` in the template",
        )
    return Path(next(iter(spec.submodule_search_locations))).resolve()


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)


class TrainerSpec(_Strict):
    """The code every training replica runs: a Python package folder or one script (like the SDK's)."""

    package: Path | None = Field(
        default=None,
        description="Folder of a Python package (with __init__.py), relative to the template file.",
    )
    script: Path | None = Field(
        default=None, description="One .py file, relative to the template file; packaged like the SDK does."
    )
    module: str = Field(
        default="",
        description=(
            "Module to run with `python -m`. Default: `<package folder>.task` for a package,"
            f" `{SCRIPT_PACKAGE}.task` for a script, `{BUNDLED_TRAINER}.task` for the bundled trainer."
        ),
    )
    args: list[ArgString] = Field(default_factory=list, description="Command-line arguments for the module.")
    env: dict[str, ArgString] = Field(
        default_factory=dict, description="Environment variables for every training replica."
    )
    requirements: list[str] = Field(
        default_factory=list, description="pip requirements installed with the package (like the SDK's)."
    )
    launcher: Launcher = Field(
        default="python",
        description=(
            "How every training replica starts the module. python: `python -m module` once per machine"
            " (Vertex's own way); torchrun: torch.distributed.run on every replica, one process per"
            " GPU, nodes and ranks from CLUSTER_SPEC; ray: a Ray cluster over the replicas (the head on"
            " the primary replica) and the module as its driver on the head (the shipped"
            " vertexdist_launcher does both)."
        ),
    )
    nproc_per_node: int | None = Field(
        default=None,
        ge=1,
        description=(
            "With launcher torchrun: processes per replica. Default: one per GPU of the machine"
            " (accelerator_count, counted on the machine), 1 on CPU machines."
        ),
    )
    max_restarts: int = Field(
        default=0,
        ge=0,
        description=(
            "With launcher torchrun: how often torchrun restarts a replica's processes after one"
            " fails (torchrun --max-restarts)."
        ),
    )

    @property
    def is_bundled(self) -> bool:
        """Code of the trainer shipped with vertexdist (`trainer_pkg`), which starts its own workers."""
        return self.module.split(".")[0] == BUNDLED_TRAINER

    @classmethod
    def bundled(cls) -> TrainerSpec:
        """The trainer shipped with vertexdist (`trainer_pkg`), used when a template names no code."""
        return cls(package=bundled_trainer_dir(), module=f"{BUNDLED_TRAINER}.task")

    @model_validator(mode="before")
    @classmethod
    def _fill_defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if data.get("package") is None and data.get("script") is None:
            # No code named: the bundled trainer, with this template's args/env.
            data = {**data, "package": str(bundled_trainer_dir())}
            data.setdefault("module", f"{BUNDLED_TRAINER}.task")
        return data

    _resolve_package = field_validator("package", "script", mode="before")(_resolve)

    @field_validator("package")
    @classmethod
    def _package_is_a_package(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is None:
            return value
        if not value.is_dir():
            raise not_found(
                f"package folder {str(value)!r} does not exist",
                value,
                info,
                lambda p: (p / "__init__.py").is_file(),
            )
        if not (value / "__init__.py").is_file():
            raise ValueError(f"{str(value)!r} is not a Python package: it has no __init__.py")
        if not value.name.isidentifier():
            raise ValueError(f"package folder name {value.name!r} is not a valid Python package name")
        return value

    @field_validator("script")
    @classmethod
    def _script_is_a_file(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is None:
            return value
        if value.suffix != ".py":
            raise ValueError(f"script {str(value)!r} must be a .py file")
        if not value.is_file():
            raise not_found(
                f"script {str(value)!r} does not exist",
                value,
                info,
                lambda p: p.suffix == ".py" and p.is_file(),
            )
        return value

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not _ENV_NAME.match(name):
                raise ValueError(f"{name!r} is not a valid environment variable name (letters, digits, _)")
        return value

    @model_validator(mode="after")
    def _one_kind_of_code(self) -> TrainerSpec:
        if self.package is not None and self.script is not None:
            raise ValueError("set either `package` or `script`, not both")
        if self.script is not None:
            default = f"{SCRIPT_PACKAGE}.task"
            if self.module and self.module != default:
                raise ValueError(f"with `script`, the module is always {default!r}; remove `module`")
            object.__setattr__(self, "module", default)
            return self
        assert self.package is not None  # _fill_defaults guarantees code
        module = self.module or f"{self.package.name}.task"
        if not _MODULE_NAME.match(module):
            raise ValueError(f"module {module!r} is not a dotted Python module name")
        top, *rest = module.split(".")
        if top != self.package.name:
            raise ValueError(
                f"module {module!r} is not inside package {self.package.name!r}; "
                f"write it as {self.package.name}.<module>"
            )
        target = self.package.joinpath(*rest) if rest else self.package
        exists = target.with_suffix(".py").is_file() or (target / "__init__.py").is_file()
        # The bundled trainer is ours and is checked by its own tests.
        if not exists and self.package != bundled_trainer_dir():
            close = difflib.get_close_matches(module, _module_names(self.package), n=1, cutoff=0.6)
            raise PydanticCustomError(
                "path_not_found",
                "{message}",
                {
                    "message": f"module {module!r} has no file in {str(self.package)!r}",
                    "hint": f"did you mean `{close[0]}`?" if close else None,
                },
            )
        object.__setattr__(self, "module", module)
        return self


_REPOSITORY = re.compile(
    r"^(?P<region>[a-z0-9-]+)-docker\.pkg\.dev/(?P<project>[a-z][a-z0-9-]{4,28}[a-z0-9])/[a-z][a-z0-9-]{0,62}$"
)
_IMAGE_NAME = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$")


class BuildSpec(_Strict):
    """Build the trainer into a container image (Cloud Build) and run that image on every training pool."""

    dockerfile: Path = Field(default=Path("Dockerfile"), description="Dockerfile, relative to the template.")
    context: Path = Field(default=Path("."), description="Build context folder, relative to the template.")
    repository: str = Field(
        description="Artifact Registry repository: REGION-docker.pkg.dev/PROJECT/REPO.",
        examples=["us-central1-docker.pkg.dev/vertexdist-demo/trainers"],
    )
    image: str = Field(default="vertexdist-trainer", description="Image name inside the repository.")
    build_args: dict[str, ArgString] = Field(default_factory=dict, description="Docker --build-arg values.")

    _resolve_paths = field_validator("dockerfile", "context", mode="before")(_resolve)

    @field_validator("context")
    @classmethod
    def _context_exists(cls, value: Path, info: ValidationInfo) -> Path:
        if not value.is_dir():
            raise not_found(
                f"build context folder {str(value)!r} does not exist", value, info, lambda p: p.is_dir()
            )
        return value

    @field_validator("dockerfile")
    @classmethod
    def _dockerfile_exists(cls, value: Path, info: ValidationInfo) -> Path:
        if not value.is_file():
            raise not_found(f"Dockerfile {str(value)!r} does not exist", value, info, lambda p: p.is_file())
        return value

    @field_validator("repository")
    @classmethod
    def _repository_shape(cls, value: str) -> str:
        if not _REPOSITORY.match(value):
            raise ValueError(
                f"{value!r} is not an Artifact Registry repository; "
                "write REGION-docker.pkg.dev/PROJECT/REPO,"
                " e.g. us-central1-docker.pkg.dev/my-project/trainers"
            )
        return value

    @field_validator("image")
    @classmethod
    def _image_name(cls, value: str) -> str:
        if not _IMAGE_NAME.match(value) or len(value) > 128:
            raise ValueError(f"{value!r} is not an image name (lowercase letters, digits, . _ - and /)")
        return value

    def repository_region(self) -> str:
        match = _REPOSITORY.match(self.repository)
        assert match is not None  # checked by the validator
        return match.group("region")


_PROJECT_ID = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
# Legacy domain-scoped ids ("example.com:my-project") are still valid project ids.
_DOMAIN_PROJECT_ID = re.compile(r"^[a-z0-9.-]+\.[a-z]{2,}:[a-z][a-z0-9-]{4,28}[a-z0-9]$")


def project_id_problem(value: str) -> str | None:
    """What is wrong with a Google Cloud project id (a template's, a flag's, the environment's), or None."""
    if _PROJECT_ID.match(value) or _DOMAIN_PROJECT_ID.match(value):
        return None
    return (
        f"{value!r} is not a project id: 6-30 lowercase letters, digits or hyphens,"
        " starting with a letter and not ending with a hyphen"
    )


class JobTemplate(_Strict):
    """One distributed training job. The flat fields mirror `CustomTrainingJob.run()` of the Vertex SDK."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        str_strip_whitespace=True,
        title="vertexdist job template",
        json_schema_extra={"$id": "https://vertexdist.dev/schema/job-template.json"},
    )

    display_name: str = Field(description="Name shown in the Vertex console (at most 128 characters).")
    project: str | None = Field(
        default=None,
        description=(
            "Google Cloud project id, e.g. my-project. Optional: submit takes --project first, then this,"
            " then GOOGLE_CLOUD_PROJECT."
        ),
    )
    location: str = Field(default="us-central1", description="Vertex AI region, e.g. us-central1.")
    staging_bucket: str = Field(description="gs:// folder where the trainer package is uploaded.")
    base_output_dir: str | None = Field(
        default=None,
        description=(
            "gs:// folder under which each job gets its own output folder, <base_output_dir>/<job folder>"
            " (AIP_MODEL_DIR, AIP_CHECKPOINT_DIR etc. are under that), so no job resumes another's"
            " checkpoints. Default: <staging_bucket>/vertexdist/output/<display_name>. To continue an"
            " earlier job in its folder, pass --resume-from JOB."
        ),
    )
    container_uri: str = Field(
        default=DEFAULT_CONTAINER_URI,
        description="Prebuilt Vertex training image that runs the trainer package (executorImageUri).",
    )
    trainer: TrainerSpec = Field(
        default_factory=TrainerSpec.bundled,
        description="The code to run. Default: the bundled trainer_pkg (module trainer_pkg.task).",
    )
    machine_type: str = Field(
        default="n1-standard-4", description="Vertex machine type of every training node."
    )
    accelerator_type: str | None = Field(
        default=None, description="GPU type per node, e.g. NVIDIA_TESLA_A100 (the 40GB A100). Omit for CPU."
    )
    accelerator_count: int = Field(
        default=0, ge=0, description="GPUs per node; must be one the machine takes."
    )
    replica_count: int = Field(
        default=1, ge=1, description="Training nodes: 1 primary + (replica_count-1) workers."
    )
    reduction_server_count: int = Field(
        default=0,
        ge=0,
        description="Reduction Server replicas (worker pool 2); SDK: reduction_server_replica_count.",
    )
    reduction_server_machine_type: str = Field(
        default=DEFAULT_REDUCTION_SERVER_MACHINE_TYPE,
        description="CPU machine type of the reduction servers.",
    )
    reduction_server_container_uri: str = Field(
        default=DEFAULT_REDUCTION_SERVER_CONTAINER_URI, description="Reduction Server image."
    )
    boot_disk_type: str = Field(
        default="pd-ssd",
        description="pd-ssd, pd-standard or hyperdisk-balanced (default on a3-ultragpu-8g and a4 machines).",
    )
    boot_disk_size_gb: int = Field(
        default=100,
        ge=BOOT_DISK_SIZE_RANGE_GB[0],
        le=BOOT_DISK_SIZE_RANGE_GB[1],
        description="Boot disk size in GB, 100..64000.",
    )
    timeout: Duration | None = Field(
        default=None, description="Maximum run time; Vertex's default is 7 days."
    )
    restart_job_on_worker_restart: bool = Field(
        default=False, description="Restart the whole job when any worker restarts (recommended for DDP)."
    )
    scheduling_strategy: str | None = Field(default=None, description="STANDARD, SPOT or FLEX_START.")
    max_wait_duration: Duration | None = Field(
        default=None, description="How long FLEX_START/SPOT may wait for resources."
    )
    service_account: str | None = Field(default=None, description="Service account email the job runs as.")
    network: str | None = Field(
        default=None, description="VPC to peer with: projects/PROJECT_NUMBER/global/networks/NETWORK."
    )
    persistent_resource_id: str | None = Field(
        default=None,
        description=(
            "Run on the machines of this Vertex persistent resource (its id, in the job's project and"
            " location) instead of provisioning new ones."
        ),
    )
    labels: dict[str, str] = Field(default_factory=dict, description="GCP labels for the training pipeline.")
    enable_web_access: bool = Field(default=False, description="Interactive shell on the training replicas.")
    tensorboard: str | None = Field(
        default=None,
        description="Tensorboard resource: projects/P/locations/L/tensorboards/ID (needs service_account).",
    )
    model_params: ParamCount | None = Field(
        default=None,
        description=(
            "Parameters of the model the job trains, e.g. 7.5B, 350M or 1.3e9 (K, M, B, T). Optional:"
            " `vertexdist estimate` plans its memory per GPU (DDP, ZeRO-1/2/3, FSDP) from it, and"
            " `validate` warns when no strategy the job can use fits its GPUs."
        ),
    )
    build: BuildSpec | None = Field(
        default=None, description="Build the trainer into a container image instead of a Python package."
    )
    tuning: TuningSpec | None = Field(
        default=None,
        description="Make it a hyperparameter tuning job: the job runs once per trial, with its values.",
    )
    experiment: ExperimentSpec | None = Field(
        default=None,
        description="Log the job as a run of this Vertex AI Experiment: params, final metrics, scalars.",
    )
    recovery: RecoverySpec | None = Field(
        default=None,
        description=(
            "What `submit --managed` does when an attempt is preempted, stocked out, refused for quota or"
            " fails: how many new attempts, and the fallback places to try."
        ),
    )
    health: HealthSpec | None = Field(
        default=None,
        description=(
            "Rank health: `hang_timeout` (default 30m, `never`: off) ends a job no rank of which makes"
            " progress; `straggler_ratio` (default 1.5) flags a rank slower than the others;"
            " `rendezvous_timeout` (default 10m) is how long ranks wait for each other to join."
        ),
    )

    model: ModelUploadSpec | None = Field(
        default=None,
        description=(
            "Upload the trained model to the Model Registry once the job succeeds (a new model, or a new"
            " version of `parent_model`), served by `serving_container_image_uri`."
        ),
    )

    _source_path: Path | None = PrivateAttr(default=None)

    @property
    def source_path(self) -> Path | None:
        """The file this template was loaded from (None when built in code)."""
        return self._source_path

    @model_validator(mode="before")
    @classmethod
    def _machine_defaults(cls, data: Any) -> Any:
        # a3-ultragpu-8g and a4 machines boot from hyperdisk-balanced; every other machine from pd-ssd.
        if isinstance(data, dict) and "boot_disk_type" not in data:
            machine_type = data.get("machine_type")
            row = MACHINES.get(machine_type) if isinstance(machine_type, str) else None
            if row is not None:
                data = {**data, "boot_disk_type": row.default_boot_disk_type}
        return data

    @field_validator("project")
    @classmethod
    def _project_id(cls, value: str | None) -> str | None:
        problem = None if value is None else project_id_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("display_name")
    @classmethod
    def _display_name(cls, value: str) -> str:
        problem = display_name_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _rules_hold(self, info: ValidationInfo) -> JobTemplate:
        # The loader runs the rules itself (to place each finding on its line); code that builds a
        # template directly gets the same errors here.
        if (info.context or {}).get("skip_rules"):
            return self
        from vertexdist.spec.rules import check_template

        errors = [f for f in check_template(self) if f.severity == "error"]
        if errors:
            raise ValueError("; ".join(f"{f.path}: {f.message}" for f in errors))
        return self
