"""Enum tables of the Vertex v1 API that the wire reader, the emulator and the Vertex backend share.

Values follow google.cloud.aiplatform.v1 (`job_state.proto`, `pipeline_state.proto`, `accelerator_type.proto`,
`custom_job.proto` Scheduling.Strategy). REST clients send `$alt=json;enum-encoding=int`, so enums arrive and
must leave as integers; other callers use names. Kept as data so none of them needs the SDK to read a body.
"""

from __future__ import annotations

JOB_STATES = (
    "JOB_STATE_UNSPECIFIED",
    "JOB_STATE_QUEUED",
    "JOB_STATE_PENDING",
    "JOB_STATE_RUNNING",
    "JOB_STATE_SUCCEEDED",
    "JOB_STATE_FAILED",
    "JOB_STATE_CANCELLING",
    "JOB_STATE_CANCELLED",
    "JOB_STATE_PAUSED",
    "JOB_STATE_EXPIRED",
    "JOB_STATE_UPDATING",
    "JOB_STATE_PARTIALLY_SUCCEEDED",
)

PIPELINE_STATES = (
    "PIPELINE_STATE_UNSPECIFIED",
    "PIPELINE_STATE_QUEUED",
    "PIPELINE_STATE_PENDING",
    "PIPELINE_STATE_RUNNING",
    "PIPELINE_STATE_SUCCEEDED",
    "PIPELINE_STATE_FAILED",
    "PIPELINE_STATE_CANCELLING",
    "PIPELINE_STATE_CANCELLED",
    "PIPELINE_STATE_PAUSED",
)

ACCELERATOR_TYPES = (
    "ACCELERATOR_TYPE_UNSPECIFIED",
    "NVIDIA_TESLA_K80",
    "NVIDIA_TESLA_P100",
    "NVIDIA_TESLA_V100",
    "NVIDIA_TESLA_P4",
    "NVIDIA_TESLA_T4",
    "TPU_V2",
    "TPU_V3",
    "NVIDIA_TESLA_A100",
    "NVIDIA_A100_80GB",
    "TPU_V4_POD",
    "NVIDIA_L4",
    "TPU_V5_LITEPOD",
    "NVIDIA_H100_80GB",
    "NVIDIA_H100_MEGA_80GB",
    "NVIDIA_H200_141GB",
    "NVIDIA_B200",
    "NVIDIA_GB200",
    "NVIDIA_RTX_PRO_6000",
)

SCHEDULING_STRATEGIES = {
    "STRATEGY_UNSPECIFIED": 0,
    "ON_DEMAND": 1,
    "LOW_COST": 2,
    "STANDARD": 3,
    "SPOT": 4,
    "FLEX_START": 6,
}

TERMINAL_JOB_STATES = frozenset(
    {"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"}
)


def job_to_pipeline_state(job_state: str) -> str:
    """The pipeline state that mirrors its backing CustomJob's state."""
    suffix = job_state.removeprefix("JOB_STATE_")
    name = f"PIPELINE_STATE_{suffix}"
    return name if name in PIPELINE_STATES else "PIPELINE_STATE_RUNNING"


def enum_name(table: tuple[str, ...] | dict[str, int], value: object, field: str) -> str:
    """Accept an enum as its name or its number (enum-encoding=int); raise ValueError naming the field."""
    names = list(table)
    numbers = table if isinstance(table, dict) else {n: i for i, n in enumerate(table)}
    if isinstance(value, bool):
        raise ValueError(f"{field}: expected an enum name or number, got {value!r}")
    if isinstance(value, int | float) and float(value).is_integer():
        for name, number in numbers.items():
            if number == int(value):
                return name
        raise ValueError(f"{field}: unknown enum number {value!r}")
    if isinstance(value, str) and value in names:
        return value
    raise ValueError(f"{field}: unknown value {value!r}; accepted: {', '.join(names)}")


def enum_number(table: tuple[str, ...] | dict[str, int], name: str) -> int:
    if isinstance(table, dict):
        return table[name]
    return table.index(name)


# study.proto: the StudySpec of a HyperparameterTuningJob and the states of its trials.
TRIAL_STATES = ("STATE_UNSPECIFIED", "REQUESTED", "ACTIVE", "STOPPING", "SUCCEEDED", "INFEASIBLE")
STUDY_ALGORITHMS = {"ALGORITHM_UNSPECIFIED": 0, "GRID_SEARCH": 2, "RANDOM_SEARCH": 3}
GOAL_TYPES = ("GOAL_TYPE_UNSPECIFIED", "MAXIMIZE", "MINIMIZE")
SCALE_TYPES = ("SCALE_TYPE_UNSPECIFIED", "UNIT_LINEAR_SCALE", "UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE")
MEASUREMENT_SELECTION_TYPES = (
    "MEASUREMENT_SELECTION_TYPE_UNSPECIFIED",
    "LAST_MEASUREMENT",
    "BEST_MEASUREMENT",
)
