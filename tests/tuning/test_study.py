"""The study's decisions, driven directly: early stopping (median, decay curve), the final measurement,
Vertex's failure rule, when the job is done; and cloudml-hypertune's own file read into measurements."""

from __future__ import annotations

from pathlib import Path

import pytest

from vertexdist.tuning.hypertune import ReportLog, parse_reports, to_measurements
from vertexdist.tuning.stopping import decay_curve_should_stop, median_should_stop
from vertexdist.tuning.study import Study
from vertexdist.wire.study import Metric, Parameter, StudySpec, TuningJob
from vertexdist.wire.trials import Measurement

GOOD = [(1, 0.5), (2, 0.7), (3, 0.8)]


def test_median_stops_a_trial_below_the_median_of_finished_running_averages() -> None:
    finished = [GOOD, [(1, 0.6), (2, 0.7)], [(1, 0.4), (2, 0.8), (3, 0.9)]]
    assert median_should_stop([(1, 0.1), (2, 0.2)], finished, maximize=True)
    assert not median_should_stop([(1, 0.55)], finished, maximize=True)  # averages at step 1: .4 .5 .6
    assert not median_should_stop([(1, 0.1)], finished[:2], maximize=True)  # too few finished trials
    assert median_should_stop([(1, 9.0)], [[(1, 1.0)]] * 3, maximize=False)


def test_decay_curve_stops_when_even_the_best_gain_seen_cannot_reach_the_best() -> None:
    finished = [(GOOD, 0.8), ([(1, 0.6), (3, 0.7)], 0.7), ([(1, 0.5), (3, 0.75)], 0.75)]
    # At step 1 the largest gain to the end was 0.3 (0.5 -> 0.8): 0.45 + 0.3 < 0.8, 0.55 + 0.3 > 0.8.
    assert decay_curve_should_stop([(1, 0.45)], finished, maximize=True)
    assert not decay_curve_should_stop([(1, 0.55)], finished, maximize=True)
    assert not decay_curve_should_stop([(1, 0.0)], finished[:2], maximize=True)


def study(
    *,
    stopping: str = "none",
    max_failed: int = 0,
    trials: int = 6,
    parallel: int = 2,
    selection: str = "BEST_MEASUREMENT",
) -> Study:
    spec = StudySpec(
        metrics=(Metric("acc", "MAXIMIZE"),),
        parameters=(Parameter("u", "integer", min=1, max=trials),),
        algorithm="GRID_SEARCH",
        measurement_selection=selection,
        stopping=stopping,  # type: ignore[arg-type]
    )
    return Study(TuningJob("t", spec, trials, parallel, max_failed, {}), clock=lambda: "2026-01-01T00:00:00Z")


def succeed(s: Study, trial_id: str, *values: float) -> None:
    s.record(trial_id, [Measurement(i + 1, {"acc": v}) for i, v in enumerate(values)])
    s.finish(trial_id, succeeded=True)


def test_parallel_trials_start_as_others_end_and_the_budget_ends_the_job() -> None:
    s = study(trials=3, parallel=2)
    assert [t.id for t in s.next_trials()] == ["1", "2"] and s.next_trials() == []
    succeed(s, "1", 0.5)
    [third] = s.next_trials()
    assert third.args == ("--u=3",)
    succeed(s, "2", 0.9)
    succeed(s, "3", 0.7)
    assert s.done and s.outcome() == ("SUCCEEDED", "")
    best = s.best()
    assert best is not None and best.id == "2"


@pytest.mark.parametrize(("selection", "expected"), [("BEST_MEASUREMENT", 0.9), ("LAST_MEASUREMENT", 0.6)])
def test_final_measurement_follows_the_selection(selection: str, expected: float) -> None:
    s = study(selection=selection)
    s.next_trials()
    succeed(s, "1", 0.5, 0.9, 0.6)
    final = s.trials["1"].final
    assert final is not None and final.values["acc"] == expected


def test_failed_trials_reach_max_failed_trial_count() -> None:
    s = study(max_failed=2, trials=6, parallel=1)
    for trial_id, ok in (("1", True), ("2", False), ("3", True), ("4", False)):
        assert [t.id for t in s.next_trials()] == [trial_id]
        if ok:
            succeed(s, trial_id, 0.5)
        else:
            s.finish(trial_id, succeeded=False, message="exit 1")
    assert s.trials["4"].state == "INFEASIBLE" and s.trials["4"].infeasible_reason == "exit 1"
    state, message = s.outcome()
    assert (
        state == "FAILED" and "2 trials failed" in message and "max_failed_trial_count allows (2)" in message
    )
    assert s.next_trials() == [] and s.done


