"""The bench use case: load one or two targets with the chosen workloads, write bench.json and bench.png, and (asked)
read the autoscaling target off the run or off a recorded one; the text it prints is the result's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from decisionctl import tables
from decisionctl.core.prices import PriceTable, load_prices
from decisionctl.load import runs, workloads
from decisionctl.load.closed_loop import MAX_DECISIONS_PER_LEVEL, MAX_LEVEL_S, check_bounds, require_loopback
from decisionctl.transport import RetryPolicy, Sender

SHIPPED_REQUESTS = "bench_requests.jsonl"
EXIT_NO_TARGET = 1  # --recommend-scaling found no concurrency that meets the objective on some target


@dataclass(frozen=True)
class BenchOptions:
    """What `decisionctl bench` was asked, as plain values (its arguments' names)."""

    url: str | None = None
    sagemaker_endpoint: str | None = None
    inference_component: str | None = None
    label: str | None = None
    instance_type: str | None = None
    compare: str | None = None
    compare_label: str | None = None
    compare_inference_component: str | None = None
    compare_instance_type: str | None = None
    requests: str | None = None
    workload: list[str] | None = None
    question_gap: float = 2.0
    concurrency: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16])
    count: int | None = None
    duration: float | None = None
    warmup: int = 1
    seed: int = 0
    prices: str | None = None
    out: str = "bench"
    recommend_scaling: bool = False
    slo_p95_ms: float | None = None
    from_result: str | None = None


@dataclass
class BenchResult:
    """What bench prints on stdout (`text`) and its exit status."""

    text: str = ""
    status: int = 0

    def add(self, *lines: str) -> None:
        """Lines as print would write them (none: an empty line)."""
        self.text += "".join(line + "\n" for line in (lines or ("",)))


def describe_level(lv: dict[str, Any]) -> str:
    """The progress line of one measured level."""
    return (
        f"  concurrency {lv['concurrency']}: {lv['accepted']}/{lv['decisions']} accepted, {lv['sends']} sends, "
        f"{lv['rejected_429']} 429, {lv['lost']} lost, {lv['errors']} errors, {lv['throughput_per_s']:.2f}/s"
    )


def _recommend(result: BenchResult, report: dict[str, Any], slo_p95_ms: float) -> BenchResult:
    recommendations = runs.recommend(report, slo_p95_ms)
    result.add(runs.describe_recommendations(recommendations, slo_p95_ms))
    result.status = EXIT_NO_TARGET if any(r.concurrency is None for r in recommendations) else 0
    return result


def _workloads_of(o: BenchOptions) -> tuple[list[workloads.Workload], str | None]:
    """The workloads to run and the request file they come from (None: generated)."""
    if o.workload:
        generated = workloads.by_name(gap_s=o.question_gap)
        return [generated[name] for name in o.workload], None
    requests_file = o.requests or str(resources.files("decisionctl").joinpath("data", SHIPPED_REQUESTS))
    return [workloads.RequestFile(runs.load_requests(Path(requests_file)))], requests_file


def _plan(o: BenchOptions) -> list[tuple[str, str | None, str | None, str | None]]:
    """(label, url, SageMaker endpoint, instance type) of each target; URLs must be loopback ones."""
    plan = [(o.label or o.url or o.sagemaker_endpoint or "", o.url, o.sagemaker_endpoint, o.instance_type)]
    if o.compare:
        is_url = o.compare.startswith(("http://", "https://"))
        plan.append(
            (
                o.compare_label or o.compare,
                o.compare if is_url else None,
                None if is_url else o.compare,
                o.compare_instance_type,
            )
        )
    for _, url, _, _ in plan:
        if url:
            require_loopback(url)
    return plan


def _targets(
    o: BenchOptions, plan: list[tuple[str, str | None, str | None, str | None]]
) -> tuple[list[runs.Target], PriceTable | None]:
    """The targets with their hourly prices, and the price table they come from."""
    prices = load_prices(o.prices) if o.prices else None
    # every price is looked up before anything is sent, so a typo fails at once
    hourly = [prices.price(instance_type) if prices and instance_type else None for *_, instance_type in plan]
    components = [o.inference_component, o.compare_inference_component]
    return [
        runs.Target(*where, price, component)
        for where, price, component in zip(plan, hourly, components[: len(plan)], strict=True)
    ], prices


def bench(
    o: BenchOptions,
    *,
    connect: Callable[..., Sender],
    policy: RetryPolicy,
    say: Callable[[str], None],
) -> BenchResult:
    """Run the bench `o` asks for (or read `o.from_result`): the text to print and the exit status. `connect` opens a
    sender (keywords max_connections, url, endpoint, component); `say` hears the progress lines."""
    result = BenchResult()
    if o.from_result:
        assert o.slo_p95_ms is not None
        return _recommend(result, runs.read_report(Path(o.from_result)), o.slo_p95_ms)
    chosen, requests_file = _workloads_of(o)
    count = o.count if o.count is not None else (MAX_DECISIONS_PER_LEVEL if o.duration else 20)
    duration = o.duration if o.duration is not None else MAX_LEVEL_S
    check_bounds(o.concurrency, count, duration)
    targets, prices = _targets(o, _plan(o))
    report = runs.measure(
        targets,
        chosen,
        o.concurrency,
        # a components endpoint at zero is waited for in the warm-up request, before any level is measured
        connect=lambda t: connect(
            max_connections=max(o.concurrency), url=t.url, endpoint=t.endpoint, component=t.component
        ),
        count=count,
        duration_s=duration,
        policy=policy,
        seed=o.seed,
        warmup=o.warmup,
        prices=prices,
        requests_file=requests_file,
        on_start=say,
        on_level=lambda lv: say(describe_level(lv)),
    )
    written = runs.write_bench(Path(o.out), report)
    for workload in chosen:
        if len(chosen) > 1:
            result.add(f"\n{workload.name}: {workload.description}")
        result.add(tables.bench([t for t in report["targets"] if t["workload"] == workload.name]))
    if prices:
        result.add(
            f"\ncost per 1,000 requests = hourly price / (accepted per second * 3600) * 1000; prices from "
            f"{prices.source}" + ("" if prices.checked else " (EXAMPLES: check them against the AWS price list)")
        )
    if o.recommend_scaling:
        assert o.slo_p95_ms is not None
        result.add()
        _recommend(result, report, o.slo_p95_ms)
    result.add("wrote " + ", ".join(str(path) for path in written))
    return result
