"""The decide use case: one decision request sent with retries and its answers read back; the text to print and
the exit status returned."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from decisionctl import tables
from decisionctl.core.replies import read_response
from decisionctl.exit_codes import EXIT_FAILED
from decisionctl.transport import Reply, RetryPolicy, Sender, send_with_retries


@dataclass(frozen=True)
class DecideOutput:
    """What `decide` prints and the exit status it returns."""

    text: str
    status: int


def decide_once(
    request: str,
    *,
    connect: Callable[[], Sender],
    policy: RetryPolicy,
    on_retry: Callable[[int, Reply, float], None],
    raw: bool = False,
    show_identity: bool = False,
    say: Callable[[str], None],
) -> DecideOutput:
    """Send the request (JSON text) through the sender `connect` opens, retrying as `policy` says; the answers as a
    table (the reply as the server wrote it where `raw`), and the run identity where `show_identity`."""
    try:
        body = json.loads(request)
    except json.JSONDecodeError as exc:
        say(f"the request is not JSON: {exc.msg} (line {exc.lineno})")
        return DecideOutput("", EXIT_FAILED)
    endpoint = connect()
    try:
        reply, _ = send_with_retries(endpoint, body, policy, on_retry=on_retry)
    finally:
        endpoint.close()
    if not reply.ok:
        say(reply.describe_error())
        return DecideOutput("", EXIT_FAILED)
    body = reply.json()
    if raw:  # the reply as the server wrote it
        return DecideOutput(json.dumps(body, indent=2, ensure_ascii=False) + "\n", 0)
    try:
        response = read_response(body)
    except ValueError as exc:
        say(f"the reply is not a decision response: {exc}")
        return DecideOutput("", EXIT_FAILED)
    lines = [tables.answers(response)]
    lines.append(f"\nmodel {response.model}, {response.usage.input_tokens} input tokens, {reply.latency_s:.3f} s")
    if show_identity:
        lines.append("run identity (x_run):")
        identity = response.x_run.model_dump(mode="json") if response.x_run else None
        lines.append(json.dumps(identity, indent=2, sort_keys=True))
    return DecideOutput("".join(line + "\n" for line in lines), 0)
