"""decisionctl rollback: back to the model deployed before the one an environment serves, through a deployment."""

from __future__ import annotations

import argparse
from pathlib import Path

from decisionctl.commands.options import say
from decisionctl.exit_codes import EXIT_FAILED
from decisionctl.operations.deployed_names import ClientFor
from decisionctl.operations.going_back import RollbackRefused, roll_back


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Find the evaluation record the Serving stack of --env serves (its EvaluationRecordSha256) in the git "
        "history of evaluation.record, and the version before it that evaluates another artifact. Refuse where that "
        "record no longer binds (another suite, or the suite changed since) or its model.tar.gz is gone from the "
        "bucket. With --write, put that record and that commit's environments.<env>.model back into the working "
        "tree; commit and deploy them like any change, under the same guardrails and rollback alarms. No SageMaker "
        "call changes anything: CloudFormation has deleted the replaced endpoint configuration, and an endpoint "
        "changed outside its stack would drift from it."
    )
    p.add_argument("--env", required=True, help="the environment in cdk.json")
    p.add_argument("--write", action="store_true", help="write the previous record and model block (else: check)")
    p.add_argument("--region", help="AWS region (default: cdk.json's environments.<env>.region)")
    p.add_argument("--cdk-json", default="cdk.json", metavar="PATH", help="the project's cdk.json (./cdk.json)")


def run(args: argparse.Namespace) -> int:
    import boto3

    return go_back(args, client=lambda service, region: boto3.client(service, region_name=region))


def go_back(args: argparse.Namespace, *, client: ClientFor) -> int:
    """The command with the client factory given (run's builds boto3 clients; tests return stubbed ones)."""
    try:
        done = roll_back(Path(args.cdk_json), args.env, args.region, write=args.write, client=client)
    except RollbackRefused as exc:
        say(f"refused: {exc}")
        return EXIT_FAILED
    print("\n".join(done.lines))
    return 0
