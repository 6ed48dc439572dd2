"""What a Spot run is expected to cost once preemptions are counted: each preemption costs the work since the
last checkpoint (recomputed) and a new attempt's start-up, both paid at the Spot price.

With `rate` preemptions per hour of Spot time and `lost` hours per preemption (recomputed work + start-up),
a run needing `hours` of useful work takes `hours / (1 - rate * lost)` Spot hours on average (each Spot hour
brings `rate` preemptions, each wasting `lost` hours); when `rate * lost >= 1` it is not expected to finish.
Figures and their sources: docs/commands/estimate.md ("Spot and preemptions").
"""

from __future__ import annotations

from dataclasses import dataclass

# Our figure, not Google's: Google publishes no preemption rate for Spot VMs (they "may be preempted at any
# time"); GPU Spot capacity is reclaimed more often than CPU, so we assume one preemption per 10 hours.
DEFAULT_PREEMPTIONS_PER_HOUR = 0.1
# Work redone per preemption: on average half the time between checkpoints, for a trainer that saves every
# 30 minutes and not on SIGTERM (the bundled trainer and the pattern in the docs lose less).
RECOMPUTED_MINUTES = 15.0
# A new attempt's start-up: VMs provisioned, the image pulled, the job's set-up run (Vertex: minutes).
RESTART_MINUTES = 10.0


@dataclass(frozen=True)
class SpotExpectation:
    rate_per_hour: float
    hours: float  # useful hours of work
    lost_hours_per_preemption: float
    spot_hours: float | None  # expected Spot hours in all; None: not expected to finish
    preemptions: float | None

    @property
    def finishes(self) -> bool:
        return self.spot_hours is not None


def expect_spot(
    hours: float,
    rate_per_hour: float = DEFAULT_PREEMPTIONS_PER_HOUR,
    recomputed_minutes: float = RECOMPUTED_MINUTES,
    restart_minutes: float = RESTART_MINUTES,
) -> SpotExpectation:
    """The expected Spot hours of a run needing `hours` of work, at `rate_per_hour` preemptions."""
    lost = (recomputed_minutes + restart_minutes) / 60.0
    waste = rate_per_hour * lost
    if waste >= 1.0:
        return SpotExpectation(rate_per_hour, hours, lost, None, None)
    spot_hours = hours / (1.0 - waste)
    return SpotExpectation(rate_per_hour, hours, lost, spot_hours, rate_per_hour * spot_hours)


def expected_spot_cost(spot_per_hour: float | None, expectation: SpotExpectation) -> float | None:
    if spot_per_hour is None or expectation.spot_hours is None:
        return None
    return spot_per_hour * expectation.spot_hours
