"""decisionctl bench: load-test one or two endpoints at several concurrency levels."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from decisionctl import bench as bench_mod
from decisionctl import plots, render
from decisionctl.commands.options import UsageError, add_target, say, shipped, transport
from decisionctl.prices import BUILTIN, cost_per_1000, load_prices

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


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Closed-loop load test without retries: throughput, p50/p95/p99 latency of "
        "accepted requests, 429 and error rates per concurrency level; bench.json and "
        "bench.png in --out."
    )
    add_target(p)
    p.add_argument(
        "--requests",
        default=str(shipped("bench_requests.jsonl")),
        metavar="FILE.jsonl",
        help="decision request bodies, one a line, sent in turn (default: the shipped set)",
    )
    p.add_argument("--concurrency", type=_levels, default=[1, 2, 4, 8], help="levels, e.g. 1,2,4,8 (default)")
    amount = p.add_mutually_exclusive_group()
    amount.add_argument("--count", type=int, default=20, help="requests per level (default 20)")
    amount.add_argument("--duration", type=float, metavar="S", help="seconds per level instead of a count")
    p.add_argument("--warmup", type=int, default=1, help="unmeasured requests before the first level (1)")
    p.add_argument("--label", help="name of the first target in tables and plots, e.g. cpu")
    p.add_argument(
        "--compare", metavar="URL_OR_ENDPOINT", help="a second target: http(s) URL or SageMaker endpoint name"
    )
    p.add_argument("--compare-label", help="name of the second target, e.g. gpu")
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


def _report_level(lv: dict[str, Any]) -> None:
    say(
        f"  concurrency {lv['concurrency']}: {lv['accepted']}/{lv['sent']} accepted, "
        f"{lv['rejected_429']} 429, {lv['errors']} errors, {lv['throughput_per_s']:.2f}/s"
    )


def run(args: argparse.Namespace) -> int:
    if args.prices and not (args.instance_type and (args.compare_instance_type or not args.compare)):
        raise UsageError("--prices needs --instance-type (and --compare-instance-type for --compare)")
    bodies = bench_mod.load_requests(Path(args.requests))
    count = args.count if args.duration is None else None
    prices = load_prices(args.prices) if args.prices else None
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
    # every price is looked up before anything is sent, so a typo fails at once
    hourly = [prices.price(instance_type) if prices and instance_type else None for *_, instance_type in plan]
    targets: list[dict[str, Any]] = []
    for (label, url, endpoint, instance_type), price in zip(plan, hourly, strict=True):
        target = transport(args, max_connections=max(args.concurrency), url=url, endpoint=endpoint)
        amount = f"{count} requests each" if count else f"{args.duration} s each"
        say(f"bench {label}: levels {args.concurrency}, {amount}")
        try:
            levels = bench_mod.run_target(
                target,
                bodies,
                args.concurrency,
                count=count,
                duration_s=args.duration,
                warmup=args.warmup,
                on_level=_report_level,
            )
        finally:
            target.close()
        for lv in levels:
            lv["cost_per_1000"] = cost_per_1000(price, lv["throughput_per_s"]) if price is not None else None
        targets.append(
            {
                "label": label,
                "target": target.label,
                "instance_type": instance_type,
                "price_per_hour": price,
                "currency": prices.currency if prices else None,
                "levels": levels,
            }
        )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {
        "requests_file": str(args.requests),
        "requests": len(bodies),
        "mode": {"count": count} if count else {"duration_s": args.duration},
        "warmup": args.warmup,
        "pause_after_429_cap_s": bench_mod.PAUSE_CAP_S,
        "prices": prices.describe() if prices else None,
        "targets": targets,
    }
    (out / "bench.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    plots.latency_plot(
        out / "bench.png", {t["label"]: t["levels"] for t in targets}, title="Latency against concurrency"
    )
    print(render.bench(targets))
    if prices:
        print(
            f"\ncost per 1,000 requests = hourly price / (accepted per second * 3600) * 1000; prices from "
            f"{prices.source}" + ("" if prices.checked else " (EXAMPLES: check them against the AWS price list)")
        )
    print(f"wrote {out / 'bench.json'}, {out / 'bench.png'}")
    return 0
