"""Load tests of one or two endpoints (bench.json, bench.png) and the autoscaling target read off them.

Each target is loaded with each workload at each concurrency level in turn (`decisionctl.load.closed_loop` runs one
level); every level gets requests of its own seed, so no level finds states an earlier one left cached.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decision_spec.instance_types import is_gpu_instance

from decisionctl import plots
from decisionctl.core.prices import PriceTable, cost_per_1000
from decisionctl.load.closed_loop import (
    PAUSE_CAP_S,
    run_level,
)
from decisionctl.load.workloads import Workload
from decisionctl.transport import RetryPolicy, Sender

BENCH_JSON = "bench.json"
BENCH_PNG = "bench.png"
# The cdk.json key (decision_spec/endpoint_config.py, Autoscaling) a measured concurrency belongs in; a test checks
# both.
SCALING_KEY = "autoscaling.target_concurrent_requests_per_instance"


def load_requests(path: Path) -> list[dict[str, Any]]:
    """A JSONL file of decision request bodies (blank lines and # comments skipped)."""
    bodies = []
    for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        body = json.loads(line)
        if not isinstance(body, dict) or not isinstance(body.get("questions"), dict):
            raise ValueError(f"{path} line {line_no}: a decision request needs a 'questions' object")
        bodies.append(body)
    if not bodies:
        raise ValueError(f"{path}: no requests")
    return bodies


def run_target(
    sender: Sender,
    workload: Workload,
    levels: Sequence[int],
    *,
    count: int,
    duration_s: float,
    policy: RetryPolicy,
    seed: int = 0,
    warmup: int = 1,
    on_level: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Warm up (unmeasured, requests of a seed no level uses), then every level in turn."""
    for planned in [p for n in range(warmup) for p in workload.group(-1 - seed, n)][:warmup]:
        sender.send(planned.body)
    results = []
    for position, level in enumerate(levels):
        result = run_level(
            sender, workload, level, count=count, duration_s=duration_s, policy=policy, seed=seed * 1000 + position
        )
        results.append(result)
        if on_level is not None:
            on_level(result)
    return results


@dataclass(frozen=True)
class Target:
    """One endpoint a bench loads: its name in tables, its URL or SageMaker endpoint (and inference component), its
    hourly price if known."""

    label: str
    url: str | None
    endpoint: str | None
    instance_type: str | None
    price_per_hour: float | None
    component: str | None = None


def measure(
    targets: Sequence[Target],
    workloads: Sequence[Workload],
    levels: Sequence[int],
    *,
    connect: Callable[[Target], Sender],
    count: int,
    duration_s: float,
    policy: RetryPolicy,
    seed: int,
    warmup: int,
    prices: PriceTable | None,
    requests_file: str | None,
    on_start: Callable[[str], None],
    on_level: Callable[[dict[str, Any]], None],
) -> dict[str, Any]:
    """Each target with each workload at every level (`run_target`): the report bench.json holds."""
    measured: list[dict[str, Any]] = []
    for target in targets:
        sender = connect(target)
        try:
            for workload in workloads:
                on_start(
                    f"bench {target.label}, {workload.name}: levels {levels}, {count} decisions or {duration_s:g} s"
                )
                results = run_target(
                    sender,
                    workload,
                    levels,
                    count=count,
                    duration_s=duration_s,
                    policy=policy,
                    seed=seed,
                    warmup=warmup,
                    on_level=on_level,
                )
                price = target.price_per_hour
                for lv in results:
                    lv["cost_per_1000"] = cost_per_1000(price, lv["throughput_per_s"]) if price is not None else None
                measured.append(
                    {
                        "label": target.label,
                        "target": sender.label,
                        "workload": workload.name,
                        "instance_type": target.instance_type,
                        "price_per_hour": price,
                        "currency": prices.currency if prices else None,
                        "levels": results,
                    }
                )
        finally:
            sender.close()
    how = settings(
        workloads=workloads,
        requests_file=requests_file,
        count=count,
        duration_s=duration_s,
        policy=policy,
        seed=seed,
        warmup=warmup,
    )
    return {**how, "prices": prices.describe() if prices else None, "targets": measured}


def settings(
    *,
    workloads: Sequence[Workload],
    requests_file: str | None,
    count: int,
    duration_s: float,
    policy: RetryPolicy,
    seed: int,
    warmup: int,
) -> dict[str, Any]:
    """What a report records about how it was measured (beside its targets)."""
    return {
        "workloads": {w.name: {"description": w.description, **w.settings()} for w in workloads},
        "requests_file": requests_file,
        "bounds": {"decisions_per_level": count, "seconds_per_level": duration_s},
        "retry": {
            "max_attempts": policy.max_attempts,
            "base_delay_s": policy.base_delay_s,
            "max_delay_s": policy.max_delay_s,
        },
        "seed": seed,
        "warmup": warmup,
        "pause_after_429_cap_s": PAUSE_CAP_S,
    }


def series_label(target: Mapping[str, Any]) -> str:
    """How a target's run is named in plots: its label, and the workload when it is a generated one."""
    workload = target.get("workload")
    return f"{target['label']} {workload}" if workload and workload != "requests" else str(target["label"])


def write_bench(out: Path, report: Mapping[str, Any]) -> list[Path]:
    """bench.json and bench.png in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    json_path, png_path = out / BENCH_JSON, out / BENCH_PNG
    json_path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    plots.latency_plot(
        png_path,
        {series_label(t): t["levels"] for t in report["targets"]},
        title="p95 latency against concurrency",
    )
    return [json_path, png_path]


def read_report(path: Path) -> dict[str, Any]:
    report = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(report, dict) or not isinstance(report.get("targets"), list):
        raise ValueError(f"{path}: not a bench result (no 'targets' list)")
    return report


@dataclass(frozen=True)
class Recommendation:
    """For one target and workload: the highest concurrency whose p95 meets the objective with nothing turned away."""

    label: str
    workload: str
    instance_type: str | None
    concurrency: int | None  # None: not even the lowest level met it
    p95_s: float | None  # at that concurrency (or at the lowest level, when none met it)
    throughput_per_s: float | None
    highest_tested: bool  # the highest level measured met it: the endpoint may hold more

    @property
    def section(self) -> str:
        if not self.instance_type:
            return "<cpu|gpu>"
        named = self.instance_type if self.instance_type.startswith("ml.") else f"ml.{self.instance_type}"
        return "gpu" if is_gpu_instance(named) else "cpu"

    @property
    def config_key(self) -> str:
        return f"{self.section}.{SCALING_KEY}"


def _meets(level: Mapping[str, Any], slo_s: float) -> bool:
    p95 = level["latency_s"]["p95"]
    clean = level["rejected_429"] == 0 and level.get("lost", 0) == 0 and level["errors"] == 0
    return clean and level["accepted"] > 0 and p95 is not None and p95 <= slo_s


def recommend(report: Mapping[str, Any], slo_p95_ms: float) -> list[Recommendation]:
    """Per target and workload, counting up from the lowest level: the last level before the first one that
    misses the objective or turns anything away (a noisy pass above a miss is not trusted)."""
    out = []
    for target in report["targets"]:
        levels = sorted(target["levels"], key=lambda lv: lv["concurrency"])
        best = None
        for level in levels:
            if not _meets(level, slo_p95_ms / 1000):
                break
            best = level
        shown = best or (levels[0] if levels else None)
        out.append(
            Recommendation(
                label=str(target["label"]),
                workload=str(target.get("workload") or "requests"),
                instance_type=target.get("instance_type"),
                concurrency=best["concurrency"] if best else None,
                p95_s=shown["latency_s"]["p95"] if shown else None,
                throughput_per_s=best["throughput_per_s"] if best else None,
                highest_tested=best is not None and best is levels[-1],
            )
        )
    return out


def describe_recommendations(recommendations: Sequence[Recommendation], slo_p95_ms: float) -> str:
    """What --recommend-scaling prints: a line per workload and the value per target for cdk.json."""
    lines: list[str] = []
    labels = list(dict.fromkeys(r.label for r in recommendations))
    for label in labels:
        mine = [r for r in recommendations if r.label == label]
        kind = f" ({mine[0].instance_type})" if mine[0].instance_type else ""
        lines.append(f"{label}{kind}: highest concurrency with p95 <= {slo_p95_ms:g} ms and no 429s, lost or errors")
        for r in mine:
            p95 = "-" if r.p95_s is None else f"{r.p95_s * 1000:.0f} ms"
            if r.concurrency is None:
                lines.append(f"  {r.workload:<18} none: the lowest level measured has p95 {p95}")
                continue
            more = "; the highest level measured, so try higher ones" if r.highest_tested else ""
            lines.append(f"  {r.workload:<18} {r.concurrency} (p95 {p95}, {r.throughput_per_s:.2f} decisions/s){more}")
        if any(r.concurrency is None for r in mine):
            lines.append(f"  -> no target for {mine[0].config_key}: a larger instance, or a smaller model")
            continue
        binding = min(mine, key=lambda r: r.concurrency or 0)
        why = f" (the lowest over the workloads: {binding.workload})" if len(mine) > 1 else ""
        lines.append(f"  -> {binding.config_key} = {binding.concurrency}{why}")
        lines.append(f"     in cdk.json, under context.environments.<env>.{binding.section}")
    return "\n".join(lines)
