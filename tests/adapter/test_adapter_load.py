"""The adapter under load, on the real SmolLM2 model over real HTTP: decisions served while a chat generation
holds the chat context (the decision lane), a bounded wait at admission, a Retry-After estimated from the
requests ahead and recent service times, threads split across the contexts, and a 413 that reaches a client
which sends its whole body before reading. The admission lane's waiting and hand-over are also tested on their
own, without a model.

One adapter for the module: one decision context and one chat context (the default), no queue in either, so a
second request finds no permit and waits up to WAIT_S for one; the adapter's own thread default (no
SM_LLAMA_CPP_THREADS); a 1 MiB body limit. The
Retry-After test comes first so that the first request the adapter serves is the long one it times.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator

import httpx
import pytest
from decision_adapter.admission import MAX_RETRY_AFTER_S, Lane, ServiceTime, retry_after_estimate
from decision_adapter.core.errors import ChatNotServed, Overloaded, status_of
from decision_adapter.core.settings import AdapterSettings, runtime_from_env, threads_per_context
from decision_adapter.service import ModelService
from decision_spec.schemas import ChatCompletionRequest, RunIdentity

from tests.app_support import AppServer, start_app
from tests.conftest import require_model

TICKET = "I was charged twice for my March invoice and the refund has not arrived."
NOUL = {"type": "noul", "instructions": "Is the customer asking for money back?"}
DECISION = {"model": "jev-latest", "state": TICKET, "questions": {"refund": NOUL}}
CONTEXTS = 1
CHAT_CONTEXTS = 1  # chat asked for (the default is 0): the chat lane tests need it
BODY_LIMIT = 1 << 20
WAIT_S = 0.5
MODULE_ENV = {
    "DECISION_MAX_CONCURRENCY": str(CONTEXTS),
    "DECISION_CHAT_CONTEXTS": str(CHAT_CONTEXTS),
    "DECISION_MAX_QUEUE": "0",
    "DECISION_CHAT_MAX_QUEUE": "0",
    "DECISION_ADMISSION_WAIT_S": str(WAIT_S),
    "DECISION_MAX_BODY_BYTES": str(BODY_LIMIT),
}
# 384 tokens (finish_reason "length") from the bundled model at temperature 0: 3.0 s of generation on a 2-core
# EPYC, six times WAIT_S. At 256 tokens and a 2 s wait the chat ended 2.0 s in, as the second chat's wait did, and a
# CI run served that second chat instead of refusing it.
CHAT = {"messages": [{"role": "user", "content": "Write a long story about a ship."}], "max_tokens": 384}
SENTENCE = "The customer says the March invoice was charged twice, the refund never came and the login fails. "


@pytest.fixture(scope="module")
def adapter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppServer]:
    require_model()
    proc = start_app(env=MODULE_ENV, unset=("SM_LLAMA_CPP_THREADS",))
    yield proc
    proc.stop()


def post(adapter: AppServer, body: dict[str, object], timeout: float = 120) -> httpx.Response:
    return httpx.post(adapter.url + "/v1/systemone", json=body, timeout=timeout)


def long_decision(tag: str) -> dict[str, object]:
    """About 750 tokens of a state no other request has (no cache hit) and three questions: seconds here, more
    than WAIT_S."""
    return {**DECISION, "state": f"Ticket {tag}. " + SENTENCE * 40, "questions": {f"q{i}": NOUL for i in range(3)}}


def decision_lane(adapter: AppServer, lane: str = "decisions") -> dict[str, float]:
    lanes = httpx.get(adapter.url + "/metrics", timeout=30).json()["lanes"]
    return dict(lanes[lane])


class Running:
    """A request sent from a thread, with the time its answer came."""

    def __init__(self, adapter: AppServer, body: dict[str, object], route: str = "/v1/systemone") -> None:
        self.response: httpx.Response | None = None
        self.answered_at = 0.0
        self.sent_at = time.perf_counter()
        self.thread = threading.Thread(target=self._send, args=(adapter.url + route, body))
        self.thread.start()

    def _send(self, url: str, body: dict[str, object]) -> None:
        self.response = httpx.post(url, json=body, timeout=300)
        self.answered_at = time.perf_counter()

    def join(self) -> httpx.Response:
        self.thread.join(timeout=300)
        assert self.response is not None
        return self.response


def wait_admitted(adapter: AppServer, count: int, lane: str = "decisions") -> None:
    for _ in range(600):
        if decision_lane(adapter, lane)["admitted"] >= count:
            return
        threading.Event().wait(0.02)
    raise AssertionError(f"the {lane} lane never held {count} requests")


# -- Retry-After (first: the first request served is the one it times)


@pytest.mark.slow
def test_a_429_says_when_the_requests_ahead_will_be_done(adapter: AppServer) -> None:
    """The header is the estimate from the one request running and the service time measured on the last one, not
    a constant: a first long request sets the service time (it replaces the prior of 1 s), a second holds the only
    context, and a third, after waiting WAIT_S for a place, is turned away with Retry-After = ceil(1 x that time /
    1 context)."""
    first = post(adapter, long_decision("first"))
    assert first.status_code == 200, first.text
    served = decision_lane(adapter)
    assert served["served"] == 1 and served["service_s"] > 1.0, served  # seconds of a 600-token state here
    assert served["service_s"] == pytest.approx(first.json()["x_timing_ms"]["total"] / 1e3, abs=0.2)
    running = Running(adapter, long_decision("second"))
    wait_admitted(adapter, 1)
    start = time.perf_counter()
    turned_away = post(adapter, DECISION)
    waited_s = time.perf_counter() - start
    during = decision_lane(adapter)
    assert during["admitted"] == 1 and running.response is None  # refused while the long one still ran
    assert running.join().status_code == 200
    assert WAIT_S <= waited_s < WAIT_S + 5  # it waited for a place, bounded, then got its answer
    assert turned_away.status_code == 429 and turned_away.json()["detail"]["error_type"] == "overloaded"
    expected = retry_after_estimate(1, served["service_s"], CONTEXTS)
    assert int(turned_away.headers["retry-after"]) == during["retry_after_s"] == expected >= 2
    assert f"retry after {expected} s" in turned_away.json()["detail"]["message"]


# -- the decision lane


def test_a_decision_is_served_while_a_chat_generation_holds_the_chat_context(adapter: AppServer) -> None:
    """A 384-token chat holds the only chat context for seconds; a decision sent meanwhile is answered before it
    ends (on one shared context it waited behind it), and a second chat, finding the chat lane full, waits and is
    turned away by the chat lane's own admission while the decision lane refuses nothing."""
    before = decision_lane(adapter)
    chat = Running(adapter, CHAT, route="/v1/chat/completions")
    wait_admitted(adapter, 1, lane="chat")
    second_chat = Running(adapter, CHAT, route="/invocations")
    decision = post(adapter, {**DECISION, "state": f"{TICKET} (while a chat runs)"})
    decided_at = time.perf_counter()
    generated = chat.join()
    assert decision.status_code == 200, decision.text
    assert generated.status_code == 200 and generated.json()["usage"]["completion_tokens"] == 384
    assert decided_at < chat.answered_at
    # the premise of the refusal below: the chat still held its context a full WAIT_S after the second chat came
    assert chat.answered_at - second_chat.sent_at > WAIT_S, "the chat ended before the second chat's wait did"
    refused = second_chat.join()
    assert refused.status_code == 429 and "capacity for chat" in refused.json()["detail"]["message"]
    after = decision_lane(adapter)
    assert (after["rejected"], after["waited"]) == (before["rejected"], before["waited"])  # the decision never waited
    chat_lane = decision_lane(adapter, lane="chat")
    assert (chat_lane["contexts"], chat_lane["rejected"], chat_lane["admitted"]) == (1, 1, 0)


