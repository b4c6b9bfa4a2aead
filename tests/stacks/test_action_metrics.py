"""Answers per action under a served policy, as CloudWatch metrics, and the automation-rate alarm.

The real CDK app is synthesized: prod as cdk.json ships it (no band, so no alarm) and prod with
`alarms.automation_rate_band` set.
"""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from decision_spec.environment_config import ConfigError, load_environment

from app import build_app
from stacks.observability import ACTION_COUNTS, action_pattern
from tests.cdk_support import cdk_context, synthesize

BAND = [20.0, 85.0]
MIN_ANSWERS = 30
DECISION_ENDPOINTS = ("decision-prod-cpu", "decision-prod-gpu")


@pytest.fixture(scope="module")
def banded() -> Iterator[dict[str, Any]]:
    """prod's Serving template with an automation-rate band configured."""
    context = cdk_context()
    alarms = context["environments"]["prod"]["alarms"]
    alarms["automation_rate_band"], alarms["automation_rate_min_answers"] = BAND, MIN_ANSWERS
    outdir = Path(tempfile.mkdtemp(prefix="cdk-banded-"))
    try:
        build_app("prod", context=context, outdir=str(outdir)).synth()
        yield json.loads((outdir / "DecisionEndpoints-prod-Serving.template.json").read_text(encoding="utf-8"))
    finally:
        shutil.rmtree(outdir, ignore_errors=True)


def of_type(template: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r["Properties"] for r in template["Resources"].values() if r["Type"] == kind]


def log_group_name(template: dict[str, Any], ref: Any) -> str:
    return str(template["Resources"][ref["Ref"]]["Properties"]["LogGroupName"])


def test_each_decision_endpoint_sums_its_answers_per_action_from_the_decision_lines() -> None:
    template = synthesize("prod").template_json("Serving")
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for props in of_type(template, "AWS::Logs::MetricFilter"):
        (transform,) = props["MetricTransformations"]
        found[(transform["MetricNamespace"], transform["MetricName"])] = {**transform, **props}
    for endpoint in DECISION_ENDPOINTS:
        for field, metric_name in ACTION_COUNTS.values():
            f = found[(f"DecisionEndpoints/{endpoint}", metric_name)]
            assert f["FilterPattern"] == action_pattern(field) == f'{{ $.event = "decision" && $.{field} >= 0 }}'
            assert f["MetricValue"] == f"$.{field}"  # the count of answers, not one per line
            assert "DefaultValue" not in f  # no decisions under a policy: no data, not a zero rate
            assert log_group_name(template, f["LogGroupName"]) == f"/aws/sagemaker/Endpoints/{endpoint}"


def test_without_a_band_there_is_no_automation_rate_alarm() -> None:
    alarms = of_type(synthesize("prod").template_json("Serving"), "AWS::CloudWatch::Alarm")
    assert not [a for a in alarms if "automation-rate" in a["AlarmName"]]


def test_the_automation_rate_alarms_when_it_leaves_the_band(banded: dict[str, Any]) -> None:
    alarms = {a["AlarmName"]: a for a in of_type(banded, "AWS::CloudWatch::Alarm")}
    # 7 per decision endpoint (the GPU pool's latency alarm is one per pool type: 3 more), and the two band alarms
    assert len(alarms) == 14 + 3 + 2 * len(DECISION_ENDPOINTS)
    for endpoint in DECISION_ENDPOINTS:
        low, high = alarms[f"{endpoint}-automation-rate-low"], alarms[f"{endpoint}-automation-rate-high"]
        assert (low["ComparisonOperator"], low["Threshold"]) == ("LessThanThreshold", BAND[0])
        assert (high["ComparisonOperator"], high["Threshold"]) == ("GreaterThanThreshold", BAND[1])
        answers = "automate + review + abstain"
        for alarm, quiet in ((low, "100"), (high, "0")):
            assert alarm["TreatMissingData"] == "notBreaching"
            assert alarm["AlarmActions"] and alarm["OKActions"]
            metrics = {m["Id"]: m for m in alarm["Metrics"]}
            expression = next(m["Expression"] for m in alarm["Metrics"] if "Expression" in m)
            # too few answers to judge read as inside the band (100 cannot be below min, 0 not above max)
            assert expression == f"IF({answers} >= {MIN_ANSWERS}, 100 * automate / ({answers}), {quiet})"
            for action, (_, metric_name) in ACTION_COUNTS.items():
                stat = metrics[action]["MetricStat"]
                assert stat["Metric"]["MetricName"] == metric_name and stat["Stat"] == "Sum"
                assert stat["Metric"]["Namespace"] == f"DecisionEndpoints/{endpoint}"


def test_the_dashboard_shows_answers_by_action(banded: dict[str, Any]) -> None:
    (dashboard,) = of_type(banded, "AWS::CloudWatch::Dashboard")
    body = json.dumps(dashboard["DashboardBody"])
    for endpoint in DECISION_ENDPOINTS:
        assert f"{endpoint}: answers by action" in body
    for _, metric_name in ACTION_COUNTS.values():
        assert metric_name in body


@pytest.mark.parametrize("band", [[80, 20], [50, 50], [-1, 50], [10, 101]])
def test_a_band_that_is_not_min_below_max_in_percent_is_refused(band: list[float]) -> None:
    environments = copy.deepcopy(cdk_context()["environments"])
    environments["dev"]["alarms"]["automation_rate_band"] = band
    with pytest.raises(ConfigError, match=r"environments\.dev\.alarms\.automation_rate_band"):
        load_environment(environments, "dev")
