"""How much of a test run is the model's own work: tokens decoded and seconds inside llama.cpp's decode, per test.

tests/conftest.py wraps `llama_cpp.Llama.eval` (every prefill and every decode of the adapter and of chat goes
through it, runtime.py) for the session in each test process, charges what each call costs to the test running (its
setup, call and teardown together), carries each phase's share on that phase's report (so that pytest-xdist's workers
send it to the process that prints), and prints the totals and the tests that cost most after the run. It is the
floor under the suite's time: a test that spends 40 s decoding cannot be made faster than that without asking the
model less. Adapters started as processes (`start_adapter`) decode outside this process and are not counted.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

DECODE = "model_decode"  # the report user property holding a phase's [tokens, seconds]


@dataclass
class Cost:
    tokens: int = 0
    seconds: float = 0.0


@dataclass
class ModelTime:
    """Decode tokens and seconds charged to the test running when they were spent."""

    by_test: dict[str, Cost] = field(default_factory=lambda: defaultdict(Cost))
    current: str = "(outside any test)"
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def charge(self, tokens: int, seconds: float) -> None:
        self.charge_to(self.current, tokens, seconds)

    @contextmanager
    def test(self, nodeid: str) -> Iterator[None]:
        previous, self.current = self.current, nodeid
        try:
            yield
        finally:
            self.current = previous

    def take(self, nodeid: str) -> Cost:
        """What `nodeid` has cost since the last take (one report phase's share), forgotten here once handed out: the
        reports carry it from then on."""
        with self._lock:
            return self.by_test.pop(nodeid, Cost())

    @classmethod
    def from_reports(cls, reports: Iterable[Any]) -> ModelTime:
        """The costs carried by test reports (`DECODE` user properties), from any process that ran them."""
        gathered = cls()
        for report in reports:
            for name, value in getattr(report, "user_properties", ()):
                if name == DECODE and getattr(report, "nodeid", ""):
                    tokens, seconds = value
                    gathered.charge_to(report.nodeid, tokens, seconds)
        return gathered

    def charge_to(self, nodeid: str, tokens: int, seconds: float) -> None:
        with self._lock:
            cost = self.by_test[nodeid]
            cost.tokens += tokens
            cost.seconds += seconds

    def total(self) -> Cost:
        with self._lock:
            return Cost(sum(c.tokens for c in self.by_test.values()), sum(c.seconds for c in self.by_test.values()))

    def report(self, wall_s: float, processes: int = 1, top: int = 15) -> list[str]:
        """The totals and the costliest tests; the share is of the wall time `processes` test processes had."""
        total = self.total()
        capacity = wall_s * processes
        run = f"the run's {wall_s:.0f} s" if processes == 1 else f"{processes} processes' {wall_s:.0f} s each"
        share = f", {total.seconds / capacity:.0%} of {run}" if capacity > 0 else ""
        lines = [
            f"model decode in the test processes: {total.tokens:,} tokens in {total.seconds:.1f} s{share}"
            + (f" ({total.tokens / total.seconds:.0f} tokens/s)" if total.seconds else "")
        ]
        ranked = sorted(self.by_test.items(), key=lambda kv: -kv[1].seconds)[:top]
        lines += [f"{c.seconds:8.1f} s {c.tokens:9,} tokens  {nodeid}" for nodeid, c in ranked if c.seconds >= 0.5]
        return lines


def wrap_eval(original: Callable[..., Any], model_time: ModelTime) -> Callable[..., Any]:
    """`Llama.eval` charging its tokens and its time to the test running."""

    def counted(self: Any, tokens: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(self, tokens)
        finally:
            model_time.charge(len(tokens), time.perf_counter() - started)

    return counted
