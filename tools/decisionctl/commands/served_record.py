"""decisionctl served-record: the evaluation record a deployed stack serves, from the repository's history."""

from __future__ import annotations

import argparse
from typing import Any

from decision_spec.evaluation_record import RECORD_OUTPUT

from decisionctl.commands.options import say
from decisionctl.core import served
from decisionctl.exit_codes import EXIT_FAILED


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        f"Read the output {RECORD_OUTPUT} of --stack and write the version of --record in the git history "
        "whose bytes have that sha256 to --out: the base a decision diff compares a candidate with. Where the stack "
        "does not exist or has no such output, nothing is served yet: nothing is written and the exit status is 0 "
        "(decision-diff --missing-base new then reports the candidate alone). Exits 1 when no version in the "
        "history has the sha256 (a shallow clone: fetch the whole history)."
    )
    p.add_argument("--stack", required=True, help="the Serving stack, e.g. DecisionEndpoints-prod-Serving")
    p.add_argument("--record", required=True, metavar="PATH", help="the record's path in the repository")
    p.add_argument("--out", required=True, metavar="PATH", help="where to write the served version")
    p.add_argument("--region", help="AWS region of the stack (default: from the AWS configuration)")


def run(args: argparse.Namespace) -> int:
    import boto3

    return write(args, cloudformation=boto3.client("cloudformation", region_name=args.region))


def write(args: argparse.Namespace, *, cloudformation: Any) -> int:
    """The command with the client given (run builds it; tests pass a stubbed one)."""
    try:
        say(served.write_served_record(args.stack, args.record, args.out, cloudformation=cloudformation))
    except served.ServedError as exc:
        say(str(exc))
        return EXIT_FAILED
    return 0
