"""Closed-loop load at one concurrency level: each client sends its next decision when the last one ended.

A decision is sent with the sender's retry policy (`send_with_retries`), so a level reports what an
application sees: decisions accepted and how long they took from the first send, how many sends each
cost, how many were never accepted within the client's attempts (lost), and the 429s among all sends.
A level is bounded twice: by a count of decisions and by a time after which no new decision starts.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import random
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from decisionctl.load.workloads import Planned, Workload
from decisionctl.transport import Reply, RetryPolicy, Sender, send_with_retries

PAUSE_CAP_S = 1.0  # a client whose decision was turned away waits Retry-After, at most this, before the next
MAX_ERROR_EXAMPLES = 5
MAX_CONCURRENCY = 256
MAX_DECISIONS_PER_LEVEL = 100_000
MAX_LEVEL_S = 3600.0


def require_loopback(url: str) -> None:
    """Load goes to an adapter on this machine (or through a tunnel to it) or to SageMaker, not to any host."""
    host = urllib.parse.urlsplit(url).hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(
            f"bench sends load only to a loopback URL (localhost, 127.0.0.1, ::1) or a SageMaker endpoint, not "
            f"{host or url!r}; reach a remote adapter through a tunnel to a local port"
        )


def check_bounds(levels: Sequence[int], count: int, duration_s: float) -> None:
    if not levels or any(not 1 <= c <= MAX_CONCURRENCY for c in levels):
        raise ValueError(f"concurrency levels must be between 1 and {MAX_CONCURRENCY}")
    if not 1 <= count <= MAX_DECISIONS_PER_LEVEL:
        raise ValueError(f"decisions per level must be between 1 and {MAX_DECISIONS_PER_LEVEL}")
    if not 0 < duration_s <= MAX_LEVEL_S:
        raise ValueError(f"seconds per level must be above 0 and at most {MAX_LEVEL_S:g}")


@dataclass(frozen=True)
class SendResult:
    """One decision: its last reply, the sends it took and how many of them were answered 429."""

    latency_s: float  # from the first send to the last reply
    sends: int
    rejected_429: int
    status: int
    retryable: bool
    error: str
    questions: int

    @property
    def accepted(self) -> bool:
        return 200 <= self.status < 300


class Schedule:
    """Hands the clients the next request that may go, until the count is sent or the time is up.

    A request whose `after` has not been answered (or answered less than its gap ago) is skipped for a later
    one; when none may go, the workload's next group is opened, so clients stay busy as in a closed loop.
    """

    def __init__(
        self,
        workload: Workload,
        *,
        seed: int,
        count: int,
        duration_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._workload, self._seed, self._count, self._clock = workload, seed, count, clock
        self._deadline = clock() + duration_s
        self._cond = threading.Condition()
        self._planned: list[Planned] = []
        self._ready_at: list[float | None] = []  # None: waits for the answer to its `after`
        self._dependents: dict[int, list[int]] = {}
        self._open: list[int] = []  # not yet handed out, in order
        self._groups = 0
        self.issued = 0

    def _open_group(self) -> None:
        start = len(self._planned)
        for p in self._workload.group(self._seed, self._groups):
            index = len(self._planned)
            self._planned.append(p)
            if p.after is None:
                self._ready_at.append(0.0)
            else:
                self._ready_at.append(None)
                self._dependents.setdefault(start + p.after, []).append(index)
            self._open.append(index)
        self._groups += 1

    def take(self) -> tuple[int, Mapping[str, Any]] | None:
        with self._cond:
            while True:
                now = self._clock()
                if self.issued >= self._count or now >= self._deadline:
                    return None
                soonest = self._deadline
                for position, index in enumerate(self._open):
                    ready_at = self._ready_at[index]
                    if ready_at is not None and ready_at <= now:
                        del self._open[position]
                        self.issued += 1
                        return index, self._planned[index].body
                    if ready_at is not None:
                        soonest = min(soonest, ready_at)
                if len(self._planned) < self._count:
                    self._open_group()
                    continue
                self._cond.wait(timeout=max(0.0, soonest - now))

    def stop(self) -> None:
        """Hand out nothing more (a client failed in a way every request would): the waiting clients end."""
        with self._cond:
            self._count = self.issued
            self._cond.notify_all()

    def done(self, index: int) -> None:
        """The answer to `index` is in (accepted or not): the requests waiting for it may go after their gap."""
        with self._cond:
            now = self._clock()
            for dependent in self._dependents.pop(index, []):
                self._ready_at[dependent] = now + self._planned[dependent].gap_s
            self._cond.notify_all()


def _client(
    sender: Sender,
    schedule: Schedule,
    policy: RetryPolicy,
    *,
    outcomes: list[SendResult],
    lock: threading.Lock,
    failures: list[Exception],
) -> None:
    try:
        _send_in_turn(sender, schedule, policy, outcomes=outcomes, lock=lock)
    except Exception as exc:  # raised, not replied (no AWS credentials ...): the same for every request
        failures.append(exc)
        schedule.stop()


def _send_in_turn(
    sender: Sender,
    schedule: Schedule,
    policy: RetryPolicy,
    *,
    outcomes: list[SendResult],
    lock: threading.Lock,
) -> None:
    while (item := schedule.take()) is not None:
        index, body = item
        rejected = 0

        def count_429(_attempt: int, reply: Reply, _wait: float) -> None:
            nonlocal rejected
            rejected += reply.status == 429

        start = time.perf_counter()
        reply, sends = send_with_retries(sender, body, policy, on_retry=count_429)
        latency = time.perf_counter() - start
        rejected += reply.status == 429
        error = "" if reply.ok else reply.describe_error()
        outcome = SendResult(latency, sends, rejected, reply.status, reply.retryable, error, len(body["questions"]))
        with lock:
            outcomes.append(outcome)
        schedule.done(index)
        if reply.status == 429:  # turned away for good: an application would not come back at once either
            time.sleep(min(reply.retry_after_s or 0.0, PAUSE_CAP_S))


def percentiles(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p95": None, "p99": None, "mean": None, "max": None}
    arr = np.asarray(values, dtype=float)
    p50, p95, p99 = (float(x) for x in np.percentile(arr, [50, 95, 99]))
    return {"p50": p50, "p95": p95, "p99": p99, "mean": float(arr.mean()), "max": float(arr.max())}


def summarise(concurrency: int, outcomes: Sequence[SendResult], wall_s: float) -> dict[str, Any]:
    accepted = [o for o in outcomes if o.accepted]
    lost = [o for o in outcomes if not o.accepted and o.retryable]
    errors = [o for o in outcomes if not o.accepted and not o.retryable]
    sends = sum(o.sends for o in outcomes)
    rejected = sum(o.rejected_429 for o in outcomes)
    examples: list[str] = []
    for o in (*errors, *lost):
        if o.error not in examples and len(examples) < MAX_ERROR_EXAMPLES:
            examples.append(o.error)
    decisions = len(outcomes)
    return {
        "concurrency": concurrency,
        "decisions": decisions,
        "accepted": len(accepted),
        "lost": len(lost),
        "errors": len(errors),
        "sends": sends,
        "rejected_429": rejected,
        "wall_s": wall_s,
        "throughput_per_s": len(accepted) / wall_s if wall_s > 0 else 0.0,
        "answers_per_s": sum(o.questions for o in accepted) / wall_s if wall_s > 0 else 0.0,
        "rate_429": rejected / sends if sends else 0.0,
        "sends_per_accepted": sends / len(accepted) if accepted else None,
        "lost_rate": len(lost) / decisions if decisions else 0.0,
        "error_rate": len(errors) / decisions if decisions else 0.0,
        "latency_s": percentiles([o.latency_s for o in accepted]),
        "error_examples": examples,
    }


def run_level(
    sender: Sender,
    workload: Workload,
    concurrency: int,
    *,
    count: int,
    duration_s: float,
    policy: RetryPolicy,
    seed: int = 0,
) -> dict[str, Any]:
    """`concurrency` clients until `count` decisions were sent or `duration_s` passed; the last ones finish."""
    check_bounds([concurrency], count, duration_s)
    schedule = Schedule(workload, seed=seed, count=count, duration_s=duration_s)
    outcomes: list[SendResult] = []
    failures: list[Exception] = []
    lock = threading.Lock()
    threads = []
    for k in range(concurrency):
        # each client its own jitter, seeded: the same run backs off the same way
        own = dataclasses.replace(policy, rng=random.Random(f"{seed}:{concurrency}:{k}"))  # noqa: S311 (jitter)
        kwargs = {"outcomes": outcomes, "lock": lock, "failures": failures}
        threads.append(threading.Thread(target=_client, args=(sender, schedule, own), kwargs=kwargs, daemon=True))
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]
    return summarise(concurrency, outcomes, time.perf_counter() - start)
