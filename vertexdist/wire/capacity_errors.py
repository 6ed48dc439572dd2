"""The shapes Vertex reports when capacity is taken away or refused, and how to read an ended job by them.

The emulator's fault plans produce exactly these shapes, and a controller (`submit --managed`) reads real
Vertex and the emulator with the same `reason_of`. Facts and readings: docs/reference/vertex.md §8.

- quota: the create call answers HTTP 429, status RESOURCE_EXHAUSTED, `quota_message(...)`;
- stockout: the job ends JOB_STATE_FAILED, `error.code` 8, "Resources are insufficient in region: R";
- preemption: JOB_STATE_FAILED, code 8, a message naming the preempted replica;
- a Flex-start wait that runs out: JOB_STATE_FAILED, code 8, a message naming max_wait_duration
  (JOB_STATE_EXPIRED is read the same way, should Vertex send it).

Pure: no I/O, no google imports.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

# google.rpc.Code.RESOURCE_EXHAUSTED: the code of a job's `error` when capacity or quota ran out.
CODE_RESOURCE_EXHAUSTED = 8
CODE_CANCELLED = 1
HTTP_TOO_MANY_REQUESTS = 429
STATUS_RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"

STOCKOUT_PREFIX = "Resources are insufficient in region"
QUOTA_PREFIX = "The following quota metrics exceed quota limits"
PREEMPTED_MARK = "was preempted"
FLEX_EXPIRED_MARK = "max_wait_duration"

Reason = Literal["PREEMPTED", "STOCKOUT", "QUOTA", "USER_ERROR", "CANCELLED", "SUCCEEDED", "RUNNING"]


def gpu_quota_metric(accelerator_type: str | None) -> str:
    """The regional quota metric a job's GPUs count against, e.g. NVIDIA_TESLA_A100 ->
    aiplatform.googleapis.com/custom_model_training_nvidia_a100_gpus; CPUs without an accelerator."""
    if not accelerator_type or accelerator_type == "ACCELERATOR_TYPE_UNSPECIFIED":
        return "aiplatform.googleapis.com/custom_model_training_cpus"
    short = accelerator_type.lower().removeprefix("nvidia_").removeprefix("tesla_")
    short = {"h100_80gb": "h100"}.get(short, short)
    return f"aiplatform.googleapis.com/custom_model_training_nvidia_{short}_gpus"


def quota_message(accelerator_type: str | None, region: str) -> str:
    """The message of a create refused for quota (HTTP 429, RESOURCE_EXHAUSTED)."""
    return (
        f"{QUOTA_PREFIX}: {gpu_quota_metric(accelerator_type)}. "
        f"Request a higher quota limit for region {region}."
    )


def stockout_error(region: str) -> dict[str, object]:
    """The `error` of a job Vertex failed for want of capacity in `region`."""
    return {
        "code": CODE_RESOURCE_EXHAUSTED,
        "message": f"{STOCKOUT_PREFIX}: {region}. Change the region or the machine type and try again.",
    }


def preemption_error(replica: str) -> dict[str, object]:
    """The `error` of a job failed because `replica`'s Spot VM was reclaimed."""
    return {
        "code": CODE_RESOURCE_EXHAUSTED,
        "message": (
            f"The replica {replica} {PREEMPTED_MARK}: Compute Engine reclaimed its Spot VM. "
            "Retry the job to get new capacity."
        ),
    }


def flex_expired_error(max_wait_s: float) -> dict[str, object]:
    """The `error` of a FLEX_START job whose resources did not come within its max_wait_duration."""
    return {
        "code": CODE_RESOURCE_EXHAUSTED,
        "message": (
            f"{STOCKOUT_PREFIX}: the requested resources were not available within "
            f"{FLEX_EXPIRED_MARK} ({max_wait_s:g}s)."
        ),
    }


def is_quota_refusal(http_status: int, message: str) -> bool:
    """Whether a refused create (its HTTP status and message) is a quota refusal."""
    return http_status == HTTP_TOO_MANY_REQUESTS and QUOTA_PREFIX in message


def reason_of(state: str, error: Mapping[str, object] | None) -> Reason:
    """Why a job is where it is: `state` as Vertex names it (JOB_STATE_* or PIPELINE_STATE_*), `error` its
    `error` object (`{"code", "message"}`) or None."""
    short = state.removeprefix("JOB_STATE_").removeprefix("PIPELINE_STATE_")
    if short == "SUCCEEDED":
        return "SUCCEEDED"
    if short in ("CANCELLED", "CANCELLING"):
        return "CANCELLED"
    if short == "EXPIRED":
        return "STOCKOUT"
    if short != "FAILED":
        return "RUNNING"
    code = error.get("code") if error else None
    message = str(error.get("message", "")) if error else ""
    if code == CODE_RESOURCE_EXHAUSTED or STOCKOUT_PREFIX in message or QUOTA_PREFIX in message:
        if PREEMPTED_MARK in message:
            return "PREEMPTED"
        if QUOTA_PREFIX in message:
            return "QUOTA"
        if STOCKOUT_PREFIX in message or FLEX_EXPIRED_MARK in message:
            return "STOCKOUT"
        return "STOCKOUT"  # code 8 with other words: capacity, the conservative reading
    return "USER_ERROR"
