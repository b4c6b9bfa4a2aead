"""The logs use case: the adapter's decision and rejection lines of an environment's endpoints from CloudWatch Logs
(FilterLogEvents), filtered by event, request id, action and time, each shown as one line of counts and names: the
adapter logs no request text unless DECISION_LOG_TEXT is on, and this never prints it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from decision_spec import events

from decisionctl.operations.deployed_names import ClientFor, load

REJECTIONS = (
    events.OVERLOAD_REJECTED,
    events.TOKEN_BUDGET_EXCEEDED,
    events.DEADLINE_EXCEEDED,
    events.RUNTIME_FAILURE,
)
START_UP = (events.READY, events.MODEL_CHECKSUM_MISMATCH, events.MODEL_NOT_LOADED, events.POLICY_REFUSED)
LOG_KINDS = {"decision": (events.DECISION,), "rejection": REJECTIONS, "start": START_UP}
PAGE = 1000  # FilterLogEvents' largest page


@dataclass(frozen=True)
class LogQuery:
    kinds: tuple[str, ...]  # keys of LOG_KINDS
    since: timedelta
    request_id: str | None
    action: str | None  # automate, review or abstain: decision lines with at least one answer so
    limit: int


def filter_pattern(query: LogQuery) -> str:
    """A CloudWatch Logs JSON filter pattern selecting the query's lines."""
    names = [name for kind in query.kinds for name in LOG_KINDS[kind]]
    terms = ["(" + " || ".join(f'$.event = "{name}"' for name in names) + ")"]
    if query.request_id is not None:
        terms.append(f'$.request_id = "{query.request_id}"')
    if query.action is not None:
        terms.append(f"$.{events.ACTION_COUNT_FIELDS[query.action]} > 0")  # type: ignore[index]
    return "{ " + " && ".join(terms) + " }"


def shown(line: dict[str, Any]) -> str:
    """One log line as counts and names (never a state or an instruction)."""
    event = line.get("event", "?")
    head = f"{event} {line.get('request_id', '-')} {line.get('route', '')} {line.get('status', '')}".rstrip()
    if event != events.DECISION:
        return head
    parts = [f"{line.get('latency_ms', '?')} ms", f"{line.get(events.ANSWERS_FIELD, '?')} answer(s)"]
    if events.POLICY_FIELD in line:
        counts = ", ".join(f"{line.get(f, 0)} {f}" for f in events.ACTION_COUNT_FIELDS.values())
        parts.append(f"policy {line[events.POLICY_FIELD]}: {counts}")
    if line.get(events.INPUT_FLAGGED_FIELD):
        parts.append(f"{line[events.INPUT_FLAGGED_FIELD]} flagged")
    model = (line.get("identity") or {}).get("model_sha256")
    if model:
        parts.append(f"model {str(model)[:12]}")
    return f"{head}  " + ", ".join(parts)


def read_logs(
    cdk_json: Path,
    environment: str,
    section_name: str | None,
    query: LogQuery,
    *,
    region: str | None,
    client: ClientFor,
    now: datetime | None = None,
) -> list[str]:
    """The matching lines of each section's log group (or the one named), oldest first, at most `limit` a section;
    `client(service, region)` builds the CloudWatch Logs client (region: cdk.json's unless given)."""
    deployed = load(cdk_json, environment)
    sections = deployed.section(section_name)
    logs = client("logs", region or deployed.region)
    end = now or datetime.now(UTC)
    start_ms = int((end - query.since).timestamp() * 1000)
    pattern = filter_pattern(query)
    printed: list[str] = []
    for section in sections:
        printed.append(f"{section.name}: {section.log_group}, since {end - query.since:%Y-%m-%d %H:%M:%S %Z}")
        found = 0
        request: dict[str, Any] = {
            "logGroupName": section.log_group,
            "startTime": start_ms,
            "endTime": int(end.timestamp() * 1000),
            "filterPattern": pattern,
            "limit": min(PAGE, query.limit),
        }
        while found < query.limit:
            try:
                page = logs.filter_log_events(**request)
            except Exception as exc:
                code = (getattr(exc, "response", None) or {}).get("Error", {}).get("Code")
                if code != "ResourceNotFoundException":
                    raise
                printed.append("  no log group yet: the endpoint has not started a container")
                break
            for item in page.get("events", [])[: query.limit - found]:
                found += 1
                when = datetime.fromtimestamp(item["timestamp"] / 1000, UTC)
                try:
                    line = json.loads(item["message"])
                except ValueError:
                    line = None
                text = shown(line) if isinstance(line, dict) else "(not a JSON line of the adapter)"
                printed.append(f"  {when:%H:%M:%S} {item.get('logStreamName', '')[-12:]}  {text}")
            token = page.get("nextToken")
            if not token:
                break
            request["nextToken"] = token
        printed.append(f"  {found} line(s)")
    return printed
