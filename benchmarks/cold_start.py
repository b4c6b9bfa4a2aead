"""Cold start of the part this project owns: the adapter process started (as SageMaker runs `serve`) to its first
answered decision, on the bundled SmolLM2 and on Gemma 3 270M (the largest model here), with the settings the
stacks deploy (dev's: a 4,096-token context, one decision context, no chat, DECISION_EXPECTED_MODEL_SHA256 set, so
the GGUF's checksum is computed at start as deployed).

    .venv/bin/python benchmarks/cold_start.py [--runs 5] [--out benchmarks/cold_start.json]

Per run: seconds to the process answering /ping 200 (Python's start, settings, the GGUF's checksum, the model's
load, the contexts' allocation, the warm-up), then to its first answered decision (one yes/no question on /invocations,
as SageMaker sends it), and the process's peak resident memory (VmHWM). What a scale from zero adds on AWS (an
instance start, the image pull, the model's download, SageMaker's health checks) is not measured here: no AWS and
no Docker engine. The GGUF is in the page cache here; a fresh instance reads it from its volume. Run it alone: two
processes on 2 cores slow each other.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
from decision_adapter.launcher import ROOT, start_adapter

MODELS = {
    "smollm2-135m-q4_1": ROOT / ".cache" / "models" / "smollm2",
    "gemma3-270m-q4_k_m": ROOT / ".cache" / "models" / "gemma3-270m",
}
DEPLOYED = {  # dev's cpu section as the stacks write it (serving_stack.decision_environment), threads as this machine
    "SM_LLAMA_CPP_CTX_SIZE": "4096",
    "SM_LLAMA_CPP_THREADS": "2",
    "DECISION_MAX_CONCURRENCY": "1",
    "DECISION_MAX_QUEUE": "8",
    "DECISION_CHAT_CONTEXTS": "0",
}
DECISION = {
    "state": "Customer: I was charged twice for the same order and want my money back.",
    "questions": {"refund": {"type": "noul", "instructions": "Is the customer asking for a refund?"}},
}


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def one_start(model_dir: Path, tmp: Path) -> dict[str, float]:
    manifest = json.loads((model_dir / "manifest.json").read_text())
    env = {**DEPLOYED, "DECISION_EXPECTED_MODEL_SHA256": manifest["sha256"]}
    started = time.perf_counter()
    adapter = start_adapter(tmp, model_dir=model_dir, env=env, wait=False)
    try:
        while True:
            if adapter.proc.poll() is not None:
                raise RuntimeError(adapter.log_path.read_text())
            try:
                if httpx.get(adapter.url + "/ping", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.02)
        ready = time.perf_counter()
        reply = httpx.post(adapter.url + "/invocations", json=DECISION, timeout=60)
        answered = time.perf_counter()
        reply.raise_for_status()
        return {
            "ping_s": ready - started,
            "first_decision_s": answered - started,
            "decision_s": answered - ready,
            "peak_rss_mb": peak_rss_mb(adapter.proc.pid),
            "gguf_mb": manifest["size_bytes"] / (1 << 20),
        }
    finally:
        adapter.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "cold_start.json"))
    args = parser.parse_args()
    results: dict[str, Any] = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": psutil.cpu_count(),
            "memory_gb": round(psutil.virtual_memory().total / (1 << 30), 1),
        },
        "settings": DEPLOYED,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "models": {},
    }
    with tempfile.TemporaryDirectory(prefix="cold-start-") as tmp:
        for name, model_dir in MODELS.items():
            if not (model_dir / "manifest.json").is_file():
                print(f"{name}: no packaged model at {model_dir} (./dev setup fetches it); skipped")
                continue
            runs = [one_start(model_dir, Path(tmp) / f"{name}-{i}") for i in range(args.runs)]
            summary = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
            results["models"][name] = {"runs": runs, "median": summary}
            print(
                f"{name}: /ping after {summary['ping_s']:.2f} s, first decision after "
                f"{summary['first_decision_s']:.2f} s (medians of {args.runs}), "
                f"peak RSS {summary['peak_rss_mb']:.0f} MB"
            )
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