def test_chat_is_refused_with_a_400_when_it_has_no_context() -> None:
    service = ModelService(
        settings=AdapterSettings(chat_contexts=0),
        engines=["a decision context"],  # type: ignore[list-item]  # never reached: only chat is asked
        llms=[],
        identity=RunIdentity.model_construct(model_name="m", model_file="m.gguf"),
    )
    request = ChatCompletionRequest.model_validate(CHAT)
    with pytest.raises(ChatNotServed, match="DECISION_CHAT_CONTEXTS=0") as refused:
        asyncio.run(service.chat(request, request_id="-", route="chat"))
    assert status_of(refused.value) == 400 and service.chat_lane is None


def _lane(wait_s: float) -> Lane[str]:
    return Lane("test", ["context"], max_queue=0, wait_s=wait_s)


def test_a_waiter_gets_the_permit_first_come_first_served() -> None:
    async def scenario() -> list[str]:
        lane, order = _lane(5.0), []

        async def job(name: str, hold_s: float) -> None:
            await lane.run(lambda _context: (time.sleep(hold_s), order.append(name)), request_id=name, route="-")

        first = asyncio.create_task(job("first", 0.3))
        await asyncio.sleep(0.05)
        waiters = [asyncio.create_task(job(n, 0.01)) for n in ("second", "third")]
        await asyncio.sleep(0.05)
        late = asyncio.create_task(job("fourth", 0.01))
        await asyncio.sleep(0.05)
        assert (lane.admitted, lane.waiting) == (1, 3)
        await asyncio.gather(first, *waiters, late)
        assert (lane.admitted, lane.waiting, lane.waited, lane.rejected) == (0, 0, 3, 0)
        return order

    assert asyncio.run(scenario()) == ["first", "second", "third", "fourth"]


def test_a_wait_is_bounded_and_a_cancelled_waiter_leaks_no_permit() -> None:
    async def scenario() -> None:
        lane = _lane(0.2)
        holder = asyncio.create_task(lane.run(lambda _c: time.sleep(0.6), request_id="a", route="-"))
        await asyncio.sleep(0.05)
        start = time.perf_counter()
        with pytest.raises(Overloaded) as refused:
            await lane.run(lambda _c: None, request_id="b", route="-")
        assert 0.2 <= time.perf_counter() - start < 0.5
        assert refused.value.retry_after == 1 and lane.rejected == 1  # one ahead at the 1 s prior
        cancelled = asyncio.create_task(lane.run(lambda _c: None, request_id="c", route="-"))
        await asyncio.sleep(0.05)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        await holder
        assert (lane.admitted, lane.waiting) == (0, 0)
        assert await lane.run(lambda c: c, request_id="d", route="-") == "context"  # the permit came back

    asyncio.run(scenario())


