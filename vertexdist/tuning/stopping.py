"""Early stopping: whether a running trial is unpromising enough to stop, from the objective values it and the
finished trials reported (a curve: (step, value) pairs in step order). Pure functions.

- median (StudySpec.MedianAutomatedStoppingSpec): stop a trial whose best value so far is strictly worse than
  the median, over the finished trials, of each one's running average of its values up to this trial's step.
- decay curve (StudySpec.DecayCurveAutomatedStoppingSpec): Vertex fits a Gaussian process to predict the final
  value; this stand-in is optimistic instead: it adds to the trial's latest value the largest gain any
  finished trial made from that step to its end, and stops the trial if even that falls short of the best
  final value so far.

Neither rule acts before `MIN_FINISHED_TRIALS` finished trials have reported at or before the trial's step.
The x-axis is the step (`global_step` of cloudml-hypertune); `use_elapsed_duration` is not followed here.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

Curve = Sequence[tuple[int, float]]
MIN_FINISHED_TRIALS = 3


def _worse(value: float, than: float, maximize: bool) -> bool:
    return value < than if maximize else value > than


def median_should_stop(curve: Curve, finished: Sequence[Curve], *, maximize: bool) -> bool:
    if not curve:
        return False
    step = curve[-1][0]
    values = [v for _, v in curve]
    best = max(values) if maximize else min(values)
    averages = []
    for other in finished:
        upto = [v for s, v in other if s <= step]
        if upto:
            averages.append(sum(upto) / len(upto))
    if len(averages) < MIN_FINISHED_TRIALS:
        return False
    return _worse(best, statistics.median(averages), maximize)


def decay_curve_should_stop(curve: Curve, finished: Sequence[tuple[Curve, float]], *, maximize: bool) -> bool:
    """`finished` pairs each finished trial's curve with its final objective value."""
    if not curve:
        return False
    step, latest = curve[-1]
    gains, finals = [], []
    for other, final in finished:
        upto = [v for s, v in other if s <= step]
        if not upto:
            continue
        gain = final - upto[-1] if maximize else upto[-1] - final
        gains.append(max(0.0, gain))
        finals.append(final)
    if len(gains) < MIN_FINISHED_TRIALS:
        return False
    best_final = max(finals) if maximize else min(finals)
    optimistic = latest + max(gains) if maximize else latest - max(gains)
    return _worse(optimistic, best_final, maximize)
