"""The Logging filter: what the backend sends for each `vertexdist logs` option, read back by the emulator's
parser (the same terms, so what one asks is what the other keeps), and every other term refused, never
ignored. Pure: no emulator."""

from __future__ import annotations

import pytest

from vertexdist.backends.base import LogQuery
from vertexdist.backends.vertex.log_filter import entries_filter, message_of, replica_label
from vertexdist.emulator.logging.filter import FilterError, parse_filter
from vertexdist.wire.timestamps import format_ns, parse_ns

S = 1_000_000_000
FLOOR = parse_ns("2024-05-01T12:00:00Z")


def test_the_filter_names_the_ml_job_resource_and_the_job_and_always_a_time() -> None:
    text = entries_filter("123", LogQuery(), FLOOR)
    assert text == (
        'resource.type="ml_job" AND resource.labels.job_id="123"'
        ' AND timestamp>="2024-05-01T12:00:00.000000000Z"'
    )
    where = parse_filter(text)
    assert where.job_id == "123" and where.time_floor() == FLOOR
    assert where.keeps_time(FLOOR) and not where.keeps_time(FLOOR - 1)


def test_each_option_is_one_term_the_emulator_reads_back() -> None:
    query = LogQuery(replica="workerpool1-0", trial="7", severity="warning", since=(FLOOR + 10 * S) / S)
    text = entries_filter("123", query, FLOOR)
    assert 'resource.labels.task_name="workerpool1-0"' in text
    assert 'labels."ml.googleapis.com/trial_id"="7"' in text
    assert "severity>=WARNING" in text
    where = parse_filter(text)
    assert where.resource_labels == {"job_id": "123", "task_name": "workerpool1-0"}
    assert where.trial == "7"
    assert (
        where.keeps_severity("ERROR") and where.keeps_severity("WARNING") and not where.keeps_severity("INFO")
    )
    assert where.time_floor() == FLOOR + 10 * S  # --since wins over an older floor


def test_quotes_in_values_survive_the_round_trip() -> None:
    where = parse_filter(entries_filter('a"b\\c', LogQuery(replica='x" OR "y'), FLOOR))
    assert where.job_id == 'a"b\\c' and where.resource_labels["task_name"] == 'x" OR "y'


def test_the_logging_clients_own_default_time_form_is_read() -> None:
    # google-cloud-logging adds `timestamp>="%Y-%m-%dT%H:%M:%S.%f%z"` when a filter names no time.
    where = parse_filter('resource.labels.job_id="1" AND timestamp>="2024-05-01T12:00:00.500000+0000"')
    assert where.time_floor() == FLOOR + S // 2


@pytest.mark.parametrize(
    "text",
    [
        'resource.labels.job_id="1" OR severity>=ERROR',
        'resource.labels.job_id="1" AND (resource.labels.task_name="a" OR severity>=ERROR)',
        'resource.labels.job_id="1" AND (severity>=ERROR',
        'resource.labels.job_id="1" AND severity>=ERROR)',
        'resource.labels.job_id="1" AND (severity>=ERROR OR)',
        'resource.labels.job_id="1" AND ' + "(" * 17 + "severity>=ERROR" + ")" * 17,
        'resource.labels.job_id="1" AND ' + "NOT " * 17 + "severity>=ERROR",
        'resource.labels.job_id="1" AND -severity>=ERROR',
        'resource.labels.job_id="1" AND jsonPayload.message:"oom"',
        'resource.labels.job_id="1" AND textPayload=~"x"',
        'resource.labels.job_id="1" AND resource.labels.task_name>"a"',
        'resource.labels.job_id="1" AND resource.type="gce_instance"',
        'resource.labels.job_id="1" AND severity>=LOUD',
        'resource.labels.job_id="1" AND timestamp>="yesterday"',
        'resource.labels.job_id="1" and severity>=ERROR',
        'resource.labels.job_id="1" AND "oom"',
        'resource.labels.job_id="1" AND task_name="x',
        'resource.labels.job_id="\\q"',
        "severity>=ERROR",
        "",
    ],
)
def test_anything_else_is_refused_naming_the_term(text: str) -> None:
    with pytest.raises(FilterError):
        parse_filter(text)


def test_gclouds_stream_logs_filter_when_two_entries_share_a_timestamp() -> None:
    """googlecloudsdk/command_lib/logs/stream.py: the lower bound moves past the last insertId read."""
    text = (
        'resource.type="ml_job" AND resource.labels.job_id="123" AND '
        '((timestamp="2024-05-01T12:00:01Z" AND insertId>"workerpool0-0-000000000010") '
        'OR timestamp>"2024-05-01T12:00:01Z") AND timestamp<"2024-05-01T12:00:09.000000+00:00"'
    )
    where = parse_filter(text)
    assert where.job_id == "123"
    at = FLOOR + S
    assert where.time_floor() == at  # the OR's oldest branch: reading starts there
    assert not where.keeps((at, "workerpool0-0-000000000010"), "INFO")
    assert where.keeps((at, "workerpool0-0-000000000011"), "INFO")
    assert where.keeps((at + 1, "workerpool0-0-000000000001"), "INFO")
    assert not where.keeps((at - 1, "workerpool0-0-000000000099"), "INFO")
    assert not where.keeps((FLOOR + 9 * S, "workerpool0-0-000000000099"), "INFO")


def test_not_or_and_parentheses_follow_cloud_loggings_precedence() -> None:
    # NOT binds first, then OR, then AND: `a OR b AND c` is `(a OR b) AND c`
    where = parse_filter(
        'resource.labels.job_id="1" severity=ERROR OR severity=INFO AND NOT timestamp<"2024-05-01T12:00:00Z"'
    )
    assert where.keeps((FLOOR, "a"), "INFO") and where.keeps((FLOOR, "a"), "ERROR")
    assert not where.keeps((FLOOR, "a"), "WARNING") and not where.keeps((FLOOR - 1, "a"), "INFO")
    nested = parse_filter('resource.labels.job_id="1" AND ' + "(" * 16 + "severity>=ERROR" + ")" * 16)
    assert nested.keeps((FLOOR, "a"), "ERROR") and not nested.keeps((FLOOR, "a"), "INFO")


def test_how_an_entry_reads_back() -> None:
    assert replica_label({"task_name": "workerpool0-0"}, {}) == "workerpool0-0"
    assert replica_label({}, {"ml.googleapis.com/task_name": "master-replica-0"}) == "master-replica-0"
    assert replica_label({"task_name": "workerpool0-0"}, {"ml.googleapis.com/trial_id": "3"}) == (
        "trial-3/workerpool0-0"
    )
    assert (
        replica_label({"task_name": "workerpool0-0"}, {"ml.googleapis.com/trial_id": ""}) == "workerpool0-0"
    )
    assert replica_label({}, {}) == "unknown_task"
    assert message_of("plain text") == "plain text"
    assert message_of({"message": "from json", "levelname": "INFO"}) == "from json"
    assert message_of({"attrs": {"tag": "x"}}) == '{"attrs": {"tag": "x"}}'
    assert message_of(None) == ""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-05-01T12:00:00Z", FLOOR),
        ("2024-05-01T12:00:00.123456789Z", FLOOR + 123456789),
        ("2024-05-01T14:00:00.1+02:00", FLOOR + S // 10),
        ("2024-05-01t12:00:00z", FLOOR),
    ],
)
def test_timestamps_keep_nanoseconds(text: str, expected: int) -> None:
    assert parse_ns(text) == expected
    assert parse_ns(format_ns(expected)) == expected
