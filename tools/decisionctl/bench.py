"""Load test: closed-loop clients at each concurrency level, without retries, so every 429 shows.

Each of `concurrency` threads sends its next request as soon as the previous one has finished; after
a 429 it first waits the Retry-After (at most PAUSE_CAP_S) but never resends the rejected request.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from decisionctl.transport import Transport

PAUSE_CAP_S = 1.0
MAX_ERROR_EXAMPLES = 5


@dataclass(frozen=True)
class Sample:
    latency_s: float
    status: int
    error: str


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


class _Dispenser:
    """Hands out request numbers to the worker threads until the count or the duration is used up."""

    def __init__(self, count: int | None, duration_s: float | None) -> None:
        self._lock = threading.Lock()
        self._next = 0
        self._count = count
        self._deadline = time.perf_counter() + duration_s if duration_s is not None else None

    def take(self) -> int | None:
        with self._lock:
            if self._count is not None and self._next >= self._count:
                return None
            if self._deadline is not None and time.perf_counter() >= self._deadline:
                return None
            self._next += 1
            return self._next - 1


def _worker(
    transport: Transport,
    bodies: Sequence[dict[str, Any]],
    dispenser: _Dispenser,
    *,
    samples: list[Sample],
    lock: threading.Lock,
) -> None:
    while (index := dispenser.take()) is not None:
        reply = transport.send(bodies[index % len(bodies)])
        error = "" if reply.ok else reply.describe_error()
        with lock:
            samples.append(Sample(reply.latency_s, reply.status, error))
        if reply.status == 429:
            time.sleep(min(reply.retry_after_s or 0.0, PAUSE_CAP_S))


def percentiles(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p95": None, "p99": None, "mean": None, "max": None}
    arr = np.asarray(values, dtype=float)
    p50, p95, p99 = (float(x) for x in np.percentile(arr, [50, 95, 99]))
    return {"p50": p50, "p95": p95, "p99": p99, "mean": float(arr.mean()), "max": float(arr.max())}


def summarise(concurrency: int, samples: Sequence[Sample], wall_s: float) -> dict[str, Any]:
    sent = len(samples)
    accepted = [s for s in samples if 200 <= s.status < 300]
    rejected = [s for s in samples if s.status == 429]
    errors = [s for s in samples if not 200 <= s.status < 300 and s.status != 429]
    examples: list[str] = []
    for s in errors:
        if s.error not in examples and len(examples) < MAX_ERROR_EXAMPLES:
            examples.append(s.error)
    return {
        "concurrency": concurrency,
        "sent": sent,
        "accepted": len(accepted),
        "rejected_429": len(rejected),
        "errors": len(errors),
        "wall_s": wall_s,
        "throughput_per_s": len(accepted) / wall_s if wall_s > 0 else 0.0,
        "rate_429": len(rejected) / sent if sent else 0.0,
        "error_rate": len(errors) / sent if sent else 0.0,
        "latency_s": percentiles([s.latency_s for s in accepted]),
        "latency_429_s": percentiles([s.latency_s for s in rejected]),
        "error_examples": examples,
    }


def run_level(
    transport: Transport,
    bodies: Sequence[dict[str, Any]],
    concurrency: int,
    *,
    count: int | None = None,
    duration_s: float | None = None,
) -> dict[str, Any]:
    if (count is None) == (duration_s is None):
        raise ValueError("give either a request count or a duration")
    dispenser = _Dispenser(count, duration_s)
    samples: list[Sample] = []
    lock = threading.Lock()
    t0 = time.perf_counter()
    kwargs = {"samples": samples, "lock": lock}
    threads = [
        threading.Thread(target=_worker, args=(transport, bodies, dispenser), kwargs=kwargs, daemon=True)
        for _ in range(concurrency)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return summarise(concurrency, samples, time.perf_counter() - t0)


def run_target(
    transport: Transport,
    bodies: Sequence[dict[str, Any]],
    levels: Sequence[int],
    *,
    count: int | None = None,
    duration_s: float | None = None,
    warmup: int = 1,
    on_level: Any = None,
) -> list[dict[str, Any]]:
    """Warm up (unmeasured), then every level in turn."""
    for i in range(warmup):
        transport.send(bodies[i % len(bodies)])
    results = []
    for level in levels:
        result = run_level(transport, bodies, level, count=count, duration_s=duration_s)
        results.append(result)
        if on_level is not None:
            on_level(result)
    return results
