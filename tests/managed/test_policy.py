"""The managed decision core: an ended attempt's status -> its reason -> the next place, or stop."""

from __future__ import annotations

import pytest

from vertexdist.backends.base import JobStatus
from vertexdist.backends.errors import ApiCallError
from vertexdist.managed.policy import decide
from vertexdist.managed.reasons import Reason, reason_of, reason_of_refusal
from vertexdist.spec.recovery import FallbackSpec, RecoverySpec


def status(state: str, error: str | None = None) -> JobStatus:
    return JobStatus(
        name="projects/p/locations/us-central1/trainingPipelines/1",
        display_name="d",
        state=state,
        error=error,
    )


@pytest.mark.parametrize(
    ("state", "error", "reason"),
    [
        ("RUNNING", None, Reason.RUNNING),
        ("PENDING", None, Reason.RUNNING),
        ("SUCCEEDED", None, Reason.SUCCEEDED),
        ("CANCELLED", None, Reason.CANCELLED),
        ("FAILED", "The replica workerpool0-0 was preempted (Spot VM reclaimed)", Reason.PREEMPTED),
        ("FAILED", "Resources are insufficient in region: us-central1.", Reason.STOCKOUT),
        ("FAILED", "FLEX_START: no capacity within max_wait_duration 600s", Reason.STOCKOUT),
        ("EXPIRED", None, Reason.STOCKOUT),
        (
            "FAILED",
            "The following quota metrics exceed quota limits: aiplatform.googleapis.com/"
            "custom_model_training_nvidia_a100_gpus",
            Reason.QUOTA,
        ),
        (
            "FAILED",
            "The replica workerpool0-0 exited with a non-zero status of 1. Traceback ...",
            Reason.USER_ERROR,
        ),
        ("FAILED", None, Reason.USER_ERROR),
        (
            "FAILED",
            "hung: no progress for 30s; rank 3 (workerpool1-0, local rank 1) is in f (t.py:2)",
            Reason.HUNG,
        ),
        ("FAILED", "The replica workerpool1-0 exited with a non-zero status of 124.", Reason.HUNG),
    ],
)
def test_each_reported_end_has_its_reason(state: str, error: str | None, reason: Reason) -> None:
    assert reason_of(status(state, error)) is reason


def test_refused_creates() -> None:
    quota = ApiCallError("The following quota metrics exceed quota limits: x_gpus", None, 429)
    assert reason_of_refusal(quota) is Reason.QUOTA
    assert reason_of_refusal(ApiCallError("unavailable", None, 503)) is Reason.TRANSIENT
    assert reason_of_refusal(ApiCallError("rate limited", None, 429)) is Reason.TRANSIENT
    assert reason_of_refusal(ConnectionResetError("reset by peer")) is Reason.TRANSIENT
    assert reason_of_refusal(ApiCallError("bad machine type", None, 400)) is None
    assert reason_of_refusal(ValueError("bug")) is None


RECOVERY = RecoverySpec(
    max_preemptions=3,
    max_restarts_on_errors=1,
    fallback=[FallbackSpec(location="us-east1"), FallbackSpec(scheduling_strategy="STANDARD")],
)


def test_preemption_retries_in_the_same_place_until_the_limit() -> None:
    assert decide(RECOVERY, 1, Reason.PREEMPTED, [Reason.PREEMPTED]).place == 1
    assert decide(RECOVERY, 1, Reason.PREEMPTED, [Reason.PREEMPTED] * 3).place == 1
    stop = decide(RECOVERY, 1, Reason.PREEMPTED, [Reason.PREEMPTED] * 4)
    assert stop.place is None and "max_preemptions is 3" in stop.why


def test_stockout_and_quota_move_to_the_next_place_and_wrap_round() -> None:
    assert decide(RECOVERY, 0, Reason.STOCKOUT, [Reason.STOCKOUT]).place == 1
    assert decide(RECOVERY, 1, Reason.QUOTA, [Reason.STOCKOUT, Reason.QUOTA]).place == 2
    assert decide(RECOVERY, 2, Reason.STOCKOUT, [Reason.STOCKOUT, Reason.QUOTA, Reason.STOCKOUT]).place == 0
    # Capacity reasons share one budget, user errors have their own.
    mixed = [Reason.USER_ERROR, Reason.PREEMPTED, Reason.STOCKOUT, Reason.QUOTA, Reason.STOCKOUT]
    assert decide(RECOVERY, 0, Reason.STOCKOUT, mixed).place is None


def test_user_errors_restart_only_within_max_restarts_on_errors() -> None:
    assert decide(RECOVERY, 2, Reason.USER_ERROR, [Reason.USER_ERROR]).place == 2
    stop = decide(RECOVERY, 2, Reason.USER_ERROR, [Reason.PREEMPTED, Reason.USER_ERROR, Reason.USER_ERROR])
    assert stop.place is None and "max_restarts_on_errors is 1" in stop.why
    assert decide(RecoverySpec(), 0, Reason.USER_ERROR, [Reason.USER_ERROR]).place is None


def test_a_hung_attempt_is_retried_in_the_same_place_within_max_hangs() -> None:
    assert decide(RecoverySpec(), 1, Reason.HUNG, [Reason.PREEMPTED, Reason.HUNG]).place == 1
    assert decide(RecoverySpec(), 1, Reason.HUNG, [Reason.HUNG, Reason.HUNG]).place == 1
    stop = decide(RecoverySpec(), 1, Reason.HUNG, [Reason.HUNG] * 3)
    assert stop.place is None and "max_hangs is 2" in stop.why
    assert decide(RecoverySpec(max_hangs=0), 0, Reason.HUNG, [Reason.HUNG]).place is None


def test_success_and_cancel_stop() -> None:
    assert decide(RECOVERY, 0, Reason.SUCCEEDED, [Reason.SUCCEEDED]).place is None
    assert decide(RECOVERY, 0, Reason.CANCELLED, [Reason.CANCELLED]).place is None
    with pytest.raises(ValueError, match="ended attempts"):
        decide(RECOVERY, 0, Reason.RUNNING, [])


def test_the_controller_reads_every_shape_the_emulator_makes_as_wire_capacity_errors_does() -> None:
    from vertexdist.wire import capacity_errors as shapes

    errors: list[dict[str, object]] = [
        shapes.stockout_error("us-central1"),
        shapes.preemption_error("workerpool0-0"),
        shapes.flex_expired_error(600),
        {"code": 8, "message": shapes.quota_message("NVIDIA_TESLA_A100", "us-central1")},
        {"code": 3, "message": "The replica workerpool0-0 exited with a non-zero status of 1."},
    ]
    for error in errors:
        # A JobStatus carries the message only (the code stays with Vertex): the words must be enough.
        ours = reason_of(status("FAILED", str(error["message"])))
        assert ours.value == shapes.reason_of("JOB_STATE_FAILED", error), error
    quota = ApiCallError(shapes.quota_message(None, "us-central1"), None, shapes.HTTP_TOO_MANY_REQUESTS)
    assert reason_of_refusal(quota) is Reason.QUOTA
