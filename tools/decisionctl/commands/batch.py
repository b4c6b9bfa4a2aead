"""decisionctl batch run: a JSONL file of decisions through Batch Transform, async inference or a local adapter."""

from __future__ import annotations

import argparse
import dataclasses
import os

from decisionctl.bulk import batch_job
from decisionctl.bulk.batch_job import invocation_timeout_arg
from decisionctl.bulk.jobs import ASYNC_INVOCATION_TIMEOUT_S
from decisionctl.commands.options import (
    API_KEY_ENV,
    UsageError,
    add_component,
    add_retry,
    capacity_wait,
    retry_policy,
    say,
)
from decisionctl.core.prices import BUILTIN

RUN = (
    "Read CASES.jsonl as a stream (decision bodies with an optional id, or labeled cases in the "
    "evaluate format), send it in parts, wait with progress, and write answers.jsonl (one line per record, "
    "joined by id, never the state text) and summary.json into --out; a labeled file also gets an evaluate "
    "directory that `decisionctl evaluate`'s report and `decisionctl compare` read. Interrupted runs go on "
    "where they stopped when run again with the same --out."
)
REALTIME = "a real-time endpoint: mini-batches of JSON Lines through InvokeEndpoint (8 records each by default)"
INPUT_URI = "--async-endpoint: where requests go (default: input/ beside the endpoint's output/)"
PART_RECORDS = "records per part (defaults: transform 5000, async 200, url 50)"
TIMEOUT = "--async-endpoint: seconds SageMaker gives each part before it fails it (1-3600; default 3600)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = "Bulk decisions; see docs/bulk.md for when to use real-time, async or batch."
    sub = p.add_subparsers(dest="batch_command", required=True, metavar="ACTION")
    r = sub.add_parser("run", help="answer every record of a JSONL file (resumable)", description=RUN)
    r.add_argument("cases", metavar="CASES.jsonl", help="decision bodies or labeled cases, one a line")
    target = r.add_argument_group("target (one of)").add_mutually_exclusive_group(required=True)
    target.add_argument("--transform", metavar="ENV", help="the Batch Transform state machine of environment ENV")
    target.add_argument("--async-endpoint", metavar="NAME", help="an asynchronous SageMaker endpoint")
    target.add_argument("--url", help="a running adapter's base URL: its JSON Lines route (a dry run)")
    target.add_argument("--sagemaker-endpoint", metavar="NAME", help=REALTIME)
    add_component(r)
    r.add_argument("--out", required=True, metavar="DIR", help="output directory (also holds the run state)")
    r.add_argument("--region", help="AWS region (default: from the AWS configuration)")
    r.add_argument("--input-uri", metavar="S3_URI", help=INPUT_URI)
    key = f"--url: bearer key (default: ${API_KEY_ENV})"
    r.add_argument("--api-key", default=os.environ.get(API_KEY_ENV), help=key)
    r.add_argument("--part-records", type=int, metavar="N", help=PART_RECORDS)
    timeout = ASYNC_INVOCATION_TIMEOUT_S
    r.add_argument("--invocation-timeout", type=invocation_timeout_arg, default=timeout, metavar="S", help=TIMEOUT)
    r.add_argument("--poll", type=float, default=10.0, metavar="S", help="seconds between status checks (10)")
    r.add_argument("--wait-timeout", type=float, metavar="S", help="stop waiting after S seconds (resumable)")
    r.add_argument("--prices", default=BUILTIN, metavar="FILE", help="hourly prices for the cost estimate")
    r.add_argument("--restart", action="store_true", help="forget the run in --out and start a new one")
    r.add_argument("--target-accuracy", type=float, default=0.9, help="labeled input: as evaluate's (0.9)")
    r.add_argument("--min-support", type=int, default=5, help="labeled input: as evaluate's (5)")
    r.add_argument("--review-accuracy", type=float, default=0.5, help="labeled input: as evaluate's (0.5)")
    add_retry(r)


def run(args: argparse.Namespace) -> int:
    fields = dataclasses.fields(batch_job.BatchOptions)
    options = batch_job.BatchOptions(**{f.name: getattr(args, f.name) for f in fields})
    if args.inference_component and options.mode != "realtime":
        raise UsageError("--inference-component is for --sagemaker-endpoint (a real-time components endpoint)")
    result = batch_job.run_batch(options, policy=retry_policy(args), capacity_wait=capacity_wait(args), say=say)
    print(result.text, end="")
    return result.status
