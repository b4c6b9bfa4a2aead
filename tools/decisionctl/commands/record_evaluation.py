"""decisionctl record-evaluation: evaluate a packaged artifact on its environment's suite and write the record
beside the artifact and where cdk.json names it."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

from decisionctl.commands.options import (
    add_retry,
    add_target,
    retry_policy,
    say,
    sender,
)
from decisionctl.exit_codes import EXIT_FAILED, EXIT_INTERRUPTED
from decisionctl.review.recording import record_evaluation


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Score the suite cdk.json names for --env (environments.<env>.evaluation.suite; outside the repository "
        "where evaluation.suite_sha256 states its sha256, which the file must have) on an endpoint serving the "
        "artifact in --artifact (the package-model directory: manifest.json and the GGUF), check that the endpoint "
        "served that artifact (model, calibration, policy), and write the evaluation record: per-case answers by "
        "case id (no text), accuracy, ECE, Brier, the policy's bands measured on the suite, action shares and the "
        "run identity. It goes to ARTIFACT/evaluation.json (package-model --upload puts it beside manifest.json) "
        "and to environments.<env>.evaluation.record, which synth and the deployment's preflight check."
    )
    p.add_argument("--env", required=True, help="the environment in cdk.json whose suite and record to use")
    p.add_argument("--artifact", required=True, metavar="DIR", help="the package-model --out directory")
    p.add_argument("--cdk-json", default="cdk.json", metavar="PATH", help="the project's cdk.json (./cdk.json)")
    add_target(p)
    p.add_argument("--concurrency", type=int, default=1, help="requests in flight at once (default 1)")
    p.add_argument(
        "--resume",
        action="store_true",
        help="keep the predictions an interrupted run of this artifact left (the same adapter, settings unchanged); "
        "by default every case is scored again: a record must come from one run",
    )
    add_retry(p)


def run(args: argparse.Namespace) -> int:
    recorded = record_evaluation(
        Path(args.cdk_json),
        args.env,
        Path(args.artifact),
        connect=partial(sender, args, max_connections=args.concurrency),
        concurrency=args.concurrency,
        resume=args.resume,
        retry=retry_policy(args),
        say=say,
    )
    for line in recorded.printed:
        print(line)
    return EXIT_INTERRUPTED if recorded.interrupted else EXIT_FAILED if recorded.failed else 0
