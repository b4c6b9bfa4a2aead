"""decisionctl logs: the adapter's decision and rejection lines of an environment, from CloudWatch Logs."""

from __future__ import annotations

import argparse
from datetime import timedelta
from pathlib import Path

from decision_spec.environment_config import IMAGE_FLAVOURS

from decisionctl.operations.deployed_names import ClientFor
from decisionctl.operations.log_search import LOG_KINDS, LogQuery, read_logs


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "FilterLogEvents on each decision endpoint's log group of --env (a components endpoint's lines are in its "
        "inference component's group): one line per request with its id, route, status, latency, answers, and "
        "under a policy the answers per action. Request text is never shown."
    )
    p.add_argument("--env", required=True, help="the environment in cdk.json")
    p.add_argument("--section", choices=tuple(IMAGE_FLAVOURS), help="one endpoint (default: each)")
    p.add_argument(
        "--kind",
        action="append",
        choices=sorted(LOG_KINDS),
        help="decision, rejection (429/413/504/500) or start lines; repeatable (default: decision and rejection)",
    )
    p.add_argument("--since", type=int, default=60, metavar="MINUTES", help="how far back (default 60)")
    p.add_argument("--request-id", help="the lines of one request (its x_run.request_id)")
    p.add_argument("--action", choices=("automate", "review", "abstain"), help="decisions with an answer so")
    p.add_argument("--limit", type=int, default=50, help="lines per endpoint at most (default 50)")
    p.add_argument("--region", help="AWS region (default: cdk.json's environments.<env>.region)")
    p.add_argument("--cdk-json", default="cdk.json", metavar="PATH", help="the project's cdk.json (./cdk.json)")


def run(args: argparse.Namespace) -> int:
    import boto3

    return show(args, client=lambda service, region: boto3.client(service, region_name=region))


def show(args: argparse.Namespace, *, client: ClientFor) -> int:
    """The command with the client factory given (run's builds boto3 clients; tests return stubbed ones)."""
    kinds = tuple(args.kind or ("decision", "rejection"))
    query = LogQuery(kinds, timedelta(minutes=args.since), args.request_id, args.action, args.limit)
    lines = read_logs(Path(args.cdk_json), args.env, args.section, query, region=args.region, client=client)
    print("\n".join(lines))
    return 0
