"""decisionctl batch run: a JSONL file of decisions through Batch Transform, async inference or a local adapter."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from decisionctl.bulk import jobs
from decisionctl.bulk.aws_calls import BulkAwsError
from decisionctl.bulk.records import RecordError
from decisionctl.bulk.run_state import SUMMARY, BatchRunError, describe
from decisionctl.commands.options import (
    API_KEY_ENV,
    EXIT_FAILED,
    UsageError,
    add_component,
    add_retry,
    capacity_wait,
    retry_policy,
    say,
)
from decisionctl.load.prices import BUILTIN, load_prices
from decisionctl.transport import RealTimeEndpointSender

NAME = "batch"
HELP = "run a JSONL file of decisions through Batch Transform, an async endpoint or a local adapter"
EXIT_INTERRUPTED = 130


def invocation_timeout(text: str) -> int:
    try:
        seconds = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"whole seconds expected: {text!r}") from exc
    if not 1 <= seconds <= 3600:
        raise argparse.ArgumentTypeError(f"SageMaker allows 1 to 3600 seconds per asynchronous request: {seconds}")
    return seconds


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = "Bulk decisions; see docs/bulk.md for when to use real-time, async or batch."
    sub = p.add_subparsers(dest="batch_command", required=True, metavar="ACTION")
    r = sub.add_parser(
        "run",
        help="answer every record of a JSONL file (resumable)",
        description="Read CASES.jsonl as a stream (decision bodies with an optional id, or labeled cases in the "
        "evaluate format), send it in parts, wait with progress, and write answers.jsonl (one line per record, "
        "joined by id, never the state text) and summary.json into --out; a labeled file also gets an evaluate "
        "directory that `decisionctl evaluate`'s report and `decisionctl compare` read. Interrupted runs go on "
        "where they stopped when run again with the same --out.",
    )
    r.add_argument("cases", metavar="CASES.jsonl", help="decision bodies or labeled cases, one a line")
    target = r.add_argument_group("target (one of)").add_mutually_exclusive_group(required=True)
    target.add_argument("--transform", metavar="ENV", help="the Batch Transform state machine of environment ENV")
    target.add_argument("--async-endpoint", metavar="NAME", help="an asynchronous SageMaker endpoint")
    target.add_argument("--url", help="a running adapter's base URL: its JSON Lines route (a dry run)")
    target.add_argument(
        "--sagemaker-endpoint",
        metavar="NAME",
        help="a real-time endpoint: mini-batches of JSON Lines through InvokeEndpoint (8 records each by default)",
    )
    add_component(r)
    r.add_argument("--out", required=True, metavar="DIR", help="output directory (also holds the run state)")
    r.add_argument("--region", help="AWS region (default: from the AWS configuration)")
    r.add_argument(
        "--input-uri",
        metavar="S3_URI",
        help="--async-endpoint: where requests go (default: input/ beside the endpoint's output/)",
    )
    r.add_argument(
        "--api-key", default=os.environ.get(API_KEY_ENV), help=f"--url: bearer key (default: ${API_KEY_ENV})"
    )
    r.add_argument(
        "--part-records", type=int, metavar="N", help="records per part (defaults: transform 5000, async 200, url 50)"
    )
    r.add_argument(
        "--invocation-timeout",
        type=invocation_timeout,
        default=jobs.ASYNC_INVOCATION_TIMEOUT_S,
        metavar="S",
        help="--async-endpoint: seconds SageMaker gives each part before it fails it (1-3600; default 3600)",
    )
    r.add_argument("--poll", type=float, default=10.0, metavar="S", help="seconds between status checks (10)")
    r.add_argument("--wait-timeout", type=float, metavar="S", help="stop waiting after S seconds (resumable)")
    r.add_argument("--prices", default=BUILTIN, metavar="FILE", help="hourly prices for the cost estimate")
    r.add_argument("--restart", action="store_true", help="forget the run in --out and start a new one")
    r.add_argument("--target-accuracy", type=float, default=0.9, help="labeled input: as evaluate's (0.9)")
    r.add_argument("--min-support", type=int, default=5, help="labeled input: as evaluate's (5)")
    r.add_argument("--review-accuracy", type=float, default=0.5, help="labeled input: as evaluate's (0.5)")
    add_retry(r)


def run(args: argparse.Namespace) -> int:
    cases, out = Path(args.cases), Path(args.out)
    defaults = {
        "transform": jobs.TRANSFORM_PARTS,
        "async": jobs.ASYNC_PARTS,
        "url": jobs.URL_BATCHES,
        "realtime": jobs.REALTIME_BATCHES,
    }
    mode = (
        "transform"
        if args.transform
        else "async"
        if args.async_endpoint
        else "realtime"
        if args.sagemaker_endpoint
        else "url"
    )
    if args.inference_component and mode != "realtime":
        raise UsageError("--inference-component is for --sagemaker-endpoint (a real-time components endpoint)")
    size = defaults[mode]
    options = jobs.Options(
        parts=jobs.PartSize(args.part_records, size.bytes) if args.part_records else size,
        poll_s=args.poll,
        wait_timeout_s=args.wait_timeout,
        invocation_timeout_s=args.invocation_timeout,
        prices=load_prices(args.prices),
        thresholds={
            "target_accuracy": args.target_accuracy,
            "min_support": args.min_support,
            "review_accuracy": args.review_accuracy,
        },
        restart=args.restart,
    )
    try:
        if mode == "url":
            client = jobs.JsonLinesClient(args.url, api_key=args.api_key)
            summary = jobs.run_url(cases, out, url=args.url, options=options, client=client, policy=retry_policy(args))
        elif mode == "realtime":
            endpoint = RealTimeEndpointSender(
                args.sagemaker_endpoint,
                region=args.region,
                timeout_s=jobs.REALTIME_TIMEOUT_S,
                inference_component=args.inference_component,
                capacity_wait=capacity_wait(args),
            )
            realtime = jobs.RealTimeJsonLinesClient(endpoint)
            summary = jobs.run_url(
                cases, out, url=realtime.label, options=options, client=realtime, policy=retry_policy(args)
            )
        else:
            clients = jobs.AwsClients.create(args.region)
            if mode == "transform":
                summary = jobs.run_transform(cases, out, environment=args.transform, clients=clients, options=options)
            else:
                summary = jobs.run_async(
                    cases, out, endpoint=args.async_endpoint, clients=clients, options=options, input_uri=args.input_uri
                )
    except (RecordError, BatchRunError, BulkAwsError) as exc:
        say(str(exc))
        return EXIT_FAILED
    except KeyboardInterrupt:
        say(f"interrupted: run the same command again to go on (the run state is in {out})")
        return EXIT_INTERRUPTED
    print(describe(summary))
    written = [out / summary["answers"], out / SUMMARY]
    if summary["evaluate"] and summary["evaluate"]["written"]:
        written.append(out / summary["evaluate"]["directory"])
    print("wrote " + ", ".join(str(w) for w in written))
    finished = summary.get("execution", {}).get("status", "SUCCEEDED") == "SUCCEEDED"
    return 0 if summary["failed"] == 0 and finished else EXIT_FAILED
