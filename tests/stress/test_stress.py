"""`make stress`'s script: what it reads from pytest's junit report and how it counts failures (pure parts);
its groups name tests that exist."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _stress() -> ModuleType:
    spec = importlib.util.spec_from_file_location("stress", Path(__file__).with_name("stress.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["stress"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


REPORT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.local.test_rank_health" name="test_hang[warm]" time="40"/>
<testcase classname="tests.local.test_rank_health" name="test_slow" time="3"><failure message="x"/>
</testcase>
<testcase classname="tests.local.test_warm_pool" name="test_pool" time="1"><error message="y"/></testcase>
<testcase classname="tests.local.test_warm_pool" name="test_skipped" time="0"><skipped message="z"/>
</testcase>
</testsuite></testsuites>"""


def test_outcomes_are_read_per_test_and_a_failure_or_error_fails_it() -> None:
    stress = _stress()
    assert stress.outcomes_of(REPORT) == {
        "tests.local.test_rank_health::test_hang[warm]": True,
        "tests.local.test_rank_health::test_slow": False,
        "tests.local.test_warm_pool::test_pool": False,
        "tests.local.test_warm_pool::test_skipped": True,
    }


def test_failures_are_counted_per_test_over_rounds_and_a_crashed_round_counts() -> None:
    stress = _stress()
    rounds = [
        stress.Round("rank health", 1, {"a": True, "b": False}, 10.0, 1),
        stress.Round("rank health", 2, {"a": True, "b": False}, 12.0, 1),
        stress.Round("rank health", 3, {"a": True, "b": True}, 11.0, 0),
        stress.Round("warm pool", 1, {}, 600.0, -1),  # timed out as a whole: no report
    ]
    figures = stress.tally(rounds)
    health = figures["rank health"].as_dict()
    assert (health["runs"], health["tests"], health["failures"], health["median_round_s"]) == (3, 6, 2, 11.0)
    assert health["failed"] == {"b": 2}
    assert figures["warm pool"].failures == 1
    assert "failed 2/3: b" in stress.table(figures)


def test_every_group_names_tests_that_exist() -> None:
    stress = _stress()
    for targets in stress.GROUPS.values():
        for target in targets:
            path, _, name = target.partition("::")
            assert (ROOT / path).is_file(), target
            assert not name or f"def {name}(" in (ROOT / path).read_text(), target
