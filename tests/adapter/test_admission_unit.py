"""admission.Lane on its own: permits (contexts plus queue), the bounded wait, the 429 and its Retry-After from the
requests ahead and recent service times, and permits given back on errors, timeouts and cancellation.

No model: a lane's contexts here are strings, the work is a function that blocks on an event or moves a scripted
clock, in short asyncio scenarios. The lane in the adapter under real load is tested in test_adapter_load.py.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from decision_adapter.admission import Lane
from decision_adapter.core.errors import Overloaded

HOLD_S = 2.0  # the most a blocked job waits for its event: a failing test ends instead of hanging


def blocked(gate: threading.Event, ran: list[str], name: str) -> Callable[[str], str]:
    def job(context: str) -> str:
        gate.wait(HOLD_S)
        ran.append(f"{name}@{context}")
        return context

    return job


async def settle() -> None:
    await asyncio.sleep(0.05)


def test_a_lane_admits_its_contexts_plus_its_queue_and_refuses_the_next_at_once(caplog: Any) -> None:
    async def scenario() -> None:
        lane: Lane[str] = Lane("decisions", ["c1", "c2"], max_queue=1)
        gates = {n: threading.Event() for n in ("a", "b", "c")}
        ran: list[str] = []
        tasks = {}
        for name in ("a", "b", "c"):
            tasks[name] = asyncio.create_task(lane.run(blocked(gates[name], ran, name), request_id=name, route="-"))
            await settle()
        assert (lane.admitted, lane.waiting) == (3, 0)
        start = time.perf_counter()
        with pytest.raises(Overloaded) as refused:
            await lane.run(lambda c: c, request_id="d", route="/invocations")
        assert time.perf_counter() - start < 0.05
        # three ahead at the 1 s prior, over two contexts: 1.5 s, rounded up
        assert refused.value.retry_after == 2 and lane.rejected == 1
        assert str(refused.value) == "the endpoint is at capacity for decisions (3 requests admitted); retry after 2 s"
        gates["b"].set()
        assert await tasks["b"] == "c2"
        gates["c"].set()
        assert await tasks["c"] == "c2"  # the queued request ran on the context b freed
        gates["a"].set()
        assert await tasks["a"] == "c1"
        assert ran == ["b@c2", "c@c2", "a@c1"]
        assert (lane.admitted, lane.waiting, lane.waited) == (0, 0, 0)

    with caplog.at_level(logging.WARNING, logger="decision_adapter.requests"):
        asyncio.run(scenario())
    lines = [r.getMessage() for r in caplog.records if r.name == "decision_adapter.requests"]
    assert lines == ['{"event": "overload_rejected", "request_id": "d", "route": "/invocations", "status": 429}']


class ScriptedClock:
    """The lane's clock, moved by the work itself: a job 'takes' exactly the seconds it adds."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def takes(self, seconds: float) -> Callable[[str], None]:
        def job(_context: str) -> None:
            self.now += seconds

        return job


def test_retry_after_follows_the_recent_service_times_and_the_requests_ahead() -> None:
    async def scenario() -> None:
        clock = ScriptedClock()
        lane: Lane[str] = Lane("decisions", ["c"], max_queue=2, clock=clock)
        await lane.run(clock.takes(4.0), request_id="1", route="-")
        await lane.run(clock.takes(2.0), request_id="2", route="-")
        assert lane.service.mean_s == pytest.approx(3.6)  # the first replaces the prior, then 0.2 of the newest
        gate = threading.Event()
        held = [asyncio.create_task(lane.run(blocked(gate, [], n), request_id=n, route="-")) for n in ("3", "4", "5")]
        await settle()
        with pytest.raises(Overloaded) as refused:
            await lane.run(clock.takes(1.0), request_id="6", route="-")
        assert refused.value.retry_after == 11  # three ahead at 3.6 s on one context: 10.8 s, rounded up
        described = lane.describe()
        assert (described["retry_after_s"], described["service_s"], described["served"]) == (11, 3.6, 2)
        assert (described["limit"], described["admitted"], described["rejected"]) == (3, 3, 1)
        gate.set()
        await asyncio.gather(*held)
        assert lane.retry_after() == 1  # nothing ahead: the floor

    asyncio.run(scenario())


def test_a_place_freed_within_the_wait_is_taken_at_once() -> None:
    async def scenario() -> None:
        lane: Lane[str] = Lane("decisions", ["c"], max_queue=0, wait_s=1.0)
        holder = asyncio.create_task(lane.run(lambda _c: time.sleep(0.15), request_id="a", route="-"))
        await settle()
        start = time.perf_counter()
        assert await lane.run(lambda c: c, request_id="b", route="-") == "c"
        assert 0.05 < time.perf_counter() - start < 0.5  # when the holder finished, not at the end of the wait
        await holder
        assert (lane.waited, lane.rejected, lane.admitted) == (1, 0, 0)

    asyncio.run(scenario())


