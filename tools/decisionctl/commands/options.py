"""Options several commands share (the endpoint to call, retries), declared once, and the helpers that read them."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from decision_spec.contract import DEFAULT_REVIEW_INPUT_FLAGS, INPUT_FLAGS

from decisionctl.transport import (
    DEFAULT_ROUTE,
    DEFAULT_TIMEOUT_S,
    HttpSender,
    RealTimeEndpointSender,
    Reply,
    RetryPolicy,
    Sender,
)

API_KEY_ENV = "DECISION_API_KEY"
DEFAULT_CAPACITY_WAIT_S = 900.0  # a components endpoint at zero answers minutes after its first refusal
CAPACITY_INTERVAL_S = 15.0  # between asks while it scales from zero (the client package's default)


class UsageError(ValueError):
    """Arguments that parse one by one but do not fit together; reported as argparse reports its own errors."""


def say(message: str) -> None:
    """Progress and failures go to stderr, so stdout holds only the result."""
    print(message, file=sys.stderr)


def add_report_files(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", metavar="PATH", help="write the full report here")
    parser.add_argument("--markdown", metavar="PATH", help="also write the Markdown here")


def write_report(args: argparse.Namespace, markdown: str, report: Mapping[str, Any]) -> None:
    """The Markdown to stdout and `--markdown`, the full report to `--json` (add_report_files declares both)."""
    print(markdown, end="")
    if args.markdown:
        Path(args.markdown).write_text(markdown, encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def shipped(name: str) -> Path:
    """A data file that ships with decisionctl (example cases, bench requests, prices)."""
    return Path(str(resources.files("decisionctl").joinpath("data", name)))


def add_target(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    group = parser.add_argument_group("endpoint (one of)")
    target = group.add_mutually_exclusive_group(required=required)
    target.add_argument("--url", help="base URL of a running adapter, e.g. http://127.0.0.1:8080")
    target.add_argument(
        "--sagemaker-endpoint", metavar="NAME", help="SageMaker endpoint name (standard AWS credential chain)"
    )
    group.add_argument("--region", help="AWS region of the SageMaker endpoint (default: from the AWS configuration)")
    add_component(group)
    group.add_argument(
        "--route",
        default=DEFAULT_ROUTE,
        help="path for --url (default /v1/systemone; /invocations is what SageMaker calls)",
    )
    add_api_key(group)
    add_timeout(group)


def add_api_key(parser: Any) -> None:
    parser.add_argument(
        "--api-key",
        default=os.environ.get(API_KEY_ENV),
        help=f"sent as 'Authorization: Bearer KEY' with --url (default: ${API_KEY_ENV})",
    )


def add_timeout(parser: Any) -> None:
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds to wait for one answer (default %(default)s)"
    )


def add_component(parser: Any) -> None:
    """The inference component of a components endpoint, and how long to wait for it at zero."""
    parser.add_argument(
        "--inference-component",
        metavar="NAME",
        help="the endpoint's inference component (hosting.mode components: cdk deploy's "
        "<Section>InferenceComponentName output, e.g. decision-dev-cpu-model)",
    )
    parser.add_argument(
        "--capacity-wait",
        type=float,
        default=DEFAULT_CAPACITY_WAIT_S,
        metavar="SECONDS",
        help="how long to wait for a component scaled to zero to answer, asking every 15 s with a progress line "
        "(default %(default)g; 0: fail at once)",
    )


def capacity_wait(args: argparse.Namespace) -> Any:
    """The client package's CapacityWait from --capacity-wait, reporting on stderr; None for 0."""
    from decision_endpoints_client.capacity import CapacityProgress, CapacityWait

    def progress(p: CapacityProgress) -> None:
        say(p.line())

    seconds = getattr(args, "capacity_wait", DEFAULT_CAPACITY_WAIT_S)
    return CapacityWait(budget_s=seconds, interval_s=CAPACITY_INTERVAL_S, on_wait=progress) if seconds > 0 else None


def sender(
    args: argparse.Namespace,
    *,
    max_connections: int,
    url: str | None = None,
    endpoint: str | None = None,
    component: str | None = None,
    target_variant: str | None = None,
) -> Sender:
    """The sender to the target `add_target` declared, or to `url` / `endpoint` (and its `component`: bench's
    second target; its `target_variant`: check-deployed's variants)."""
    if url is None and endpoint is None:
        url, endpoint, component = args.url, args.sagemaker_endpoint, args.inference_component
    if url:
        if component:
            raise UsageError("--inference-component names a SageMaker component; --url reaches an adapter directly")
        return HttpSender(
            url, route=args.route, api_key=args.api_key, timeout_s=args.timeout, max_connections=max_connections
        )
    assert endpoint is not None
    return RealTimeEndpointSender(
        endpoint,
        region=args.region,
        timeout_s=args.timeout,
        max_connections=max_connections,
        target_variant=target_variant,
        inference_component=component,
        capacity_wait=capacity_wait(args),
    )


def add_review_input_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--review-input-flags",
        metavar="FLAGS",
        type=input_flags_arg,
        help="with --write-policy: send answers raising these input flags to review whatever their confidence, "
        f"comma-separated ({', '.join(INPUT_FLAGS)}), or 'none' to review no flag; default: the previous policy's "
        f"list, else {','.join(DEFAULT_REVIEW_INPUT_FLAGS)} (docs/security.md)",
    )


def input_flags_arg(text: str) -> list[str]:
    """--review-input-flags: input flags by name, comma-separated, or 'none'."""
    flags = [] if text == "none" else [f.strip() for f in text.split(",") if f.strip()]
    unknown = sorted(set(flags) - set(INPUT_FLAGS))
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown input flags {unknown}; known: {', '.join(INPUT_FLAGS)} or none")
    return flags


def add_retry(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-attempts",
        type=int,
        default=RetryPolicy.max_attempts,
        help="attempts per request, first included (default %(default)s)",
    )


def retry_policy(args: argparse.Namespace) -> RetryPolicy:
    return RetryPolicy(max_attempts=args.max_attempts)


def report_retry(attempt: int, reply: Reply, wait: float) -> None:
    say(f"attempt {attempt}: {reply.describe_error()}; retrying in {wait:.2f} s")
