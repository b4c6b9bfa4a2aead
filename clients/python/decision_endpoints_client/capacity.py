"""Waiting for a scaled-to-zero endpoint: SageMaker turns an invocation of an inference component with no copy away
at once (ValidationError, HTTP 400, "Inference Component has no capacity to process this request"); that refusal is
what wakes it (the NoCapacityInvocationFailures alarm adds a copy, then managed instance scaling an instance), and
a copy answers minutes later. A caller who wants the answer rather than the refusal asks again at a fixed interval
within a bounded budget, with a progress report each time: at most budget / interval + 1 sends a caller, never a
storm.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from decision_endpoints_client.invocation import NO_CAPACITY, EndpointResponse, error_response

log = logging.getLogger("decision_endpoints_client.capacity")

DEFAULT_BUDGET_S = 900.0  # a CPU instance and the model's load take minutes; one public measurement on GPU: 9.5 min
DEFAULT_INTERVAL_S = 15.0


@dataclass(frozen=True)
class CapacityProgress:
    """Where a wait stands when it is about to pause again."""

    endpoint: str
    waited_s: float
    budget_s: float
    sends: int

    def line(self) -> str:
        return (
            f"{self.endpoint}: no capacity yet (scaling from zero); waited {self.waited_s:.0f} s of "
            f"{self.budget_s:.0f} s, {self.sends} send(s)"
        )


def _log_progress(progress: CapacityProgress) -> None:
    log.info("%s", progress.line())


@dataclass(frozen=True)
class CapacityWait:
    """How long to wait for capacity (`budget_s`, 0: not at all), how often to ask (`interval_s`), and who hears of
    it (`on_wait`, a logging line by default). `sleep` and `clock` are time's unless a test freezes them."""

    budget_s: float = DEFAULT_BUDGET_S
    interval_s: float = DEFAULT_INTERVAL_S
    on_wait: Callable[[CapacityProgress], None] = _log_progress
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)

    def __post_init__(self) -> None:
        if self.budget_s < 0 or self.interval_s <= 0:
            raise ValueError(f"budget_s must be >= 0 and interval_s > 0, got {self.budget_s}, {self.interval_s}")


def is_no_capacity(answer: EndpointResponse) -> bool:
    """The answer stands for SageMaker's no-capacity refusal (unwrap.answer_from_error names it NO_CAPACITY)."""
    if answer.status != 503:
        return False
    try:
        detail = json.loads(answer.body).get("detail")
    except (ValueError, AttributeError):
        return False
    return isinstance(detail, dict) and detail.get("error_type") == NO_CAPACITY


class CapacityWaiter:
    """One endpoint's waits, shared by its callers (threads included). A wait is an episode: it starts at the first
    refusal, ends at the first answer, and its budget is the episode's, so a retry policy above that asks again right
    after a spent budget is refused at once instead of waiting the budget again. A send made more than two intervals
    after the last refusal arrived starts a new episode (measured to the send, not to its refusal: a refused call
    that takes longer than the interval, a slow upload of a large body, stays in its episode). Each call is bounded
    by its own elapsed time too, its first send included, whatever the episode says."""

    def __init__(self, wait: CapacityWait | None, endpoint: str) -> None:
        self.wait, self.endpoint = wait, endpoint
        self._lock = threading.Lock()
        self._started: float | None = None
        self._last = 0.0

    def _waited(self, wait: CapacityWait, sent_at: float, begun: float) -> float:
        """How long this call has waited for capacity: the episode's time or its own, the longer."""
        now = wait.clock()
        with self._lock:
            if self._started is None or sent_at - self._last > 2 * wait.interval_s:
                self._started = begun
            self._last = now
            return max(now - self._started, now - begun)

    def invoke(self, call: Callable[[], EndpointResponse]) -> EndpointResponse:
        """`call()` until a copy answers or the budget is spent (the episode's, and this call's own elapsed time);
        the answer carries its sends. Spent, the no-capacity answer says how long the endpoint was waited for."""
        wait = self.wait
        begun = sent_at = wait.clock() if wait is not None else 0.0
        answer, sends, waited = call(), 1, 0.0
        while is_no_capacity(answer) and wait is not None:
            waited = self._waited(wait, sent_at, begun)
            pause = min(wait.interval_s, wait.budget_s - waited)
            if pause <= 0:
                break
            wait.on_wait(CapacityProgress(self.endpoint, waited, wait.budget_s, sends))
            wait.sleep(pause)
            sent_at = wait.clock()
            answer, sends = call(), sends + 1
        if not is_no_capacity(answer):
            with self._lock:
                self._started = None
            return replace(answer, sends=sends)
        budget = wait.budget_s if wait is not None else 0.0
        return error_response(
            503,
            NO_CAPACITY,
            f"{self.endpoint} had no capacity after {waited:.0f} s of waiting (budget {budget:.0f} s; this call "
            f"{sends} send(s)): it is scaling from zero, which takes minutes; call again later, or wait longer",
            {k: v for k, v in answer.headers.items() if k != "content-type"},
            sends=sends,
        )
