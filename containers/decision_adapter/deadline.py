"""A request's time budget (DECISION_REQUEST_TIMEOUT_S): set when its handler starts, checked between units of
work (tokenizing passes, prefill chunks, questions, records, generated tokens), and past it the work stops with
DeadlineExceeded (504) and leaves nothing half-written. A context's work outlives a caller who stopped waiting (the
lane shields it) only until this deadline."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from .core.errors import DeadlineExceeded


class Deadline:
    def __init__(self, seconds: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self.expires = clock() + seconds

    @classmethod
    def never(cls) -> Deadline:
        """No budget (work run outside a request: start-up probes, tests of other things)."""
        return cls(math.inf)

    def remaining(self) -> float:
        return self.expires - self._clock()

    def expired(self) -> bool:
        return self.remaining() <= 0

    def check(self, doing: str = "") -> None:
        """Raise DeadlineExceeded once the budget is spent; `doing` says what was about to start."""
        if self.expired():
            raise self.exceeded(doing)

    def exceeded(self, doing: str = "") -> DeadlineExceeded:
        at = f" before {doing}" if doing else ""
        return DeadlineExceeded(
            f"the request ran out of its {self.seconds:g} s time budget{at} (DECISION_REQUEST_TIMEOUT_S); nothing "
            "of the unfinished work is kept: ask for less in one request (fewer questions, records or tokens)"
        )
