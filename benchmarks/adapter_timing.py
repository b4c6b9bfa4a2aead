"""The requests adapter_bench.py sends and the helpers that time them: one keep-alive client per adapter process,
medians measured alternately, a process's resident memory."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import httpx
import psutil
from decision_adapter.launcher import AdapterProcess

TICKET = (
    "Hello, I was charged twice for my March invoice (order #4471) and the refund I was promised last week "
    "still has not arrived. I have emailed three times and called once. "
)
LONG_STATE = TICKET * 14  # about 600 tokens
NOUL = {"type": "noul", "instructions": "Is the customer asking for money back?"}
CHOICE = {
    "type": "choice",
    "instructions": "Which team should handle this ticket?",
    "criteria": {
        "Billing": "Payments, invoices, refunds",
        "Technical": "Bugs, outages, log-in problems",
        "Sales": "Pricing, upgrades, new contracts",
    },
}
CHOICE_2 = {**CHOICE, "instructions": "Which department owns this case?"}  # same size, another question
SCORE = {
    "type": "score",
    "instructions": "How frustrated is the customer?",
    "criteria": ["Calm", "Frustrated", "Very angry"],
}
EIGHT = {f"q{i}": q for i, q in enumerate([NOUL, CHOICE, SCORE] * 3) if i < 8}


_CLIENTS: dict[tuple[str, int], httpx.Client] = {}


def client(adapter: AdapterProcess) -> httpx.Client:
    """One keep-alive connection per adapter process, as decisionctl and SageMaker's runtime keep theirs: a
    new `httpx.post` per request builds a client and a TLS context each time (about 25 ms on this machine),
    which would be timed as the adapter's."""
    key = (adapter.url, adapter.proc.pid)
    if key not in _CLIENTS:
        _CLIENTS[key] = httpx.Client(timeout=600)
    return _CLIENTS[key]


def post(adapter: AdapterProcess, body: dict[str, Any], route: str = "/v1/systemone") -> tuple[float, dict[str, Any]]:
    http = client(adapter)
    t0 = time.perf_counter()
    r = http.post(adapter.url + route, json=body)
    dt = time.perf_counter() - t0
    r.raise_for_status()
    return dt, r.json()


def median_of(fn: Callable[[], float], n: int) -> float:
    return statistics.median(fn() for _ in range(n))


def alternate(a: Callable[[], float], b: Callable[[], float], n: int) -> tuple[float, float]:
    """Medians of a and b, measured alternately so that noise hits both."""
    xs, ys = [], []
    for _ in range(n):
        xs.append(a())
        ys.append(b())
    return statistics.median(xs), statistics.median(ys)


def rss_mb(adapter: AdapterProcess) -> float:
    return float(psutil.Process(adapter.proc.pid).memory_info().rss) / 2**20


def close_clients() -> None:
    """Close the keep-alive clients `client` opened."""
    for http in _CLIENTS.values():
        http.close()
