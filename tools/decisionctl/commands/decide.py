"""decisionctl decide: send one decision request and print the answers."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from decisionctl import tables
from decisionctl.commands.options import EXIT_FAILED, add_retry, add_target, report_retry, retry_policy, say, transport
from decisionctl.evaluation.cases import read_response
from decisionctl.transport import send_with_retries

NAME = "decide"
HELP = "send one decision request and print the answers"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Send one decision request (a JSON file or stdin) and print the answers. "
        "Retries 429, 503, other 5xx and timeouts with backoff and jitter, honouring "
        "Retry-After; never retries another 4xx."
    )
    p.add_argument("request", nargs="?", default="-", help="request JSON file, or - for stdin (default)")
    add_target(p)
    p.add_argument("--json", action="store_true", help="print the raw response JSON")
    p.add_argument("--show-identity", action="store_true", help="also print the response's run identity (x_run)")
    add_retry(p)


def run(args: argparse.Namespace) -> int:
    text = sys.stdin.read() if args.request == "-" else Path(args.request).read_text(encoding="utf-8")
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        say(f"the request is not JSON: {exc.msg} (line {exc.lineno})")
        return EXIT_FAILED
    endpoint = transport(args, max_connections=1)
    try:
        reply, _ = send_with_retries(endpoint, body, retry_policy(args), on_retry=report_retry)
    finally:
        endpoint.close()
    if not reply.ok:
        say(reply.describe_error())
        return EXIT_FAILED
    body = reply.json()
    if args.json:  # the reply as the server wrote it
        print(json.dumps(body, indent=2, ensure_ascii=False))
        return 0
    try:
        response = read_response(body)
    except ValueError as exc:
        say(f"the reply is not a decision response: {exc}")
        return EXIT_FAILED
    print(tables.answers(response))
    print(f"\nmodel {response.model}, {response.usage.input_tokens} input tokens, {reply.latency_s:.3f} s")
    if args.show_identity:
        print("run identity (x_run):")
        identity = response.x_run.model_dump(mode="json") if response.x_run else None
        print(json.dumps(identity, indent=2, sort_keys=True))
    return 0
