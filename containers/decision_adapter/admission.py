"""Admission to a lane of model contexts: permits (its contexts plus queue slots), a bounded wait for one, and
a 429 whose Retry-After is estimated from the requests ahead and the lane's recent service times.

A constant Retry-After is right only for one request length: with seconds-long requests, clients told to come
back after 1 s return while the queue is still full and are refused again (measured in issue 16: 6.0 sends per
accepted decision with 1 s requests). The estimate says when the requests now in the lane will be done. Before
that, a request that finds no permit waits for one a while, first come first served: a place that frees within
the wait is taken at once instead of after a client's round trip and back-off.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import anyio
from decision_spec import events

from .core.errors import Overloaded, status_of
from .deadline import Deadline
from .request_log import log_rejection

E = TypeVar("E")
T = TypeVar("T")
MAX_RETRY_AFTER_S = 60  # SageMaker's invocation limit: past it a client does better elsewhere than waiting here
PRIOR_SERVICE_S = 1.0  # the service time assumed until a request has been served
SERVICE_WEIGHT = 0.2  # the newest service time's weight in the running mean: about the last five requests count


def retry_after_estimate(
    ahead: int, service_s: float, contexts: int, *, floor_s: int = 1, cap_s: int = MAX_RETRY_AFTER_S
) -> int:
    """Whole seconds until the `ahead` requests in a lane are done at `service_s` each, spread over its contexts:
    rounded up (Retry-After takes whole seconds; early is what made clients come back to a full queue), at least
    `floor_s`, at most `cap_s`."""
    if contexts < 1:
        raise ValueError("a lane has at least one context")
    seconds = math.ceil(round(max(0, ahead) * max(0.0, service_s) / contexts, 3))  # 3.0000000000000004 is 3
    return min(cap_s, max(floor_s, seconds))


class ServiceTime:
    """A running mean of how long requests held a context, weighted to the recent ones; a prior until the first."""

    def __init__(self, prior_s: float = PRIOR_SERVICE_S, weight: float = SERVICE_WEIGHT) -> None:
        self.mean_s = prior_s
        self.weight = weight
        self.observed = 0

    def observe(self, seconds: float) -> None:
        self.mean_s = seconds if self.observed == 0 else self.mean_s + self.weight * (seconds - self.mean_s)
        self.observed += 1


class Lane(Generic[E]):
    """Contexts for one kind of work and their admission: a request takes a permit (there are as many as contexts
    plus `max_queue`), waiting up to `wait_s` behind earlier waiters when none is free, then the next idle context,
    and runs off the event loop. All state is touched on the event loop only, so no lock is needed."""

    def __init__(
        self,
        name: str,
        contexts: list[E],
        *,
        max_queue: int,
        wait_s: float = 0.0,
        retry_floor_s: int = 1,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if not contexts:
            raise ValueError(f"lane {name!r} has no context")
        self.name = name
        self.contexts = contexts
        self.limit = len(contexts) + max_queue
        self.wait_s = wait_s
        self.retry_floor_s = retry_floor_s
        self.service = ServiceTime()
        self.admitted = 0  # holding a permit: running and queued
        self.rejected = 0
        self.waited = 0  # found no permit free and waited for one (then admitted or not)
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._clock = clock
        self._idle: asyncio.Queue[E] = asyncio.Queue()
        for context in contexts:
            self._idle.put_nowait(context)

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def retry_after(self) -> int:
        """When the requests now in the lane (running, queued and waiting) will be done."""
        ahead = self.admitted + self.waiting
        return retry_after_estimate(ahead, self.service.mean_s, len(self.contexts), floor_s=self.retry_floor_s)

    async def run(self, fn: Callable[[E], T], *, request_id: str, route: str, deadline: Deadline | None = None) -> T:
        """Take a permit (or raise Overloaded with the estimate once the wait is over), then an idle context, and
        run `fn` on it in a worker thread; the time it held the context feeds the estimate. Every wait is bounded:
        for a permit by `wait_s` and the deadline, for a context (behind the admitted requests) by the deadline,
        past which DeadlineExceeded; `fn` checks the same deadline, so what the lane shields ends with it too."""
        deadline = deadline or Deadline.never()
        if not await self._permit(deadline):
            self.rejected += 1
            seconds = self.retry_after()
            waited = f", after waiting {self.wait_s:g} s for a place" if self.wait_s > 0 else ""
            err = Overloaded(
                f"the endpoint is at capacity for {self.name} ({self.limit} requests admitted{waited}); "
                f"retry after {seconds} s",
                retry_after=seconds,
            )
            log_rejection(request_id, route, status_of(err), events.OVERLOAD_REJECTED)
            raise err
        try:
            context = await self._context(deadline)
        except BaseException:
            self._release()
            raise
        start = self._clock()
        work = asyncio.ensure_future(anyio.to_thread.run_sync(fn, context))
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            # The caller stopped waiting, but the worker thread goes on using the context: hold the context and
            # the permit until the work has ended, so no second request runs on a context still in use.
            with anyio.CancelScope(shield=True):
                await asyncio.wait({work})
            raise
        finally:
            self.service.observe(self._clock() - start)
            self._idle.put_nowait(context)
            self._release()

    async def _context(self, deadline: Deadline) -> E:
        """The next idle context, waited for until the deadline (the permits admit more requests than contexts)."""
        if not self._idle.empty():
            return self._idle.get_nowait()
        remaining = deadline.remaining()
        try:
            async with asyncio.timeout(None if math.isinf(remaining) else max(0.0, remaining)):
                return await self._idle.get()
        except TimeoutError:
            raise deadline.exceeded(f"a {self.name} context was free") from None

    async def _permit(self, deadline: Deadline) -> bool:
        """A permit now if one is free and nobody waits for one, else the first handed over within the wait (and the
        request's deadline)."""
        if self.admitted < self.limit and not self._waiters:
            self.admitted += 1
            return True
        wait_s = min(self.wait_s, deadline.remaining())
        if wait_s <= 0:
            return False
        self.waited += 1
        handed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(handed)
        try:
            async with asyncio.timeout(wait_s):
                await asyncio.shield(handed)  # the timeout must not cancel a permit handed over in the same turn
        except TimeoutError:
            pass
        except BaseException:  # cancelled while waiting: a permit already handed over goes on to the next
            if handed.done():
                self._release()
            raise
        finally:
            if not handed.done():
                handed.cancel()
                self._waiters.remove(handed)
        return handed.done() and not handed.cancelled()

    def _release(self) -> None:
        """Hand the permit to the longest waiter, else give it back."""
        if self._waiters:
            self._waiters.popleft().set_result(None)
        else:
            self.admitted -= 1

    def describe(self) -> dict[str, Any]:
        """The lane's state for /metrics."""
        return {
            "contexts": len(self.contexts),
            "limit": self.limit,
            "admitted": self.admitted,
            "waiting": self.waiting,
            "wait_s": self.wait_s,
            "waited": self.waited,
            "rejected": self.rejected,
            "service_s": round(self.service.mean_s, 4),
            "served": self.service.observed,
            "retry_after_s": self.retry_after(),
        }
