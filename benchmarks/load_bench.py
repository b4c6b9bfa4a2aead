"""Load benchmarks of the decision adapter on the bundled SmolLM2 model: throughput and tail at concurrency,
and whether retries amplify overload.

    .venv/bin/python benchmarks/load_bench.py [--quick] [--only load retries lane] [--out benchmarks/load]

- load: the three workloads of `decisionctl bench --workload all` (ticket routing, agent supervisor, long
  documents) at 1, 2, 4, 8 and 16 closed-loop clients, against an adapter with one model context
  (DECISION_MAX_CONCURRENCY=1, all the machine's threads) and one with two (the threads split between them).
- retries: an adapter that holds 3 requests (one running, two queued) loaded with 2x and 4x that many
  clients that retry, with decisionctl's policy (8 attempts) and with one shaped as the official SDK's
  (typesafe-sdk 0.7.5: 3 attempts, Retry-After waited exactly), once refusing at once past its 3
  (DECISION_ADMISSION_WAIT_S=0) and once with the default wait at admission. Goodput is compared with the
  peak measured at 3 clients on the same adapter.
- lane: decision latency (one closed-loop client, ticket routing) on the default lanes (one decision context,
  one chat context, the cores split between them) idle and while 256-token chat generations run back to back,
  side by side (target: p95 within 1.25x of idle), and with chat off (every core to the one decision context).

Load goes through `decisionctl.load.runs.run_target`, the code `decisionctl bench` runs; adapters run one at a
time through the `serve` entrypoint (decision_adapter.launcher). Writes OUT/bench.json (decisionctl
bench's format, which `decisionctl bench --from-result` reads, plus "retry_amplification") and OUT/bench.png.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
from decision_adapter.core.settings import AdapterSettings
from decision_adapter.launcher import MODEL_FILE, ROOT, AdapterProcess, start_adapter
from decisionctl import tables
from decisionctl.load import runs, workloads
from decisionctl.transport import HttpSender, Reply, RetryPolicy
from load_lane import bench_lane, lane_table

TIMEOUT_S = 900.0  # 16 clients on one 2,000-token context queue for minutes here; no answer is cut short
CORES = os.cpu_count() or 1
DEFAULT_WAIT_S = float(AdapterSettings.model_fields["admission_wait_s"].default)


@dataclass
class SdkShapedRetry(RetryPolicy):
    """typesafe-sdk 0.7.5's default retry: 2 retries after the first attempt, a Retry-After waited exactly (no
    jitter), otherwise 0.5 s doubling up to 5 s less up to a quarter. Its 30 s budget per call is left out."""

    max_attempts: int = 3

    def delay(self, attempt: int, reply: Reply) -> float:
        if reply.retry_after_s is not None:
            return reply.retry_after_s
        return min(5.0, 0.5 * 2.0 ** (attempt - 1)) * (1 - 0.25 * self.rng.random())


@dataclass(frozen=True)
class Plan:
    levels: tuple[int, ...]
    workloads: tuple[workloads.Workload, ...]
    count: Callable[[str, int], int]  # decisions per level, by workload name and concurrency
    retry_multiples: tuple[int, ...]
    retry_count: Callable[[str, int], int]
    retry_state_tokens: int
    retry_policies: tuple[tuple[str, RetryPolicy], ...]
    lane_count: int  # decisions per lane measurement


def _full_count(name: str, c: int) -> int:
    if name == "long-documents":
        return c + 4  # about 9 s each here: every level still sends four past its first wave
    if name == "agent-supervisor":
        return max(32, 4 * c + 8)  # at least one group of 10 states, so later questions are in the mix
    return 4 * c + 8


FULL = Plan(
    levels=(1, 2, 4, 8, 16),
    workloads=tuple(workloads.by_name().values()),
    count=_full_count,
    retry_multiples=(2, 4),
    retry_count=lambda _name, c: 3 * c,  # 36 decisions at 12 clients, as the measurement in issue 16
    retry_state_tokens=400,  # about 1.7 s a request here
    retry_policies=(("decisionctl", RetryPolicy(max_attempts=8)), ("typesafe-sdk-shaped", SdkShapedRetry())),
    lane_count=30,
)
QUICK = Plan(
    levels=(1, 4),
    workloads=(
        workloads.TicketRouting(),
        workloads.AgentSupervisor(states=3, gap_s=0.5),
        workloads.LongDocuments(state_tokens=1000),
    ),
    count=lambda name, c: 4 if name == "ticket-routing" else 8 if name == "agent-supervisor" else c,
    retry_multiples=(2, 4),
    retry_count=lambda _name, c: c,
    retry_state_tokens=200,
    retry_policies=(("decisionctl", RetryPolicy(max_attempts=8)),),
    lane_count=6,
)


def _cache_counters(adapter: AdapterProcess) -> dict[str, int]:
    counters = httpx.get(adapter.url + "/metrics", timeout=30).json()["state_cache"]
    return {"hits": int(counters["hits"]), "misses": int(counters["misses"])}


def _levels(
    transport: HttpSender,
    workload: workloads.Workload,
    levels: tuple[int, ...],
    count: Callable[[str, int], int],
    *,
    policy: RetryPolicy,
) -> list[dict[str, Any]]:
    """Each level on its own (its own count and seed) through runs.run_target; one warm-up request first."""
    out = []
    for position, c in enumerate(levels):
        (level,) = runs.run_target(
            transport,
            workload,
            [c],
            count=count(workload.name, c),
            duration_s=3600,
            policy=policy,
            seed=c,
            warmup=int(position == 0),
        )
        print(
            f"  {workload.name} at {c}: {level['accepted']}/{level['decisions']} accepted, "
            f"{level['throughput_per_s']:.2f}/s, p95 {level['latency_s']['p95'] or 0:.2f} s",
            flush=True,
        )
        out.append(level)
    return out


def bench_load(tmp: Path, plan: Plan) -> list[dict[str, Any]]:
    targets = []
    for contexts in (1, 2):
        threads = max(1, CORES // contexts)
        env = {
            "DECISION_MAX_CONCURRENCY": str(contexts),
            "DECISION_MAX_QUEUE": "16",  # with the contexts, more than the 16 clients of the top level
            "DECISION_CHAT_CONTEXTS": "0",  # decisions only: no chat context holding memory
            "SM_LLAMA_CPP_THREADS": str(threads),
            "SM_LLAMA_CPP_THREADS_BATCH": str(threads),
        }
        adapter = start_adapter(tmp / f"contexts-{contexts}", env=env)
        transport = HttpSender(adapter.url, timeout_s=TIMEOUT_S, max_connections=max(plan.levels))
        label = f"contexts={contexts} ({threads} threads each)"
        try:
            for workload in plan.workloads:
                before = _cache_counters(adapter)
                levels = _levels(transport, workload, plan.levels, plan.count, policy=RetryPolicy())
                after = _cache_counters(adapter)
                targets.append(
                    {
                        "label": label,
                        "target": adapter.url,
                        "workload": workload.name,
                        "instance_type": None,
                        "adapter_env": env,
                        "state_cache": {k: after[k] - before[k] for k in after},
                        "levels": levels,
                    }
                )
        finally:
            transport.close()
            adapter.stop()
    return targets


def _amplification(level: dict[str, Any], peak: float, multiple: int) -> dict[str, Any]:
    return {
        "clients": level["concurrency"],
        "goodput_per_s": level["throughput_per_s"],
        "goodput_vs_peak": level["throughput_per_s"] / peak if peak else None,
        "sends_per_accepted": level["sends_per_accepted"],
        "decisions": level["decisions"],
        "lost": level["lost"],
        "rate_429": level["rate_429"],
        "p95_s": level["latency_s"]["p95"],
        "target": {
            "goodput_vs_peak": ">= 0.9",
            "sends_per_accepted": "<= 1.5" if multiple == 2 else "<= 2.0",
            "lost": 0,
        },
        "level": level,
    }


def bench_retries(tmp: Path, plan: Plan, wait_s: float) -> dict[str, Any]:
    holds = 3
    env = {
        "DECISION_MAX_CONCURRENCY": "1",
        "DECISION_MAX_QUEUE": str(holds - 1),
        "DECISION_ADMISSION_WAIT_S": f"{wait_s:g}",
        "DECISION_CHAT_CONTEXTS": "0",
        "SM_LLAMA_CPP_THREADS": str(CORES),
    }
    adapter = start_adapter(tmp / f"retries-wait-{wait_s:g}", env=env)
    transport = HttpSender(adapter.url, timeout_s=TIMEOUT_S, max_connections=holds * max(plan.retry_multiples))
    tickets = workloads.TicketRouting(state_tokens=plan.retry_state_tokens)
    try:
        (peak_level,) = _levels(transport, tickets, (holds,), plan.retry_count, policy=RetryPolicy())
        peak = peak_level["throughput_per_s"]
        policies: dict[str, Any] = {}
        for name, policy in plan.retry_policies:
            clients = tuple(holds * m for m in plan.retry_multiples)
            levels = _levels(transport, tickets, clients, plan.retry_count, policy=policy)
            policies[name] = {
                "max_attempts": policy.max_attempts,
                **{f"{m}x": _amplification(lv, peak, m) for m, lv in zip(plan.retry_multiples, levels, strict=True)},
            }
    finally:
        transport.close()
        adapter.stop()
    return {
        "adapter_env": env,
        "admission_wait_s": wait_s,
        "holds": holds,
        "state_tokens": plan.retry_state_tokens,
        "peak": {"clients": holds, "throughput_per_s": peak, "level": peak_level},
        "policies": policies,
    }


def retry_table(results: list[dict[str, Any]]) -> str:
    rows = []
    for result in results:
        for name, policy in result["policies"].items():
            for multiple in (k for k in policy if k.endswith("x")):
                r = policy[multiple]
                rows.append(
                    [
                        f"{result['admission_wait_s']:g} s",
                        name,
                        f"{multiple} ({r['clients']})",
                        tables.num(r["goodput_per_s"], 2),
                        tables.num(r["goodput_vs_peak"], 2),
                        tables.num(r["sends_per_accepted"], 2),
                        f"{r['lost']}/{r['decisions']}",
                        tables.pct(r["rate_429"]),
                        tables.num(r["p95_s"], 1),
                    ]
                )
    headers = ["wait", "retry policy", "clients", "goodput/s", "vs peak", "sends/dec", "lost", "429", "p95 s"]
    peaks = ", ".join(f"{r['peak']['throughput_per_s']:.2f}/s (wait {r['admission_wait_s']:g} s)" for r in results)
    return f"peak at {results[0]['peak']['clients']} clients: {peaks}\n" + tables.table(headers, rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="two levels, small counts (a smoke run, < 3 min)")
    parser.add_argument("--only", nargs="*", choices=("load", "retries", "lane"), help="run only these sections")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "load")
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    report_path = args.out / runs.BENCH_JSON
    report: dict[str, Any] = json.loads(report_path.read_text()) if args.only and report_path.exists() else {}
    quick = args.quick or bool(report.get("quick"))  # a partial run keeps the results marked quick if any part was
    report.update(
        {
            "machine": {"cpu": _cpu(), "logical_cpus": psutil.cpu_count()},
            "model": MODEL_FILE,
            "quick": quick,
            "targets": report.get("targets", []),
        }
    )
    with tempfile.TemporaryDirectory() as tmp:
        if not args.only or "load" in args.only:
            t0 = time.perf_counter()
            report.update(
                runs.settings(
                    workloads=plan.workloads,
                    requests_file=None,
                    count=1,  # replaced below by the count of each workload and level
                    duration_s=3600,
                    policy=RetryPolicy(),
                    seed=0,
                    warmup=1,
                )
            )
            counts = {w.name: [plan.count(w.name, c) for c in plan.levels] for w in plan.workloads}
            report["bounds"] = {"decisions_per_level": counts, "seconds_per_level": 3600}
            report["targets"] = bench_load(Path(tmp), plan)
            print(f"load ({time.perf_counter() - t0:.0f} s)", flush=True)
            for w in plan.workloads:
                print(f"\n{w.name}: {w.description}")
                print(tables.bench([t for t in report["targets"] if t["workload"] == w.name]))
        if not args.only or "retries" in args.only:
            t0 = time.perf_counter()
            report["retry_amplification"] = [bench_retries(Path(tmp), plan, w) for w in (0.0, DEFAULT_WAIT_S)]
            print(f"\nretries ({time.perf_counter() - t0:.0f} s)\n" + retry_table(report["retry_amplification"]))
        if not args.only or "lane" in args.only:
            t0 = time.perf_counter()
            report["chat_lane"] = bench_lane(Path(tmp), plan.lane_count, TIMEOUT_S)
            print(f"\nlane ({time.perf_counter() - t0:.0f} s)\n" + lane_table(report["chat_lane"]))
    written = runs.write_bench(args.out, report)
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def _cpu() -> str:
    from decision_adapter.identity import cpu_model

    return cpu_model()


if __name__ == "__main__":
    raise SystemExit(main())
