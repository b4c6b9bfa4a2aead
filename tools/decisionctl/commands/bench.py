"""decisionctl bench: load-test one or two endpoints at several concurrency levels."""

from __future__ import annotations

import argparse
import dataclasses
from functools import partial

from decisionctl.commands.options import UsageError, add_retry, add_target, retry_policy, say, sender
from decisionctl.core.prices import BUILTIN
from decisionctl.load import bench_job
from decisionctl.load.workloads import NAMES, levels_arg, workloads_arg

REQUESTS = "decision request bodies, one a line, sent in turn (default: the shipped set)"
GAP = "agent-supervisor: seconds between the answer on a state and the next question on it (2)"
PRICES = "add cost per 1,000 requests from hourly prices (no FILE: the shipped example table)"
RECOMMEND = "print the highest concurrency per instance whose p95 meets --slo-p95-ms with no 429s, and its key"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Closed-loop load test with the retry policy of decide and evaluate: per concurrency level, decisions "
        "per second, p50/p95/p99 latency of accepted decisions, the 429 rate among sends, sends per accepted "
        "decision and decisions lost; bench.json and bench.png in --out. Sends only to a loopback URL or a "
        "SageMaker endpoint. --recommend-scaling reads the autoscaling target off the run (or off --from-result)."
    )
    add_target(p, required=False)
    source = p.add_mutually_exclusive_group()
    source.add_argument("--requests", metavar="FILE.jsonl", help=REQUESTS)
    workloads = "generated workloads instead: all, or some of " + ", ".join(NAMES)
    source.add_argument("--workload", type=workloads_arg, metavar="NAMES", help=workloads)
    p.add_argument("--concurrency", type=levels_arg, default=[1, 2, 4, 8, 16], help="levels, e.g. 1,2,4,8,16 (default)")
    p.add_argument("--count", type=int, help="decisions per level, at most (default 20, or no limit with --duration)")
    p.add_argument("--duration", type=float, metavar="S", help="seconds per level, at most (default: one hour)")
    p.add_argument("--warmup", type=int, default=1, help="unmeasured requests before the first level (1)")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated requests and of the jitter (0)")
    p.add_argument("--question-gap", type=float, default=2.0, metavar="S", help=GAP)
    add_retry(p)
    p.add_argument("--label", help="name of the first target in tables and plots, e.g. cpu")
    p.add_argument(
        "--compare", metavar="URL_OR_ENDPOINT", help="a second target: http(s) URL or SageMaker endpoint name"
    )
    p.add_argument("--compare-label", help="name of the second target, e.g. gpu")
    p.add_argument("--compare-inference-component", metavar="NAME", help="the second endpoint's inference component")
    p.add_argument("--prices", nargs="?", const=BUILTIN, metavar="FILE", help=PRICES)
    p.add_argument("--instance-type", help="instance type of the first target, e.g. ml.c6i.8xlarge")
    p.add_argument("--compare-instance-type", help="instance type of the second target, e.g. ml.g6e.xlarge")
    p.add_argument("--out", default="bench", metavar="DIR", help="output directory (default ./bench)")
    scaling = p.add_argument_group("autoscaling target")
    scaling.add_argument("--recommend-scaling", action="store_true", help=RECOMMEND)
    scaling.add_argument("--slo-p95-ms", type=float, metavar="MS", help="the p95 latency objective")
    scaling.add_argument("--from-result", metavar="FILE", help="a recorded bench.json to read instead of a new run")


def run(args: argparse.Namespace) -> int:
    if args.recommend_scaling and args.slo_p95_ms is None:
        raise UsageError("--recommend-scaling needs --slo-p95-ms")
    if args.from_result and not args.recommend_scaling:
        raise UsageError("--from-result is read by --recommend-scaling")
    if not (args.from_result or args.url or args.sagemaker_endpoint):
        raise UsageError("one of the arguments --url --sagemaker-endpoint is required (or --from-result)")
    if args.prices and not (args.instance_type and (args.compare_instance_type or not args.compare)):
        raise UsageError("--prices needs --instance-type (and --compare-instance-type for --compare)")
    fields = dataclasses.fields(bench_job.BenchOptions)
    options = bench_job.BenchOptions(**{f.name: getattr(args, f.name) for f in fields})

    result = bench_job.bench(options, connect=partial(sender, args), policy=retry_policy(args), say=say)
    print(result.text, end="")
    return result.status
