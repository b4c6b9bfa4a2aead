"""decisionctl bench: load-test one or two endpoints at several concurrency levels."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from decisionctl import tables
from decisionctl.commands.options import (
    EXIT_FAILED,
    UsageError,
    add_retry,
    add_target,
    retry_policy,
    say,
    shipped,
    transport,
)
from decisionctl.load import runs, workloads
from decisionctl.load.closed_loop import MAX_DECISIONS_PER_LEVEL, MAX_LEVEL_S, check_bounds, require_loopback
from decisionctl.load.prices import BUILTIN, load_prices
from decisionctl.transport import Sender

NAME = "bench"
HELP = "load-test one or two endpoints at several concurrency levels"


def _levels(text: str) -> list[int]:
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"concurrency levels are integers separated by commas: {text!r}") from exc
    if not levels or any(c < 1 for c in levels):
        raise argparse.ArgumentTypeError("concurrency levels must be positive")
    return levels


def _workloads(text: str) -> list[str]:
    known = list(workloads.by_name())
    names = known if text == "all" else [x.strip() for x in text.split(",") if x.strip()]
    unknown = [n for n in names if n not in known]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"workloads are 'all' or some of {', '.join(known)}; got {text!r}")
    return names


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Closed-loop load test with the retry policy of decide and evaluate: per concurrency level, decisions "
        "per second, p50/p95/p99 latency of accepted decisions, the 429 rate among sends, sends per accepted "
        "decision and decisions lost; bench.json and bench.png in --out. Sends only to a loopback URL or a "
        "SageMaker endpoint. --recommend-scaling reads the autoscaling target off the run (or off --from-result)."
    )
    add_target(p, required=False)
    source = p.add_mutually_exclusive_group()
    source.add_argument(
        "--requests",
        metavar="FILE.jsonl",
        help="decision request bodies, one a line, sent in turn (default: the shipped set)",
    )
    source.add_argument(
        "--workload",
        type=_workloads,
        metavar="NAMES",
        help="generated workloads instead: all, or some of " + ", ".join(workloads.by_name()),
    )
    p.add_argument("--concurrency", type=_levels, default=[1, 2, 4, 8, 16], help="levels, e.g. 1,2,4,8,16 (default)")
    p.add_argument("--count", type=int, help="decisions per level, at most (default 20, or no limit with --duration)")
    p.add_argument("--duration", type=float, metavar="S", help="seconds per level, at most (default: one hour)")
    p.add_argument("--warmup", type=int, default=1, help="unmeasured requests before the first level (1)")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated requests and of the jitter (0)")
    p.add_argument(
        "--question-gap",
        type=float,
        default=2.0,
        metavar="S",
        help="agent-supervisor: seconds between the answer on a state and the next question on it (2)",
    )
    add_retry(p)
    p.add_argument("--label", help="name of the first target in tables and plots, e.g. cpu")
    p.add_argument(
        "--compare", metavar="URL_OR_ENDPOINT", help="a second target: http(s) URL or SageMaker endpoint name"
    )
    p.add_argument("--compare-label", help="name of the second target, e.g. gpu")
    p.add_argument("--compare-inference-component", metavar="NAME", help="the second endpoint's inference component")
    p.add_argument(
        "--prices",
        nargs="?",
        const=BUILTIN,
        metavar="FILE",
        help="add cost per 1,000 requests from hourly prices (no FILE: the shipped example table)",
    )
    p.add_argument("--instance-type", help="instance type of the first target, e.g. ml.c6i.8xlarge")
    p.add_argument("--compare-instance-type", help="instance type of the second target, e.g. ml.g6e.xlarge")
    p.add_argument("--out", default="bench", metavar="DIR", help="output directory (default ./bench)")
    scaling = p.add_argument_group("autoscaling target")
    scaling.add_argument(
        "--recommend-scaling",
        action="store_true",
        help="print the highest concurrency per instance whose p95 meets --slo-p95-ms with no 429s, and its key",
    )
    scaling.add_argument("--slo-p95-ms", type=float, metavar="MS", help="the p95 latency objective")
    scaling.add_argument("--from-result", metavar="FILE", help="a recorded bench.json to read instead of a new run")


def _report_level(lv: dict[str, Any]) -> None:
    say(
        f"  concurrency {lv['concurrency']}: {lv['accepted']}/{lv['decisions']} accepted, {lv['sends']} sends, "
        f"{lv['rejected_429']} 429, {lv['lost']} lost, {lv['errors']} errors, {lv['throughput_per_s']:.2f}/s"
    )


def _recommend(report: dict[str, Any], slo_p95_ms: float) -> int:
    recommendations = runs.recommend(report, slo_p95_ms)
    print(runs.describe_recommendations(recommendations, slo_p95_ms))
    return EXIT_FAILED if any(r.concurrency is None for r in recommendations) else 0


def _check(args: argparse.Namespace) -> None:
    if args.recommend_scaling and args.slo_p95_ms is None:
        raise UsageError("--recommend-scaling needs --slo-p95-ms")
    if args.from_result and not args.recommend_scaling:
        raise UsageError("--from-result is read by --recommend-scaling")
    if not (args.from_result or args.url or args.sagemaker_endpoint):
        raise UsageError("one of the arguments --url --sagemaker-endpoint is required (or --from-result)")
    if args.prices and not (args.instance_type and (args.compare_instance_type or not args.compare)):
        raise UsageError("--prices needs --instance-type (and --compare-instance-type for --compare)")


def _workloads_of(args: argparse.Namespace) -> tuple[list[workloads.Workload], str | None]:
    """The workloads to run and the request file they come from (None: generated)."""
    if args.workload:
        generated = workloads.by_name(gap_s=args.question_gap)
        return [generated[name] for name in args.workload], None
    requests_file = args.requests or str(shipped("bench_requests.jsonl"))
    return [workloads.RequestFile(runs.load_requests(Path(requests_file)))], requests_file


def _plan(args: argparse.Namespace) -> list[tuple[str, str | None, str | None, str | None]]:
    """(label, url, SageMaker endpoint, instance type) of each target; URLs must be loopback ones."""
    plan = [(args.label or args.url or args.sagemaker_endpoint, args.url, args.sagemaker_endpoint, args.instance_type)]
    if args.compare:
        is_url = args.compare.startswith(("http://", "https://"))
        plan.append(
            (
                args.compare_label or args.compare,
                args.compare if is_url else None,
                None if is_url else args.compare,
                args.compare_instance_type,
            )
        )
    for _, url, _, _ in plan:
        if url:
            require_loopback(url)
    return plan


def run(args: argparse.Namespace) -> int:
    _check(args)
    if args.from_result:
        return _recommend(runs.read_report(Path(args.from_result)), args.slo_p95_ms)
    chosen, requests_file = _workloads_of(args)
    count = args.count if args.count is not None else (MAX_DECISIONS_PER_LEVEL if args.duration else 20)
    duration = args.duration if args.duration is not None else MAX_LEVEL_S
    check_bounds(args.concurrency, count, duration)
    plan = _plan(args)
    prices = load_prices(args.prices) if args.prices else None
    # every price is looked up before anything is sent, so a typo fails at once
    hourly = [prices.price(instance_type) if prices and instance_type else None for *_, instance_type in plan]
    components = [args.inference_component, args.compare_inference_component]
    targets = [
        runs.Target(*where, price, component)
        for where, price, component in zip(plan, hourly, components[: len(plan)], strict=True)
    ]

    def connect(target: runs.Target) -> Sender:
        # a components endpoint at zero is waited for in the warm-up request, before any level is measured
        return transport(
            args,
            max_connections=max(args.concurrency),
            url=target.url,
            endpoint=target.endpoint,
            component=target.component,
        )

    report = runs.bench(
        targets,
        chosen,
        args.concurrency,
        connect=connect,
        count=count,
        duration_s=duration,
        policy=retry_policy(args),
        seed=args.seed,
        warmup=args.warmup,
        prices=prices,
        requests_file=requests_file,
        on_start=say,
        on_level=_report_level,
    )
    written = runs.write_report(Path(args.out), report)
    for workload in chosen:
        if len(chosen) > 1:
            print(f"\n{workload.name}: {workload.description}")
        print(tables.bench([t for t in report["targets"] if t["workload"] == workload.name]))
    if prices:
        print(
            f"\ncost per 1,000 requests = hourly price / (accepted per second * 3600) * 1000; prices from "
            f"{prices.source}" + ("" if prices.checked else " (EXAMPLES: check them against the AWS price list)")
        )
    status = 0
    if args.recommend_scaling:
        print()
        status = _recommend(report, args.slo_p95_ms)
    print("wrote " + ", ".join(str(path) for path in written))
    return status