def test_vertexs_default_rule_ends_the_job_when_the_first_trial_fails() -> None:
    s = study(max_failed=0)
    s.next_trials()
    s.finish("2", succeeded=False, message="boom")
    assert s.outcome()[0] == "FAILED" and "first trial to end failed" in s.outcome()[1]
    assert [t.id for t in s.stop_all()] == ["1"]


def test_vertexs_default_rule_tolerates_failures_after_a_success() -> None:
    s = study(max_failed=0, trials=6, parallel=1)
    s.next_trials()
    succeed(s, "1", 0.5)
    for trial_id in ("2", "3"):
        s.next_trials()
        s.finish(trial_id, succeeded=False)
    assert s.failure is None  # 2 failed against 1 succeeded: below 3 failures
    s.next_trials()
    s.finish("4", succeeded=False)
    assert s.failure is not None and "3 trials failed against 1 succeeded" in s.failure


def test_a_trial_that_reports_nothing_is_infeasible_and_counts_as_failed() -> None:
    s = study(max_failed=1)
    s.next_trials()
    s.finish("1", succeeded=True)
    assert s.trials["1"].state == "INFEASIBLE" and "reported no value for metric 'acc'" in str(
        s.trials["1"].infeasible_reason
    )
    assert s.outcome()[0] == "FAILED"


def test_early_stopping_stops_losers_and_a_stopped_trial_is_no_failure() -> None:
    s = study(stopping="median", max_failed=1, trials=5, parallel=1)
    for trial_id in ("1", "2", "3"):
        s.next_trials()
        succeed(s, trial_id, 0.6, 0.8, 0.9)
    s.next_trials()
    assert s.record("4", [Measurement(1, {"acc": 0.1})])  # below the finished trials' median
    s.finish("4", succeeded=False, message="killed by SIGTERM")  # the stop ends its job with a signal
    four = s.trials["4"]
    assert four.state == "SUCCEEDED" and four.stopped_early and s.failure is None
    s.next_trials()
    succeed(s, "5", 0.7, 0.95)
    assert s.outcome() == ("SUCCEEDED", "")


def test_cancel_stops_every_running_trial() -> None:
    s = study()
    s.next_trials()
    assert [t.id for t in s.cancel()] == ["1", "2"]
    for trial_id in ("1", "2"):
        s.finish(trial_id, succeeded=False)
    assert s.done and s.outcome() == ("CANCELLED", "CANCELED") and s.failed == 0


def test_the_real_cloudml_hypertune_file_reads_into_measurements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hypertune = pytest.importorskip("hypertune")
    path = tmp_path / "hp" / "output.metrics"
    monkeypatch.setenv("CLOUD_ML_HP_METRIC_FILE", str(path))
    monkeypatch.setenv("CLOUD_ML_TRIAL_ID", "3")
    reporter = hypertune.HyperTune()
    log = ReportLog()
    for step in range(1, 106):  # past the 100 reports the file keeps
        reporter.report_hyperparameter_tuning_metric(
            hyperparameter_metric_tag="acc", metric_value=step / 1000, global_step=step
        )
        if step % 10 == 0 or step == 105:
            log.add(path.read_text())
    assert len(path.read_text().splitlines()) == 100
    measurements = log.measurements()
    assert [m.step for m in measurements] == list(range(1, 106))
    assert measurements[-1].values == {"acc": 0.105}


def test_reports_without_steps_and_of_several_tags_group_into_measurements() -> None:
    text = "\n".join(
        [
            '{"timestamp": 1.0, "trial": "1", "acc": "0.5", "global_step": "0", "checkpoint_path": ""}',
            '{"timestamp": 1.1, "trial": "1", "loss": "2.0", "global_step": "0", "checkpoint_path": ""}',
            '{"timestamp": 2.0, "trial": "1", "acc": "0.7", "global_step": "0", "checkpoint_path": ""}',
            '{"timestamp": 3.0, "trial": "1", "ac',  # a torn line
        ]
    )
    measurements = to_measurements(parse_reports(text), started_at=0.5)
    assert [(m.step, dict(m.values)) for m in measurements] == [
        (0, {"acc": 0.5, "loss": 2.0}),
        (0, {"acc": 0.7}),
    ]
    assert measurements[1].elapsed_s == 1.5


def test_a_trials_metric_file_is_read_the_same_by_both_launchers(tmp_path: Path) -> None:
    from vertexdist.tuning.driver import metric_file_text

    path = tmp_path / "workerpool0-0.json"
    assert metric_file_text(path) == ""  # no report yet
    path.write_bytes(b'{"score": "0.5"}\n{"sco\xff')
    assert metric_file_text(path) == '{"score": "0.5"}\n{"sco\ufffd'
