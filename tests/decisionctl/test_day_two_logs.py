"""decisionctl logs against botocore's Stubber (issue 46): FilterLogEvents with the exact group, window, JSON filter
pattern and pages, on lines the adapter really writes (its own logger and formatter), shown without request text."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber
from decision_adapter.serve import JsonFormatter
from decision_spec import events
from decision_spec.names import COMPONENT_LOG_GROUP_PREFIX, component_name
from decisionctl.commands import logs as logs_command
from decisionctl.operations.log_search import LogQuery, read_logs

from tests.cdk_support import ROOT

REGION = "us-west-2"
NOW = datetime(2026, 12, 3, 21, 0, tzinfo=UTC)
SECRET = "my card number is 4111 1111 1111 1111"  # request text: must never be shown


def adapter_line(record: dict[str, Any]) -> str:
    """A line as the adapter's JsonFormatter writes it to the container's stdout (what CloudWatch stores)."""
    log_record = logging.LogRecord("decision_adapter.requests", logging.INFO, __file__, 1, json.dumps(record), (), None)
    return JsonFormatter().format(log_record)


DECISION = {
    "event": events.DECISION, "request_id": "req-1", "route": "/v1/systemone", "status": 200, "latency_ms": 812.5,
    "questions": [{"id": "q", "type": "noul", "instructions": SECRET}], events.ANSWERS_FIELD: 1,
    events.INPUT_FLAGGED_FIELD: 0, "identity": {"model_sha256": "c624c2bea434" + "0" * 52},
    events.POLICY_FIELD: "0123456789abcdef", "automated": 0, "reviewed": 0, "abstained": 1, "state": SECRET,
}  # fmt: skip
REJECTED = {"event": events.OVERLOAD_REJECTED, "request_id": "req-2", "route": "/invocations", "status": 429}


def client() -> Any:
    session = boto3.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name=REGION)
    return session.client("logs")


def page(*lines: str, token: str | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {
        "events": [
            {"logStreamName": "AllTraffic/i-0abc123456789", "timestamp": int(NOW.timestamp() * 1000) - 60_000 + i,
             "message": line, "ingestionTime": int(NOW.timestamp() * 1000), "eventId": str(i)}
            for i, line in enumerate(lines)
        ]
    }  # fmt: skip
    if token:
        found["nextToken"] = token
    return found


def test_decisions_and_rejections_paged_with_the_exact_request() -> None:
    logs = client()
    stub = Stubber(logs)
    group = COMPONENT_LOG_GROUP_PREFIX + component_name("dev", "cpu")  # dev hosts a component: its lines are there
    pattern = (
        '{ ($.event = "decision" || $.event = "overload_rejected" || $.event = "token_budget_exceeded" || '
        '$.event = "deadline_exceeded" || $.event = "runtime_failure") }'
    )
    request = {
        "logGroupName": group,
        "startTime": int((NOW - timedelta(minutes=30)).timestamp() * 1000),
        "endTime": int(NOW.timestamp() * 1000),
        "filterPattern": pattern,
        "limit": 50,
    }
    stub.add_response("filter_log_events", page(adapter_line(DECISION), token="next-1"), request)
    stub.add_response("filter_log_events", page(adapter_line(REJECTED)), {**request, "nextToken": "next-1"})
    stub.activate()
    query = LogQuery(("decision", "rejection"), timedelta(minutes=30), None, None, 50)
    printed = read_logs(ROOT / "cdk.json", "dev", None, query, region=None, client=lambda s, r: logs, now=NOW)
    stub.assert_no_pending_responses()
    text = "\n".join(printed)
    print(text)
    assert SECRET not in text
    assert "decision req-1 /v1/systemone 200  812.5 ms, 1 answer(s), policy 0123456789abcdef: 0 automated, " in text
    assert "1 abstained, model c624c2bea434" in text
    assert "overload_rejected req-2 /invocations 429" in text
    assert printed[-1] == "  2 line(s)"


def test_the_command_filters_one_request_and_an_action(tmp_path: Path) -> None:
    logs = client()
    stub = Stubber(logs)
    stub.add_response(
        "filter_log_events",
        page(adapter_line(DECISION)),
        {
            "logGroupName": COMPONENT_LOG_GROUP_PREFIX + "decision-dev-cpu-model",
            "startTime": ANY,
            "endTime": ANY,
            "filterPattern": '{ ($.event = "decision") && $.request_id = "req-1" && $.abstained > 0 }',
            "limit": 5,
        },
    )
    stub.activate()
    args = argparse.Namespace(
        env="dev", section="cpu", kind=["decision"], since=15, request_id="req-1", action="abstain", limit=5,
        region=None, cdk_json=str(ROOT / "cdk.json"),
    )  # fmt: skip
    asked: list[tuple[str, str]] = []

    def factory(service: str, region: str) -> Any:
        asked.append((service, region))
        return logs

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert logs_command.show(args, client=factory) == 0
    stub.assert_no_pending_responses()
    assert asked == [("logs", REGION)]
    assert "1 line(s)" in printed.getvalue() and SECRET not in printed.getvalue()


def test_a_missing_log_group_is_said_and_an_unknown_section_refused() -> None:
    logs = client()
    stub = Stubber(logs)
    stub.add_client_error("filter_log_events", service_error_code="ResourceNotFoundException")
    stub.activate()
    query = LogQuery(("start",), timedelta(minutes=5), None, None, 10)
    printed = read_logs(ROOT / "cdk.json", "dev", "cpu", query, region="eu-west-1", client=lambda s, r: logs, now=NOW)
    assert "  no log group yet: the endpoint has not started a container" in printed
    with pytest.raises(ValueError, match=r"environments\.dev\.gpu is not an enabled decision endpoint"):
        read_logs(ROOT / "cdk.json", "dev", "gpu", query, region=None, client=lambda s, r: logs, now=NOW)
