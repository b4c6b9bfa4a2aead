"""decisionctl check-deployed: every production variant of an environment's deployed decision endpoints scored on the
suite and held to the evaluation record."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from decisionctl.commands import options
from decisionctl.exit_codes import EXIT_FAILED
from decisionctl.review import deployed, summary
from decisionctl.transport import HttpSender, Sender


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Describe each decision endpoint (InService) and score the suite cdk.json names for --env on each production "
        "variant (TargetVariant). A variant fails when a case is unscored, when its run identity names another model, "
        "calibration or policy than the record (environments.<env>.evaluation.record), when a case moves more than "
        "tolerance.probability or more than tolerance.flips picks flip. Shadow variants are listed. A components "
        "endpoint is invoked through its inference component (--inference-component, or the outputs' <Section>Inference"
        "ComponentName), waited for from zero (--capacity-wait). --url checks adapters reached directly (a laptop's, "
        "another build's; --api-key if keyed), one variant each. Exits 1 if one fails."
    )
    p.add_argument("--env", required=True, help="the environment in cdk.json whose suite, record and tolerance to use")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--endpoint", action="append", metavar="NAME", help="a SageMaker endpoint to check (repeat for more)"
    )
    target.add_argument(
        "--outputs",
        metavar="PATH",
        help="cdk deploy --outputs-file's JSON: the decision endpoints of DecisionEndpoints-<env>-Serving",
    )
    target.add_argument("--url", action="append", help="an adapter reached directly, one variant; no AWS (repeatable)")
    p.add_argument("--region", help="AWS region of the endpoints (default: from the AWS configuration)")
    options.add_api_key(p)
    options.add_component(p)  # with one --endpoint; --outputs names each components endpoint's own
    p.add_argument("--cdk-json", default="cdk.json", metavar="PATH", help="the project's cdk.json (./cdk.json)")
    p.add_argument(
        "--out",
        default="check-deployed",
        metavar="DIR",
        help="predictions per endpoint and variant, OUT/<endpoint>/<variant> (default ./check-deployed)",
    )
    options.add_report_files(p)
    options.add_timeout(p)
    options.add_retry(p)


def run(args: argparse.Namespace) -> int:
    if args.url:  # each URL one variant: a laptop's or another build's adapter held to the record, no AWS call
        direct = {"api_key": args.api_key, "timeout_s": args.timeout}
        return check(args, sagemaker=None, sender_for=lambda url, *_: HttpSender(url, **direct))
    import boto3

    if args.inference_component and (not args.endpoint or len(args.endpoint) != 1):
        raise options.UsageError("--inference-component names the component of one --endpoint (--outputs names each)")

    def sender_for(endpoint: str, variant: str, component: str | None) -> Sender:
        variant_or_all = None if component else variant  # a components endpoint's one variant serves the component
        return options.sender(
            args, max_connections=16, endpoint=endpoint, component=component, target_variant=variant_or_all
        )

    return check(args, sagemaker=boto3.client("sagemaker", region_name=args.region), sender_for=sender_for)


def check(args: argparse.Namespace, *, sagemaker: Any, sender_for: deployed.SenderFor) -> int:
    """The check with the clients given (run builds them; tests pass stand-ins)."""
    outputs, retry = None if args.outputs is None else Path(args.outputs), options.retry_policy(args)
    asked = deployed.DeployedCheck(
        args.env, Path(args.cdk_json), args.endpoint, outputs, args.inference_component, Path(args.out), retry, args.url
    )
    report = deployed.check_environment(asked, sagemaker=sagemaker, sender_for=sender_for, say=options.say)
    if report is not None:
        options.write_report(args, summary.deployed_check(report, title=f"Deployed variants: {args.env}"), report)
    return 0 if report is not None and report["passed"] else EXIT_FAILED
