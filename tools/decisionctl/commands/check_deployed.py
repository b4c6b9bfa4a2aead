"""decisionctl check-deployed: every production variant of an environment's deployed decision endpoints scored on the
suite and held to the evaluation record."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from decisionctl.commands.options import (
    EXIT_FAILED,
    UsageError,
    add_component,
    add_report_files,
    add_retry,
    capacity_wait,
    retry_policy,
    say,
    write_report,
)
from decisionctl.review import deployed, summary
from decisionctl.review import record as records
from decisionctl.review import settings as review_settings
from decisionctl.transport import DEFAULT_TIMEOUT_S, RealTimeEndpointTransport, Transport

NAME = "check-deployed"
HELP = "score each deployed variant on the suite; fail if it is not the recorded artifact within the tolerance"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Describe each decision endpoint (it must be InService) and score the suite cdk.json names for --env on "
        "every production variant (TargetVariant), from scratch. A variant fails when a case is not scored, when "
        "its run identity names another model, calibration or policy than the record "
        "(environments.<env>.evaluation.record), when any case's probabilities move more than "
        "tolerance.probability from the record's, or when more than tolerance.flips picks flip. Shadow variants "
        "are listed, not checked. A components endpoint is invoked through its inference component "
        "(--inference-component, or the outputs' <Section>InferenceComponentName) and waited for while it scales from "
        "zero (--capacity-wait). Prints Markdown; exits 1 when a variant fails."
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
    p.add_argument("--region", help="AWS region of the endpoints (default: from the AWS configuration)")
    add_component(p)  # with one --endpoint; --outputs names each components endpoint's own
    p.add_argument("--cdk-json", default="cdk.json", metavar="PATH", help="the project's cdk.json (./cdk.json)")
    p.add_argument(
        "--out",
        default="check-deployed",
        metavar="DIR",
        help="predictions per endpoint and variant, OUT/<endpoint>/<variant> (default ./check-deployed)",
    )
    add_report_files(p)
    p.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds to wait for one answer (default %(default)s)"
    )
    add_retry(p)


def run(args: argparse.Namespace) -> int:
    import boto3

    components = component_names(args)

    def transport_for(endpoint: str, variant: str) -> Transport:
        component = components.get(endpoint)  # a component endpoint's one variant serves the component
        return RealTimeEndpointTransport(
            endpoint,
            region=args.region,
            timeout_s=args.timeout,
            target_variant=None if component else variant,
            inference_component=component,
            capacity_wait=capacity_wait(args),
        )

    return check(args, sagemaker=boto3.client("sagemaker", region_name=args.region), transport_for=transport_for)


def component_names(args: argparse.Namespace) -> dict[str, str]:
    """Endpoint -> inference component: --inference-component for the one --endpoint, or the outputs file's."""
    if args.inference_component:
        if not args.endpoint or len(args.endpoint) != 1:
            raise UsageError("--inference-component names the component of one --endpoint (--outputs names each)")
        return {args.endpoint[0]: args.inference_component}
    if args.outputs:
        try:
            return deployed.components_from_outputs(Path(args.outputs), args.env)
        except (OSError, ValueError, KeyError):
            return {}  # check() reports what is wrong with the file
    return {}


def check(args: argparse.Namespace, *, sagemaker: Any, transport_for: deployed.TransportFor) -> int:
    """The check with the clients given (run builds them; tests pass stand-ins)."""
    settings = review_settings.load(Path(args.cdk_json), args.env)
    _, cases = settings.read_suite()
    try:
        record = records.read(settings.record)
        endpoints = args.endpoint or deployed.endpoints_from_outputs(Path(args.outputs), args.env)
    except (records.RecordError, deployed.DeployedError) as exc:
        say(str(exc))
        return EXIT_FAILED
    report = deployed.check(
        endpoints,
        environment=args.env,
        record_path=settings.record,
        record=record,
        cases=cases,
        tolerance=settings.evaluation.tolerance,
        sagemaker=sagemaker,
        transport_for=transport_for,
        out=Path(args.out),
        policy=retry_policy(args),
        say=say,
    )
    text = summary.deployed_check(report, title=f"Deployed variants: {args.env}")
    write_report(args, text, report)
    return 0 if report["passed"] else EXIT_FAILED