def test_waiters_count_as_requests_ahead_when_a_wait_runs_out() -> None:
    async def scenario() -> None:
        lane: Lane[str] = Lane("decisions", ["c"], max_queue=0, wait_s=0.2)
        gate = threading.Event()
        holder = asyncio.create_task(lane.run(blocked(gate, [], "a"), request_id="a", route="-"))
        await settle()
        first = asyncio.create_task(lane.run(lambda c: c, request_id="b", route="-"))
        await settle()
        second = asyncio.create_task(lane.run(lambda c: c, request_id="c", route="-"))
        refusals = await asyncio.gather(first, second, return_exceptions=True)
        assert all(isinstance(r, Overloaded) for r in refusals)
        # b ran out with the holder and c ahead; c with the holder alone
        assert [r.retry_after for r in refusals if isinstance(r, Overloaded)] == [2, 1]
        assert "after waiting 0.2 s for a place" in str(refusals[0])
        gate.set()
        await holder
        assert (lane.admitted, lane.waiting, lane.waited, lane.rejected) == (0, 0, 2, 2)

    asyncio.run(scenario())


def test_an_error_in_the_work_gives_back_the_permit_and_the_context() -> None:
    async def scenario() -> None:
        lane: Lane[str] = Lane("decisions", ["c"], max_queue=0)

        def fails(_context: str) -> None:
            raise RuntimeError("llama_decode failed")

        with pytest.raises(RuntimeError, match="llama_decode failed"):
            await lane.run(fails, request_id="a", route="-")
        assert (lane.admitted, lane.service.observed) == (0, 1)
        assert await lane.run(lambda c: c, request_id="b", route="-") == "c"

    asyncio.run(scenario())


def test_a_caller_timeout_while_waiting_gives_back_the_place_in_line() -> None:
    async def scenario() -> None:
        lane: Lane[str] = Lane("decisions", ["c"], max_queue=0, wait_s=5.0)
        gate = threading.Event()
        holder = asyncio.create_task(lane.run(blocked(gate, [], "a"), request_id="a", route="-"))
        await settle()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(lane.run(lambda c: c, request_id="b", route="-"), timeout=0.1)
        assert (lane.admitted, lane.waiting, lane.rejected) == (1, 0, 0)
        gate.set()
        await holder
        assert lane.admitted == 0
        assert await lane.run(lambda c: c, request_id="c", route="-") == "c"

    asyncio.run(scenario())


def test_a_running_request_cancelled_keeps_its_permit_until_its_work_ends() -> None:
    """Cancelled as the ASGI server cancels a request (an anyio cancel scope): the worker thread still runs on
    the context, so the context stays taken until it ends, then the permit and the context come back."""

    async def scenario() -> None:
        lane: Lane[str] = Lane("decisions", ["c"], max_queue=0)
        gate, ran = threading.Event(), list[str]()
        scope = anyio.CancelScope()

        async def request_a() -> None:
            with scope:
                await lane.run(blocked(gate, ran, "a"), request_id="a", route="-")

        async with anyio.create_task_group() as group:
            group.start_soon(request_a)
            await settle()
            scope.cancel()
            await settle()
            assert lane.admitted == 1  # the worker thread still holds the context
            with pytest.raises(Overloaded):
                await lane.run(lambda c: c, request_id="b", route="-")
            gate.set()
        assert ran == ["a@c"] and lane.admitted == 0
        assert await lane.run(lambda c: c, request_id="c", route="-") == "c"

    asyncio.run(scenario())


def test_a_running_request_cancelled_by_asyncio_keeps_its_context_until_its_work_ends() -> None:
    async def scenario() -> None:
        lane: Lane[str] = Lane("decisions", ["c"], max_queue=1)
        gate, ran = threading.Event(), list[str]()
        running = asyncio.create_task(lane.run(blocked(gate, ran, "a"), request_id="a", route="-"))
        await settle()
        running.cancel()
        second = asyncio.create_task(lane.run(lambda c: ran.append(f"b@{c}"), request_id="b", route="-"))
        await settle()
        gate.set()
        await asyncio.gather(running, second, return_exceptions=True)
        assert ran == ["a@c", "b@c"]  # b ran on the context only after a's work ended

    asyncio.run(scenario())


def test_a_permit_handed_to_a_waiter_cancelled_in_the_same_turn_goes_on_to_the_next() -> None:
    async def scenario() -> None:
        lane: Lane[str] = Lane("decisions", ["c"], max_queue=0, wait_s=5.0)
        gate, ran = threading.Event(), list[str]()
        holder = asyncio.create_task(lane.run(blocked(gate, ran, "a"), request_id="a", route="-"))
        await settle()
        handed = asyncio.create_task(lane.run(blocked(gate, ran, "b"), request_id="b", route="-"))
        await settle()
        nxt = asyncio.create_task(lane.run(blocked(gate, ran, "c"), request_id="c", route="-"))
        await settle()
        holder.add_done_callback(lambda _t: handed.cancel())  # after the holder hands b its permit, before b runs
        gate.set()
        await holder
        with pytest.raises(asyncio.CancelledError):
            await handed
        assert await asyncio.wait_for(nxt, timeout=1.0) == "c"
        assert ran == ["a@c", "c@c"] and (lane.admitted, lane.waiting, lane.rejected) == (0, 0, 0)

    asyncio.run(scenario())
