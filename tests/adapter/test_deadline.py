"""A request's deadline, a JSON Lines body's limits, and the errors named for what they are (issue 43), on the real
SmolLM2 GGUF: the app in this process (create_app over the loaded model service), called over ASGI with concurrent
callers. Short deadlines keep it fast: a body that cannot finish in its 3 s is cut with the answered records kept
and the others named, while /ping and a second caller are answered within bounds; bodies past their record and
token limits are refused before any work; a lone surrogate is a 400 on every route; a chat template's own refusal
is not a token budget; chat's stop list is bounded."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from decision_adapter.app import create_app
from decision_adapter.core.errors import ChatTemplateRefused
from decision_adapter.core.settings import AdapterSettings, RuntimeSettings
from decision_adapter.loading import load_service
from decision_adapter.runtime import LlamaRuntime
from decision_adapter.service import ModelService

from tests.conftest import MODEL_DIR, MODEL_FILE, require_model

pytestmark = [pytest.mark.model, pytest.mark.anyio]
TIMEOUT_S = 3.0
JSONL = {"content-type": "application/jsonlines"}
NOUL = {"type": "noul", "instructions": "Is this urgent?"}
CHOICE = {"type": "choice", "instructions": "Which team?", "criteria": {"Billing": None, "Sales": None, "Tech": None}}


@pytest.fixture(scope="module")
def service() -> Iterator[ModelService]:
    require_model()
    settings = AdapterSettings(
        model_dir=MODEL_DIR,
        request_timeout_s=TIMEOUT_S,
        max_body_records=25,
        max_body_tokens=2000,
        chat_contexts=1,
        admission_wait_s=10,
    )
    loaded = load_service(settings, RuntimeSettings(n_threads=2))
    yield loaded
    loaded.close()


@pytest.fixture
async def client(service: ModelService) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(service.settings, RuntimeSettings(), service)
    app.state.service = service  # what the lifespan hook holds; ASGITransport runs no lifespan
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://adapter", timeout=60) as c:
        yield c


def record(i: int, state: str) -> str:
    return json.dumps({"id": f"r{i}", "state": state, "questions": {"urgent": NOUL, "team": CHOICE}})


def ticket(i: int) -> str:
    """A distinct state of about 60 tokens: each record prefills its own."""
    return f"Ticket {i}: I was charged twice for order {1000 + i} this month and the refund has not arrived yet. " * 3


async def test_a_body_cut_at_its_deadline_keeps_its_answers_and_names_the_rest(client: httpx.AsyncClient) -> None:
    # record 0's state is prefilled once before the body (the state cache keeps it), so the body's first record
    # costs its questions only and finishes well inside the deadline even on a loaded machine; the 19 after it are
    # distinct states that cannot all finish in 3 s
    t0 = time.perf_counter()
    warm = await client.post("/v1/systemone", json={"state": ticket(0), "questions": {"urgent": NOUL, "team": CHOICE}})
    warm_took = time.perf_counter() - t0
    assert warm.status_code == 200, warm.text
    body = "\n".join(record(i, ticket(i)) for i in range(20)).encode()
    pings: list[float] = []
    done = asyncio.Event()

    async def ping_meanwhile() -> None:
        while not done.is_set():
            t0 = time.perf_counter()
            assert (await client.get("/ping")).status_code == 200
            pings.append(time.perf_counter() - t0)
            await asyncio.sleep(0.05)

    async def second_caller() -> tuple[httpx.Response, float]:
        await asyncio.sleep(0.3)  # the body holds the one decision context by now
        t0 = time.perf_counter()
        r = await client.post("/v1/systemone", json={"state": "Where is my parcel?", "questions": {"q": NOUL}})
        return r, time.perf_counter() - t0

    async def the_body() -> tuple[httpx.Response, float]:
        t0 = time.perf_counter()
        try:
            r = await client.post("/invocations", content=body, headers=JSONL)
        finally:
            done.set()
        return r, time.perf_counter() - t0

    (r, took), (second, second_took), _ = await asyncio.gather(the_body(), second_caller(), ping_meanwhile())
    assert r.status_code == 200, r.text
    lines = [json.loads(line) for line in r.text.splitlines()]
    assert [line["id"] for line in lines] == [f"r{i}" for i in range(20)]  # one line per record, in order
    answered = [line["id"] for line in lines if "answers" in line]
    cut = [line for line in lines if "error" in line]
    assert answered and cut, (answered, len(cut), f"record 0's state alone took {warm_took:.2f} s")  # some kept
    assert all(c["error"]["error_type"] == "deadline_exceeded" and c["error"]["status"] == 504 for c in cut)
    assert all(set(line["answers"]) == {"urgent", "team"} for line in lines if "answers" in line)  # whole answers
    assert took < TIMEOUT_S + 2.0, took  # stopped at its deadline, within one unit of work
    # the second caller waited behind the body for the context, bounded by its own deadline
    assert second.status_code in (200, 504), second.text
    assert second_took < TIMEOUT_S + 2.0, second_took
    if second.status_code == 504:
        assert second.json()["detail"]["error_type"] == "deadline_exceeded"
    assert pings and max(pings) < 0.5, max(pings)  # the event loop answered /ping all along
    print(
        f"\nbody: {len(answered)} answered, {len(cut)} cut, {took:.2f} s; second caller {second.status_code} in "
        f"{second_took:.2f} s; /ping worst {max(pings) * 1e3:.0f} ms over {len(pings)} polls"
    )


async def test_a_body_past_its_limits_is_refused_before_any_work(client: httpx.AsyncClient) -> None:
    too_many = "\n".join(record(i, "short") for i in range(26)).encode()
    t0 = time.perf_counter()
    r = await client.post("/invocations", content=too_many, headers=JSONL)
    assert r.status_code == 413 and r.json()["detail"]["error_type"] == "request_limit_exceeded"
    assert "at most 25" in r.text and "DECISION_MAX_BODY_RECORDS" in r.text
    too_long = "\n".join(record(i, ticket(i) * 30) for i in range(10)).encode()  # 90 KB of distinct states
    r = await client.post("/invocations", content=too_long, headers=JSONL)
    assert r.status_code == 413 and r.json()["detail"]["error_type"] == "token_budget_exceeded"
    assert "DECISION_MAX_BODY_TOKENS" in r.text and "at most 2000" in r.text
    assert time.perf_counter() - t0 < 1.0  # refused from counts and characters, nothing evaluated
    shared = "\n".join(record(i, ticket(0) * 30) for i in range(10)).encode()  # one state for all: counted once
    r = await client.post("/invocations", content=shared, headers=JSONL)
    assert r.status_code == 200, r.text  # answered (or cut at its deadline record by record), not refused
    openapi = (await client.get("/openapi.json")).json()
    for name in ("DECISION_MAX_BODY_RECORDS", "DECISION_MAX_BODY_TOKENS", "DECISION_REQUEST_TIMEOUT_S"):
        assert name in openapi["info"]["description"]


SURROGATE = '"x\\ud800y"'  # a lone surrogate, as JSON's escape carries it


async def test_a_lone_surrogate_is_a_400_on_every_route(client: httpx.AsyncClient) -> None:
    decision = f'{{"state": {SURROGATE}, "questions": {{"q": {{"type": "noul"}}}}}}'
    in_question = f'{{"state": "ok", "questions": {{"q": {{"type": "noul", "instructions": {SURROGATE}}}}}}}'
    predicate = '{"type": "predicate", "instructions": "Urgent?"}'
    openai = f'{{"model": "jev-latest", "input": {SURROGATE}, "questions": [{predicate}]}}'
    chat = f'{{"messages": [{{"role": "user", "content": {SURROGATE}}}], "max_tokens": 1}}'
    json_type = {"content-type": "application/json"}
    for route, body in [
        ("/v1/systemone", decision),
        ("/v1/systemone", in_question),
        ("/invocations", decision),
        ("/v1/decisions", openai),
        ("/invocations", openai),
        ("/v1/chat/completions", chat),
        ("/invocations", chat),
    ]:
        r = await client.post(route, content=body, headers=json_type)
        assert r.status_code == 400, (route, r.status_code, r.text)
        assert "invalid_text" in r.text and "surrogate" in r.text, (route, r.text)
    r = await client.post("/invocations", content=(decision + "\n" + record(1, "fine")).encode(), headers=JSONL)
    first, second = (json.loads(line) for line in r.text.splitlines())
    assert first["error"]["error_type"] == "invalid_text" and first["error"]["status"] == 400
    assert "answers" in second  # the other record is answered


async def test_chat_stops_at_its_deadline_and_its_stop_list_is_bounded(client: httpx.AsyncClient) -> None:
    t0 = time.perf_counter()
    # about 6,000 prompt tokens: seconds of prefill on the chat context's thread, checked a 512-token chunk at a time
    long = {"messages": [{"role": "user", "content": "word " * 6000}], "max_tokens": 4000, "seed": 1}
    r = await client.post("/v1/chat/completions", json={**long, "stop": ["NEVER"]})
    assert r.status_code == 504 and r.json()["detail"]["error_type"] == "deadline_exceeded", r.text[:300]
    assert time.perf_counter() - t0 < TIMEOUT_S + 5.0  # the deadline, and at most the chunk under way
    long = {"messages": [{"role": "user", "content": "Count to 3."}], "seed": 1}
    for stop in (["a", "b", "c", "d", "e"], ["x" * 65]):
        r = await client.post("/v1/chat/completions", json={**long, "max_tokens": 1, "stop": stop})
        assert r.status_code == 422, r.text
    r = await client.post("/v1/chat/completions", json={**long, "max_tokens": 2, "stop": ["a", "b", "c", "d"]})
    assert r.status_code == 200, r.text


def test_a_templates_own_refusal_is_named_as_such() -> None:
    """Not a token budget (what every ValueError was reported as): the real llama-cpp-python chat path, with a
    template that refuses as chat templates do (`raise_exception`, e.g. roles out of order)."""
    require_model()
    from llama_cpp import Llama
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    refusing = Jinja2ChatFormatter(
        template="{% if messages[0]['role'] != 'system' %}{{ raise_exception('a system turn must come first') }}"
        "{% endif %}{% for m in messages %}{{ m['content'] }}{% endfor %}",
        eos_token="</s>",
        bos_token="<s>",
    )
    llm = Llama(
        str(MODEL_DIR / MODEL_FILE), n_ctx=256, n_threads=2, chat_handler=refusing.to_chat_handler(), verbose=False
    )
    try:
        rt = LlamaRuntime(llm)
        with pytest.raises(ChatTemplateRefused, match="a system turn must come first"):
            rt.chat_completion(messages=[{"role": "user", "content": "hi"}], max_tokens=1)
        answered: Any = rt.chat_completion(messages=[{"role": "system", "content": "hi"}], max_tokens=1)
        assert answered["choices"]
    finally:
        llm.close()