def test_no_wait_refuses_at_once() -> None:
    async def scenario() -> None:
        lane = _lane(0.0)
        holder = asyncio.create_task(lane.run(lambda _c: time.sleep(0.3), request_id="a", route="-"))
        await asyncio.sleep(0.05)
        start = time.perf_counter()
        with pytest.raises(Overloaded):
            await lane.run(lambda _c: None, request_id="b", route="-")
        assert time.perf_counter() - start < 0.1 and lane.waited == 0
        await holder

    asyncio.run(scenario())


def test_the_estimate_spreads_the_requests_ahead_over_the_contexts() -> None:
    assert retry_after_estimate(3, 1.7, 1) == 6  # 5.1 s: rounded up, never early
    assert retry_after_estimate(3, 1.7, 2) == 3
    assert retry_after_estimate(10, 0.3, 1) == 3  # 3.0000000000000004 in floating point is 3 s, not 4
    assert retry_after_estimate(0, 5.0, 1) == 1 and retry_after_estimate(1, 0.01, 1) == 1  # at least the floor
    assert retry_after_estimate(1, 0.5, 1, floor_s=2) == 2
    assert retry_after_estimate(100, 2.0, 1) == MAX_RETRY_AFTER_S == 60  # at most SageMaker's 60 s
    with pytest.raises(ValueError, match="context"):
        retry_after_estimate(1, 1.0, 0)


def test_service_time_starts_at_the_prior_and_follows_recent_requests() -> None:
    mean = ServiceTime(prior_s=1.0, weight=0.2)
    assert mean.mean_s == 1.0
    mean.observe(3.0)
    assert mean.mean_s == 3.0  # the first measurement replaces the prior
    mean.observe(4.0)
    assert mean.mean_s == pytest.approx(3.2)
    for _ in range(30):
        mean.observe(0.5)
    assert mean.mean_s == pytest.approx(0.5, abs=0.01)


# -- threads


def test_threads_split_the_cores_across_the_contexts() -> None:
    assert [threads_per_context(n, cores=8) for n in (1, 2, 3, 8, 16)] == [8, 4, 2, 1, 1]
    cores = len(os.sched_getaffinity(0))
    kwargs = runtime_from_env({}).llama_kwargs(4096, contexts=2)
    assert kwargs["n_threads"] == kwargs["n_threads_batch"] == max(1, cores // 2)
    with pytest.raises(ValueError, match="context"):
        threads_per_context(0, cores=8)


def test_explicit_threads_win_and_batch_threads_follow_them() -> None:
    kwargs = runtime_from_env({"SM_LLAMA_CPP_THREADS": "3"}).llama_kwargs(4096, contexts=4)
    assert (kwargs["n_threads"], kwargs["n_threads_batch"]) == (3, 3)
    both = runtime_from_env({"SM_LLAMA_CPP_THREADS": "3", "SM_LLAMA_CPP_THREADS_BATCH": "5"})
    assert (both.llama_kwargs(4096, contexts=4)["n_threads"], both.llama_kwargs(4096)["n_threads_batch"]) == (3, 5)


def test_run_identity_reports_the_thread_split(adapter: AppServer) -> None:
    r = post(adapter, DECISION)
    assert r.status_code == 200, r.text
    expected = threads_per_context(CONTEXTS + CHAT_CONTEXTS)
    assert r.json()["x_run"]["hardware"]["threads"] == expected
    ready = next(line for line in adapter.log_lines() if line.get("event") == "ready")
    assert ready["identity"]["hardware"]["threads"] == expected  # type: ignore[index]


# -- 413 on a plain client


def _chunks(size: int) -> Iterable[bytes]:
    for start in range(0, size, 1 << 16):
        yield b" " * min(1 << 16, size - start)


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_body_over_the_limit_gets_its_413_on_a_client_that_sends_it_all_first(
    adapter: AppServer, framing: str
) -> None:
    """urllib writes the whole body before it reads and asks for Connection: close; a 2 MiB body against a 1 MiB
    limit was answered unread, and the socket closed on unread data reset the connection (Broken pipe) instead."""
    size = 2 * BODY_LIMIT
    data: bytes | Iterable[bytes] = b" " * size if framing == "content-length" else _chunks(size)
    request = urllib.request.Request(  # noqa: S310 - the adapter's own http:// URL
        adapter.url + "/invocations", data=data, headers={"Content-Type": "application/json"}, method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=60)  # noqa: S310 - as above
    assert caught.value.code == 413
    assert json.loads(caught.value.read())["detail"]["error_type"] == "payload_too_large"
    assert post(adapter, DECISION).status_code == 200  # and the adapter serves on
