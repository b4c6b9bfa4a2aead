"""CPU against GPU on one machine: the same requests through the adapter with no layer offloaded and with every
layer offloaded (SM_LLAMA_CPP_N_GPU_LAYERS=999), on a CUDA build of llama-cpp-python, one adapter at a time.

Two parts, both side by side in one run on the same machine:
- agreement: the shipped suite (the env's cases, as record-evaluation and check-deployed score them) on the CPU
  and on the GPU: the largest change in any option's probability between the two, and each against the
  committed record made on the development machine (2 threads; benchmarks/drift_bench.py's rows); flips with
  their recorded margins; whether check-deployed's tolerance holds.
- latency: serial requests with distinct states (no state-cache hit), one question, eight questions, and one
  question on a long state (about 600 tokens); p50 / p95 seconds per request, the CPU's p50 over the GPU's; then
  closed-loop throughput at 8 clients (decisions per second). Each adapter's start (spawn to ready) too.

It needs a GPU and llama-cpp-python built with GGML_CUDA (benchmarks/gpu_run.sh builds the environment on the
device machine and runs this); on a machine without one the GPU adapter runs on the CPU and the script says so.

    python benchmarks/gpu_bench.py [--env dev] [--requests 40] [--out benchmarks/gpu.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from adapter_timing import CHOICE, EIGHT, LONG_STATE, TICKET, close_clients, post
from decision_adapter.identity import nvidia_smi
from decision_adapter.launcher import MODEL_DIRS, AdapterProcess, start_adapter
from decisionctl.load.closed_loop import percentiles
from drift_bench import measure

ROOT = Path(__file__).resolve().parents[1]
ALL_LAYERS = "999"  # as the stacks' GPU endpoints set it


def agreement(env_name: str, cpu_threads: int, model_dir: Path | None) -> dict[str, Any]:
    from decisionctl.review import decision_diff
    from decisionctl.review.deployed import recorded_margin

    cpu = measure(f"threads={cpu_threads},gpu_layers=0", env_name, None, model_dir)
    gpu = measure(f"gpu_layers={ALL_LAYERS}", env_name, None, model_dir)
    a, b = cpu.pop("answers"), gpu.pop("answers")
    deltas = {cid: decision_diff.max_delta(a[cid], b[cid]) or 0.0 for cid in a}
    flips = decision_diff.flips(a, b)
    return {
        "cpu_vs_record": cpu,
        "gpu_vs_record": gpu,
        "gpu_vs_cpu": {
            "cases": len(deltas),
            "max_delta": max(deltas.values(), default=0.0),
            "mean_delta": sum(deltas.values()) / max(1, len(deltas)),
            "largest": sorted(deltas, key=lambda c: -deltas[c])[:3],
            "flips": [{"id": f["id"], "cpu_margin": recorded_margin(a[f["id"]])} for f in flips],
        },
    }


def _serial(adapter: AdapterProcess, bodies: list[dict[str, Any]]) -> dict[str, Any]:
    times = [post(adapter, body)[0] for body in bodies]
    p = percentiles(times)
    return {"requests": len(times), "p50": p["p50"], "p95": p["p95"], "mean": p["mean"]}


def _throughput(adapter: AdapterProcess, clients: int, per_client: int, tag: str) -> dict[str, Any]:
    def one(k: int) -> int:
        for i in range(per_client):
            post(adapter, {"state": f"{TICKET}(client {k}, {tag} request {i})", "questions": {"q": CHOICE}})
        return per_client

    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        done = sum(pool.map(one, range(clients)))
    seconds = time.perf_counter() - t0
    return {"clients": clients, "decisions": done, "seconds": round(seconds, 3), "per_second": done / seconds}


def latency(env_name: str, cpu_threads: int, n: int, model_dir: Path | None) -> dict[str, Any]:
    model_dir = model_dir or MODEL_DIRS[env_name]
    out: dict[str, Any] = {}
    for name, env, unset in (  # the GPU adapter takes the adapter's own thread default
        ("cpu", {"SM_LLAMA_CPP_THREADS": str(cpu_threads), "SM_LLAMA_CPP_N_GPU_LAYERS": "0"}, ()),
        ("gpu", {"SM_LLAMA_CPP_N_GPU_LAYERS": ALL_LAYERS}, ("SM_LLAMA_CPP_THREADS",)),
    ):
        tmp = Path(tempfile.mkdtemp(prefix=f"gpu-bench-{name}-"))
        t0 = time.perf_counter()
        adapter = start_adapter(tmp, model_dir=model_dir, env=env, unset=unset)
        started = time.perf_counter() - t0
        try:
            _, first = post(adapter, {"state": TICKET + "(warm-up)", "questions": {"q": CHOICE}})  # first-call set-up
            run = first.get("x_run") or {}
            row: dict[str, Any] = {
                "start_s": round(started, 2),
                "hardware": run.get("hardware"),
                "n_gpu_layers": run.get("n_gpu_layers"),
                # nvidia-smi's compute processes and their GPU memory: the proof that layers went to the GPU
                "gpu_memory_in_use": nvidia_smi("--query-compute-apps=pid,used_memory", "--format=csv,noheader"),
            }
            row["one_question"] = _serial(
                adapter, [{"state": f"{TICKET}(ticket {i})", "questions": {"q": CHOICE}} for i in range(n)]
            )
            row["eight_questions"] = _serial(
                adapter, [{"state": f"{TICKET}(ticket {i}, eight)", "questions": EIGHT} for i in range(n)]
            )
            row["long_state"] = _serial(
                adapter, [{"state": f"{LONG_STATE}(ticket {i}, long)", "questions": {"q": CHOICE}} for i in range(n)]
            )
            row["throughput_8_clients"] = _throughput(adapter, 8, max(1, n // 4), name)
        finally:
            close_clients()
            adapter.stop()
        out[name] = row
    out["offloaded"] = bool(out["gpu"]["gpu_memory_in_use"])  # False: no GPU took the layers, the rows are CPU's
    out["cpu_over_gpu_p50"] = {
        k: out["cpu"][k]["p50"] / out["gpu"][k]["p50"] for k in ("one_question", "eight_questions", "long_state")
    }
    out["gpu_over_cpu_throughput"] = (
        out["gpu"]["throughput_8_clients"]["per_second"] / out["cpu"]["throughput_8_clients"]["per_second"]
    )
    return out


def table(result: dict[str, Any]) -> str:
    lines = []
    if "agreement" in result:
        ag = result["agreement"]
        lines += [
            "| comparison | cases | largest change | mean change | flips (margins) | check-deployed |",
            "|---|---|---|---|---|---|",
        ]
        rows = (("CPU on the device vs the record", "cpu_vs_record"), ("GPU vs the record", "gpu_vs_record"))
        for label, key in rows:
            r = ag[key]
            margins = ", ".join(f"{f['recorded_margin']:.4f}" for f in r["flips"]) or "-"
            lines.append(
                f"| {label} | {r['cases']} | {r['max_delta']:.4f} | {r['mean_delta']:.5f} | {len(r['flips'])}"
                f" ({margins}) | {'pass' if r['check_deployed']['passed'] else 'fail'} |"
            )
        g = ag["gpu_vs_cpu"]
        margins = ", ".join(f"{f['cpu_margin']:.4f}" for f in g["flips"]) or "-"
        lines.append(
            f"| GPU vs CPU, same machine | {g['cases']} | {g['max_delta']:.4f} | {g['mean_delta']:.5f} |"
            f" {len(g['flips'])} ({margins}) | - |"
        )
    if "latency" in result:
        lat = result["latency"]
        lines += [
            "",
            "| request | CPU p50 / p95 s | GPU p50 / p95 s | CPU p50 / GPU p50 |",
            "|---|---|---|---|",
        ]
        for key in ("one_question", "eight_questions", "long_state"):
            c, g = lat["cpu"][key], lat["gpu"][key]
            lines.append(
                f"| {key.replace('_', ' ')} | {c['p50']:.4f} / {c['p95']:.4f} | {g['p50']:.4f} / {g['p95']:.4f} |"
                f" {lat['cpu_over_gpu_p50'][key]:.1f}x |"
            )
        c, g = lat["cpu"]["throughput_8_clients"], lat["gpu"]["throughput_8_clients"]
        lines.append(
            f"| 8 clients, decisions/s | {c['per_second']:.1f} | {g['per_second']:.1f} |"
            f" GPU/CPU {lat['gpu_over_cpu_throughput']:.1f}x |"
        )
        lines.append(f"| adapter start (spawn to ready), s | {lat['cpu']['start_s']} | {lat['gpu']['start_s']} | |")
        if not lat["offloaded"]:
            lines.append("\nNO GPU held the layers (nvidia-smi lists no process): both columns ran on the CPU.")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="dev", choices=sorted(MODEL_DIRS), help="whose model and record (default dev)")
    parser.add_argument("--model-dir", type=Path, default=None, help="the artifact (default: the env's model)")
    parser.add_argument("--requests", type=int, default=40, help="serial requests per latency row (default 40)")
    parser.add_argument("--cpu-threads", type=int, default=os.cpu_count() or 2, help="the CPU adapter's threads")
    parser.add_argument("--only", nargs="*", choices=("agreement", "latency"), default=["agreement", "latency"])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "gpu.json")
    args = parser.parse_args()
    result: dict[str, Any] = {"when": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "env": args.env}
    if "agreement" in args.only:
        result["agreement"] = agreement(args.env, args.cpu_threads, args.model_dir)
        print(table({"agreement": result["agreement"]}), flush=True)
    if "latency" in args.only:
        result["latency"] = latency(args.env, args.cpu_threads, args.requests, args.model_dir)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
