"""decisionctl status: what an environment runs and was evaluated as, on one screen."""

from __future__ import annotations

import argparse
from pathlib import Path

from decisionctl.exit_codes import EXIT_FAILED
from decisionctl.operations.deployed_names import ClientFor
from decisionctl.operations.status_report import environment_status


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Read-only: each decision endpoint of --env (cdk.json names them) with its status, variants and instance "
        "counts, a components endpoint's copies and whether it is scaled to zero, the model's sha256 and the answer "
        "settings its container was given, the evaluation record the Serving stack serves against the committed "
        "one, every alarm of the environment in ALARM, and the Serving stack's last deployment. Exits 1 when an "
        "endpoint is missing or not InService, or an alarm is in ALARM."
    )
    p.add_argument("--env", required=True, help="the environment in cdk.json")
    p.add_argument("--region", help="AWS region (default: cdk.json's environments.<env>.region)")
    p.add_argument("--cdk-json", default="cdk.json", metavar="PATH", help="the project's cdk.json (./cdk.json)")


def run(args: argparse.Namespace) -> int:
    import boto3

    return show(args, client=lambda service, region: boto3.client(service, region_name=region))


def show(args: argparse.Namespace, *, client: ClientFor) -> int:
    """The command with the client factory given (run's builds boto3 clients; tests return stubbed ones)."""
    status = environment_status(Path(args.cdk_json), args.env, args.region, client=client)
    print("\n".join(status.lines))
    return 0 if status.healthy else EXIT_FAILED
