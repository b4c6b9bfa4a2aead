"""The CloudWatch stand-in of tests/cloudwatch_filters.py on the examples of CloudWatch's filter pattern guide
("Using filter patterns to match terms in JSON log events"), so the decision-shift test rests on the documented
semantics and not on the stand-in agreeing with itself."""

from __future__ import annotations

from typing import Any

import pytest

from tests.cloudwatch_filters import MetricFilter, UnsupportedPattern, evaluate_alarm, matcher

EVENT: dict[str, Any] = {
    "eventType": "UpdateTrail",
    "sourceIPAddress": "123.123.0.7",
    "arrayKey": ["value", "another value"],
    "objectList": [{"name": "a", "id": 1}, {"name": "b", "id": 2}],
    "SomeObject": None,
    "ThisFlag": True,
    "latency": 503,
    "bandwidth": 40.5,
}


@pytest.mark.parametrize(
    ("pattern", "matches"),
    [
        ('{ $.eventType = "UpdateTrail" }', True),
        ('{ $.eventType = "Update*" }', True),
        ('{ $.eventType = "*Trail" }', True),
        ('{ $.eventType != "UpdateTrail" }', False),
        ("{ $.sourceIPAddress != 123.123.* }", False),
        ("{ $.sourceIPAddress = 123.123.* }", True),
        ('{ $.arrayKey[0] = "value" }', True),
        ("{ $.objectList[1].id = 2 }", True),
        ("{ $.latency >= 500 }", True),
        ("{ $.latency < 500 }", False),
        ("{ $.bandwidth > 40 && $.latency <= 503 }", True),
        ('{ ($.eventType = "Nope") || ($.latency = 503) }', True),
        ('{ $.eventType = "Nope" || $.latency = 503 && $.ThisFlag IS FALSE }', False),
        ("{ $.SomeObject IS NULL }", True),
        ("{ $.ThisFlag IS TRUE }", True),
        ("{ $.SomeOtherObject NOT EXISTS }", True),
        ("{ $.latency NOT EXISTS }", False),
        ("{ $.missing >= 0 }", False),  # no such field: the comparison is false
        ("{ $.eventType >= 0 }", False),  # a string is not a number
    ],
)
def test_the_documented_examples(pattern: str, matches: bool) -> None:
    assert matcher(pattern)(EVENT) is matches


def test_a_line_that_is_not_a_json_object_matches_nothing() -> None:
    assert matcher('{ $.event = "decision" }')("not json") is False


def test_outside_the_subset_it_refuses_instead_of_guessing() -> None:
    with pytest.raises(UnsupportedPattern):
        matcher("{ $.latency ~ 5 }")


def test_a_metric_filter_sums_its_value_per_dimension_and_skips_lines_without_one() -> None:
    f = MetricFilter('{ $.event = "decision" && $.n >= 0 }', "ns", "N", "$.n", (("Policy", "$.policy"),))
    lines = [
        {"event": "decision", "n": 2, "policy": "a"},
        {"event": "decision", "n": 3, "policy": "a"},
        {"event": "decision", "n": 5, "policy": "b"},
        {"event": "decision", "n": 7},  # no dimension value: nothing published
        {"event": "decision", "n": "8", "policy": "a"},  # not a number: no match
        {"event": "ready", "n": 1, "policy": "a"},
    ]
    assert f.publish(lines) == {(("Policy", "a"),): 5.0, (("Policy", "b"),): 5.0}


def test_metric_math_of_one_period() -> None:
    metrics = [
        {"Id": "a", "MetricStat": {"Metric": {"Namespace": "ns", "MetricName": "A", "Dimensions": []}}},
        {"Id": "b", "MetricStat": {"Metric": {"Namespace": "ns", "MetricName": "B", "Dimensions": []}}},
        {"Id": "n", "Expression": "FILL(a, 0) + FILL(b, 0)", "ReturnData": False},
        {
            "Id": "e",
            "Expression": "IF(n >= 4, MAX([ABS(100 * FILL(a, 0) / n - 50), ABS(100 * FILL(b, 0) / n - 50)]), 0)",
        },
    ]
    assert evaluate_alarm(metrics, {("ns", "A", ()): 3.0}) == 0.0  # 3 answers: too few to judge
    assert evaluate_alarm(metrics, {("ns", "A", ()): 4.0}) == 50.0  # B had no data: FILL reads it as 0
    assert evaluate_alarm(metrics, {("ns", "A", ()): 3.0, ("ns", "B", ()): 1.0}) == 25.0
