"""One test per size and character limit (vertexdist.spec.limits), as the rules in test_rules.py."""

from __future__ import annotations

from typing import Any

from vertexdist.spec import Finding, JobTemplate, check_template, limits
from vertexdist.spec.rules import RULES

from .conftest import BASE


def errors(**trainer: Any) -> list[Finding]:
    data = {**BASE, "trainer": trainer}
    template = JobTemplate.model_validate(data, context={"skip_rules": True})
    return [f for f in check_template(template) if f.severity == "error"]


def test_the_limit_rules_are_registered() -> None:
    assert set(limits.RULES) <= set(RULES)


def test_an_argument_may_be_as_long_as_execve_takes() -> None:
    assert errors(args=["--x", "a" * limits.ARG_BYTES]) == []


def test_a_longer_argument_is_refused_with_its_index() -> None:
    [finding] = errors(args=["--x", "a" * (limits.ARG_BYTES + 1)])
    assert finding.path == "trainer.args[1]"
    assert "128.0 KiB" in finding.message and "execve" in finding.message
    assert "file" in (finding.hint or "")


def test_the_argument_limit_counts_utf8_bytes_not_characters() -> None:
    [finding] = errors(args=["é" * (limits.ARG_BYTES // 2 + 1)])
    assert finding.path == "trainer.args[0]"


def test_an_env_entry_counts_name_equals_value() -> None:
    fits = "v" * (limits.ENV_ENTRY_BYTES - len("DATA="))
    assert errors(env={"DATA": fits}) == []
    [finding] = errors(env={"DATA": fits + "v"})
    assert finding.path == "trainer.env.DATA" and "environment entry" in finding.message


def test_a_nul_byte_in_an_env_value_is_an_error_with_its_position() -> None:
    [finding] = errors(env={"MODE": "fast\x00slow"})
    assert finding.path == "trainer.env.MODE"
    assert "NUL" in finding.message and "position 4" in finding.message


def test_a_nul_byte_in_an_argument_is_an_error() -> None:
    [finding] = errors(args=["--ok", "--name=a\x00b"])
    assert finding.path == "trainer.args[1]" and "NUL" in finding.message


def test_other_text_is_fine() -> None:
    assert errors(args=["tab\there", "line\nbreak", "ünïcödé ✓"], env={"X": "\x1b[0m"}) == []


def test_a_request_over_vertexs_size_is_refused_counting_both_training_pools() -> None:
    # 7 arguments of 120 KiB fit each limit and fit one pool, but this job sends them twice (2 pools).
    args = ["a" * (120 * limits.KiB)] * 7
    assert BASE["replica_count"] == 2
    [finding] = errors(args=args)
    assert finding.path == "trainer"
    assert "1.5 MiB" in finding.message and "2 here" in finding.message
    single = {**BASE, "replica_count": 1, "trainer": {"args": args}}
    template = JobTemplate.model_validate(single, context={"skip_rules": True})
    assert [f for f in check_template(template) if f.severity == "error"] == []


def test_a_field_over_its_limit_is_not_also_reported_as_a_large_request() -> None:
    [finding] = errors(args=["a" * (2 * limits.MiB)])
    assert finding.path == "trainer.args[0]"
