"""A study's state and decisions: which trials to start, which to stop early, how each ended, when the
tuning job is done and how it ends. Pure: the `driver` runs what it decides; time comes from `clock`.

Trial states follow Vertex's `Trial.State`: ACTIVE while it runs, STOPPING once stopped (early, or because
the job ends), SUCCEEDED with a final measurement, INFEASIBLE when it ended without one (it failed, or
reported nothing for the objective). A trial stopped by the study is never a failure.

`max_failed_trial_count` N > 0 fails the job once N trials failed. With 0, Vertex decides (its documented
behaviour: a first trial that fails ends the job at once; later, too many failures, or too many per success,
end it; the thresholds are internal). The stand-in here: the job fails when the first trial to end failed,
or later once at least 3 trials failed and failures outnumber successes. A job whose trials all failed
fails; one with any succeeded trial succeeds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from vertexdist.tuning.search import Search, make_search
from vertexdist.tuning.space import Assignment, active_parameters, trial_args
from vertexdist.tuning.stopping import decay_curve_should_stop, median_should_stop
from vertexdist.wire.proto_json import now_rfc3339
from vertexdist.wire.study import TuningJob
from vertexdist.wire.trials import Measurement, Trial, best_trial

JobOutcome = Literal["RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"]
DEFAULT_RULE_MIN_FAILURES = 3
RUNNING_STATES = ("ACTIVE", "STOPPING")


@dataclass
class TrialRecord:
    id: str
    parameters: Assignment
    args: tuple[str, ...]
    state: str = "ACTIVE"
    measurements: tuple[Measurement, ...] = ()
    final: Measurement | None = None
    start_time: str | None = None
    end_time: str | None = None
    infeasible_reason: str | None = None
    custom_job: str | None = None
    stopped: bool = False  # the study stopped it (early stopping, or the job ending): never a failure
    stopped_early: bool = False  # by the early-stopping rule

    @property
    def running(self) -> bool:
        return self.state in RUNNING_STATES


class Study:
    def __init__(
        self,
        job: TuningJob,
        *,
        seed: int | None = None,
        search: Search | None = None,
        clock: Callable[[], str] = now_rfc3339,
    ) -> None:
        self.job = job
        self.spec = job.study
        self.objective = job.study.objective
        self.search = search or make_search(job.study, seed=seed, max_trial_count=job.max_trial_count)
        self._clock = clock
        self.trials: dict[str, TrialRecord] = {}
        self._exhausted = False
        self._first_end_failed: bool | None = None
        self.failure: str | None = None
        self.cancelled = False

    # --- reading -------------------------------------------------------------------------------------
    def running(self) -> list[TrialRecord]:
        return [t for t in self.trials.values() if t.running]

    @property
    def failed(self) -> int:
        return sum(1 for t in self.trials.values() if t.state == "INFEASIBLE" and not t.stopped)

    @property
    def succeeded(self) -> int:
        return sum(1 for t in self.trials.values() if t.state == "SUCCEEDED")

    @property
    def ending(self) -> bool:
        """No new trials: cancelled, failed by the failure rule, or out of budget or points."""
        return (
            self.cancelled
            or self.failure is not None
            or self._exhausted
            or len(self.trials) >= self.job.max_trial_count
        )

    @property
    def done(self) -> bool:
        return self.ending and not self.running()

    def outcome(self) -> tuple[JobOutcome, str]:
        """The job's state and, when it did not succeed, why."""
        if self.cancelled:
            return "CANCELLED", "CANCELED"
        if self.failure is not None:
            return "FAILED", self.failure
        if not self.done:
            return "RUNNING", ""
        if self.succeeded == 0:
            last = next((t for t in reversed(self.trials.values()) if t.infeasible_reason), None)
            why = f" (trial {last.id}: {last.infeasible_reason})" if last else ""
            return "FAILED", f"all {len(self.trials)} trials failed{why}"
        return "SUCCEEDED", ""

    def objective_value(self, m: Measurement | None) -> float | None:
        return None if m is None else m.values.get(self.objective.id)

    def curve(self, trial: TrialRecord) -> list[tuple[int, float]]:
        return [
            (m.step, m.values[self.objective.id]) for m in trial.measurements if self.objective.id in m.values
        ]

    def best(self) -> TrialRecord | None:
        """The succeeded trial with the best final objective value (the first of equals)."""
        found = best_trial(self.wire_trials(), self.objective)
        return self.trials[found.id] if found else None

    def _better(self, a: float, b: float) -> bool:
        return a > b if self.objective.maximize else a < b

    # --- deciding ------------------------------------------------------------------------------------
    def next_trials(self) -> list[TrialRecord]:
        """New trials to start now: up to `parallel_trial_count` running, within `max_trial_count`."""
        started: list[TrialRecord] = []
        while not self.ending and len(self.running()) < self.job.parallel_trial_count:
            trial_id = str(len(self.trials) + 1)
            values = self.search.suggest(trial_id)
            if values is None:
                self._exhausted = True
                break
            trial = TrialRecord(
                trial_id,
                values,
                tuple(trial_args(self.spec.parameters, values)),
                start_time=self._clock(),
            )
            self.trials[trial_id] = trial
            started.append(trial)
        return started

    def record(self, trial_id: str, measurements: Sequence[Measurement]) -> bool:
        """The trial's measurements so far; True when the stopping rule says to stop it now."""
        trial = self.trials[trial_id]
        trial.measurements = tuple(measurements)
        if trial.state != "ACTIVE" or self.spec.stopping not in ("median", "decay_curve"):
            return False
        curve = self.curve(trial)
        finished = [t for t in self.trials.values() if t.state == "SUCCEEDED" and t.final is not None]
        maximize = self.objective.maximize
        if self.spec.stopping == "median":
            stop = median_should_stop(curve, [self.curve(t) for t in finished], maximize=maximize)
        else:
            pairs = [(self.curve(t), self.objective_value(t.final)) for t in finished]
            stop = decay_curve_should_stop(
                curve, [(c, v) for c, v in pairs if v is not None], maximize=maximize
            )
        if stop:
            trial.state, trial.stopped, trial.stopped_early = "STOPPING", True, True
        return stop

    def _final(self, measurements: Sequence[Measurement]) -> Measurement | None:
        scored = [m for m in measurements if self.objective.id in m.values]
        if not scored:
            return None
        if self.spec.measurement_selection == "LAST_MEASUREMENT":
            return scored[-1]
        best = scored[0]
        for m in scored[1:]:
            if not self._better(self.objective_value(best) or 0.0, m.values[self.objective.id]):
                best = m  # equal or better: the later one
        return best

    def finish(self, trial_id: str, *, succeeded: bool, message: str = "") -> None:
        """The trial's job ended (`succeeded`: its chief exited 0); settle its state and the job's rules."""
        trial = self.trials[trial_id]
        if not trial.running:
            return
        stopped = trial.stopped
        trial.end_time = self._clock()
        final = self._final(trial.measurements)
        if (succeeded or stopped) and final is not None:
            trial.state, trial.final = "SUCCEEDED", final
        else:
            trial.state = "INFEASIBLE"
            if not succeeded and not stopped:
                trial.infeasible_reason = message or "the trial's job failed"
            elif stopped:
                trial.infeasible_reason = f"stopped before it reported {self.objective.id}"
            else:
                trial.infeasible_reason = (
                    f"the trial reported no value for metric {self.objective.id!r}"
                    " (report it with cloudml-hypertune)"
                )
        counted_failure = trial.state == "INFEASIBLE" and not stopped
        if self._first_end_failed is None and not stopped:
            self._first_end_failed = counted_failure
        self.search.observe(trial_id, self.objective_value(trial.final))
        if counted_failure and self.failure is None:
            self.failure = self._failure_rule(trial)

    def _failure_rule(self, last: TrialRecord) -> str | None:
        limit = self.job.max_failed_trial_count
        failed, succeeded = self.failed, self.succeeded
        why = f"; the last: trial {last.id}: {last.infeasible_reason}"
        if limit > 0:
            if failed >= limit:
                return f"{failed} trials failed, as many as max_failed_trial_count allows ({limit}){why}"
            return None
        if self._first_end_failed and succeeded == 0 and failed == 1:
            return f"the first trial to end failed, so the job ends (max_failed_trial_count 0){why}"
        if failed >= DEFAULT_RULE_MIN_FAILURES and failed > succeeded:
            return f"{failed} trials failed against {succeeded} succeeded (max_failed_trial_count 0){why}"
        return None

    def stop_all(self) -> list[TrialRecord]:
        """Mark every running trial STOPPING (the job is ending); the ones to stop."""
        active = [t for t in self.trials.values() if t.state == "ACTIVE"]
        for trial in active:
            trial.state, trial.stopped = "STOPPING", True
        return active

    def cancel(self) -> list[TrialRecord]:
        self.cancelled = True
        return self.stop_all()

    # --- the wire shape ------------------------------------------------------------------------------
    def to_trial(self, trial: TrialRecord) -> Trial:
        order = [p.id for p in active_parameters(self.spec.parameters, trial.parameters)]
        return Trial(
            id=trial.id,
            state=trial.state,
            parameters=tuple((pid, trial.parameters[pid]) for pid in order if pid in trial.parameters),
            final_measurement=trial.final,
            measurements=trial.measurements,
            start_time=trial.start_time,
            end_time=trial.end_time,
            infeasible_reason=trial.infeasible_reason,
            custom_job=trial.custom_job,
        )

    def wire_trials(self) -> list[Trial]:
        return [self.to_trial(t) for t in self.trials.values()]
