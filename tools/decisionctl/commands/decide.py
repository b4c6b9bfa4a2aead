"""decisionctl decide: send one decision request and print the answers."""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

from decisionctl.commands.options import add_retry, add_target, report_retry, retry_policy, say, sender
from decisionctl.traffic import one_decision


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
    result = one_decision.decide_once(
        text,
        connect=partial(sender, args, max_connections=1),
        policy=retry_policy(args),
        on_retry=report_retry,
        raw=args.json,
        show_identity=args.show_identity,
        say=say,
    )
    print(result.text, end="")
    return result.status
