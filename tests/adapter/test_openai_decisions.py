"""OpenAI's Decisions API on the adapter: the real, pinned `openai` SDK (client.decisions.create) against the real
SmolLM2 model over HTTP.

One adapter for the module, with an API key, a 64 KiB body limit, no queue and no wait at admission (a second
request finds no permit: the 429 test), and a served policy with no bands whose out-of-scope threshold is the
least there is, so that a question offered "none of these" (x_out_of_scope) is always declined: the refusal.
The model is close to chance: the tests check shapes, order, typed values, equality with the System One route
and contrasts, never that it picks the right answer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import httpx2
import openai
import pytest
from decision_spec import events
from decision_spec.manifest import read_manifest, write_manifest
from decision_spec.policy import Provenance, seal
from openai.types import Decision

from tests.app_support import AppServer, start_app
from tests.conftest import MODEL_SHA256, copy_model, require_model

pytestmark = pytest.mark.model

KEY = "test-key-30"
AUTH = {"Authorization": f"Bearer {KEY}"}
TICKET = "I was charged twice for my March invoice and the refund has not arrived."
PREDICATE = {"type": "predicate", "name": "refund", "instructions": "Is the customer asking for money back?"}
CHOICE = {
    "type": "choice",
    "name": "team",
    "instructions": "Which team should handle it?",
    "choices": [
        {"value": "billing", "description": "Payments, invoices, refunds"},
        {"value": "technical", "description": "Bugs, outages, log-in problems"},
        {"value": "sales"},
    ],
}
SCORE = {
    "type": "score",
    "name": "urgency",
    "instructions": "How urgent is it?",
    "levels": [{"label": "low"}, {"label": "medium"}, {"label": "high", "description": "money is lost"}],
}
UNNAMED = {"type": "predicate", "instructions": "Is the ticket written in English?"}
# the same three questions in System One's shape, as openai_decisions translates them
SYSTEMONE = {
    "model": "jev-latest",
    "state": TICKET,
    "questions": {
        "refund": {"type": "noul", "instructions": PREDICATE["instructions"]},
        "team": {
            "type": "choice",
            "instructions": CHOICE["instructions"],
            "criteria": {
                "billing": "Payments, invoices, refunds",
                "technical": "Bugs, outages, log-in problems",
                "sales": None,
            },
        },
        "urgency": {
            "type": "score",
            "instructions": SCORE["instructions"],
            "criteria": ["low", "medium", "high: money is lost"],
        },
    },
}


@pytest.fixture(scope="module")
def adapter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppServer]:
    require_model()
    tmp = tmp_path_factory.mktemp("openai")
    model = copy_model(tmp / "model")
    manifest = read_manifest(model / "manifest.json")
    policy = seal(
        model_sha256=MODEL_SHA256,
        calibration_sha256=manifest.calibration_sha256(),
        types={},
        out_of_scope_at_or_above=1e-9,
        provenance=Provenance(
            cases_file="none.jsonl",
            cases_sha256="0" * 64,
            target_accuracy=0.9,
            min_support=1,
            review_accuracy=0.5,
            created="2026-12-01",
        ),
    )
    write_manifest(manifest.model_copy(update={"policy": policy}), model / "manifest.json")
    env = {
        "DECISION_API_KEY": KEY,
        "DECISION_MAX_BODY_BYTES": str(64 * 1024),
        "DECISION_MAX_QUEUE": "0",
        "DECISION_ADMISSION_WAIT_S": "0",
    }
    proc = start_app(model_dir=model, env=env)
    yield proc
    proc.stop()


def client(adapter: AppServer, **options: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{adapter.url}/v1", api_key=options.pop("api_key", KEY), **options)


def ask(adapter: AppServer, questions: list[dict[str, Any]], input: Any = TICKET, **options: Any) -> Decision:
    return client(adapter, **options).decisions.create(model="jev-latest", input=input, questions=questions)  # type: ignore[arg-type]


def test_every_question_type_named_and_unnamed_in_question_order(adapter: AppServer) -> None:
    decision = ask(adapter, [PREDICATE, CHOICE, SCORE, UNNAMED])
    assert isinstance(decision, Decision)
    assert [a.type for a in decision.answers] == ["predicate", "choice", "score", "predicate"]
    assert [a.name for a in decision.answers] == ["refund", "team", "urgency", None]
    predicate, choice, score, unnamed = decision.answers
    assert 0 < predicate.probability < 1 and 0 < unnamed.probability < 1  # type: ignore[union-attr]
    assert [p.value for p in choice.probabilities] == ["billing", "technical", "sales"]  # type: ignore[union-attr]
    probs = [p.probability for p in choice.probabilities]  # type: ignore[union-attr]
    assert sum(probs) == pytest.approx(1, abs=1e-6)
    assert choice.choice == choice.probabilities[probs.index(max(probs))].value  # type: ignore[union-attr]
    levels = score.probabilities  # type: ignore[union-attr]
    assert [(p.label, p.value) for p in levels] == [("low", 0), ("medium", 1), ("high", 2)]
    assert score.score == pytest.approx(sum(p.value * p.probability for p in levels))  # type: ignore[union-attr]
    assert 0 <= score.confidence <= 1 and 0 <= choice.confidence <= 1  # type: ignore[union-attr]
    # this adapter's extensions ride along: the run identity and each answer's x_ fields
    assert decision.x_run["model_sha256"] == MODEL_SHA256  # type: ignore[attr-defined]
    assert len(predicate.x_options_sha256) == 16  # type: ignore[union-attr]
    # the two predicates read the same state differently: not a constant
    assert abs(predicate.probability - unnamed.probability) > 1e-3  # type: ignore[union-attr]


def test_usage_counts_the_state_written_then_read_from_the_cache(adapter: AppServer) -> None:
    state = TICKET + " Order 30-usage."
    first = ask(adapter, [PREDICATE], input=state).usage
    again = ask(adapter, [PREDICATE], input=state).usage
    assert first.input_tokens == again.input_tokens == first.total_tokens > 0
    assert first.output_tokens == 0 and first.output_tokens_details.reasoning_tokens == 0
    written = first.input_tokens_details.cache_write_tokens
    assert 0 < written < first.input_tokens and first.input_tokens_details.cached_tokens == 0
    assert again.input_tokens_details.cached_tokens == written and again.input_tokens_details.cache_write_tokens == 0


def test_choice_values_are_typed(adapter: AppServer) -> None:
    question = {
        "type": "choice",
        "instructions": "Is the invoice paid?",
        "choices": [{"value": "true"}, {"value": True}, {"value": "false"}, {"value": False}],
    }
    (answer,) = ask(adapter, [question]).answers
    values = [p.value for p in answer.probabilities]  # type: ignore[union-attr]
    assert values == ["true", True, "false", False]
    assert [type(v) for v in values] == [str, bool, str, bool]
    assert sum(p.probability for p in answer.probabilities) == pytest.approx(1, abs=1e-6)  # type: ignore[union-attr]
    assert (answer.choice, type(answer.choice)) in [(v, type(v)) for v in values]  # type: ignore[union-attr]
    with pytest.raises(openai.BadRequestError) as err:
        ask(adapter, [{**question, "choices": [{"value": True}, {"value": True}]}])
    assert err.value.body["param"] == "questions.0.choices.1.value"  # type: ignore[index]


def test_same_decision_through_both_apis_gives_equal_probabilities(adapter: AppServer) -> None:
    decision = ask(adapter, [PREDICATE, CHOICE, SCORE])
    systemone = httpx.post(f"{adapter.url}/v1/systemone", json=SYSTEMONE, headers=AUTH, timeout=120)
    assert systemone.status_code == 200, systemone.text
    answers = systemone.json()["answers"]
    predicate, choice, score = decision.answers
    assert predicate.probability == pytest.approx(answers["refund"]["noul"], abs=1e-9)  # type: ignore[union-attr]
    for mine, theirs in ((choice, answers["team"]), (score, answers["urgency"])):
        assert [p.probability for p in mine.probabilities] == pytest.approx(  # type: ignore[union-attr]
            list(theirs["probabilities"].values()), abs=1e-9
        )
        assert mine.x_options_sha256 == theirs["x_options_sha256"]  # type: ignore[union-attr]
    # OpenAI's shape on /invocations (SageMaker's route) is recognized and answered in OpenAI's shape
    body = {"model": "jev-latest", "input": TICKET, "questions": [PREDICATE, CHOICE, SCORE]}
    invoked = httpx.post(f"{adapter.url}/invocations", json=body, headers=AUTH, timeout=120)
    assert invoked.status_code == 200, invoked.text
    parsed = Decision.model_validate(invoked.json())
    assert parsed.answers[0].probability == pytest.approx(predicate.probability, abs=1e-9)  # type: ignore[union-attr]
    lines = [line for line in adapter.log_lines() if line.get("event") == events.DECISION]
    assert {"/v1/decisions", "/v1/systemone", "/invocations"} <= {line["route"] for line in lines}
    assert all(TICKET not in str(line) for line in lines)  # the decision line never carries the text


TRACE: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a support agent for an online shop."},
    {"role": "developer", "content": [{"type": "input_text", "text": "Refunds go through the billing tool."}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": TICKET}]},
    {"type": "function_call", "call_id": "c1", "name": "lookup_invoice", "arguments": '{"month": "March"}'},
    {"type": "function_call_output", "call_id": "c1", "output": "Two payments of 40 EUR on 3 March."},
    {"type": "custom_tool_call", "call_id": "c2", "name": "refund", "input": "40 EUR"},
    {"type": "custom_tool_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "refund sent"}]},
    {"role": "assistant", "content": [{"type": "output_text", "text": "I have refunded the second payment."}]},
    {"role": "user", "content": [{"type": "input_json", "data": {"satisfied": True}}]},
]


def test_an_agent_trace_is_a_state(adapter: AppServer) -> None:
    question = {"type": "predicate", "instructions": "Was the customer's problem solved?"}
    traced = ask(adapter, [question], input=TRACE).answers[0]
    angry = [*TRACE[:-2], {"role": "assistant", "content": "We cannot help with that."}]
    refused = ask(adapter, [question], input=angry).answers[0]
    assert traced.type == refused.type == "predicate"
    assert abs(traced.probability - refused.probability) > 1e-3  # type: ignore[union-attr]
    orphan = [*TRACE[:3], {"type": "function_call_output", "call_id": "c9", "output": "?"}]
    with pytest.raises(openai.BadRequestError) as err:
        ask(adapter, [question], input=orphan)
    assert err.value.body["param"] == "input.3.call_id"  # type: ignore[index]
    image = [{"role": "user", "content": [{"type": "input_image", "image_url": "https://example.com/a.png"}]}]
    with pytest.raises(openai.BadRequestError, match="input_image is not served"):
        ask(adapter, [question], input=image)


def test_a_declined_question_is_a_refusal_beside_answers(adapter: AppServer) -> None:
    declined = {**PREDICATE, "name": "declined", "x_out_of_scope": True}
    refusal, answered = ask(adapter, [declined, PREDICATE]).answers
    assert refusal.type == "refusal" and refusal.name == "declined"
    assert refusal.x_action == "abstain" and refusal.x_action_reason == "out_of_scope"  # type: ignore[union-attr]
    assert not hasattr(refusal, "probability")
    assert answered.type == "predicate" and answered.x_action_reason == "not_measured"  # type: ignore[union-attr]


def test_errors_are_the_sdks_exception_classes(adapter: AppServer) -> None:
    with pytest.raises(openai.AuthenticationError) as auth:
        ask(adapter, [PREDICATE], api_key="wrong")
    assert auth.value.status_code == 401 and auth.value.body["code"] == "authentication_error"  # type: ignore[index]
    with pytest.raises(openai.NotFoundError) as missing:
        client(adapter).decisions.create(model="gpt-6-luna", input=TICKET, questions=[PREDICATE])  # type: ignore[list-item]
    assert missing.value.body["code"] == "model_not_found"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as bad:
        ask(adapter, [])
    assert bad.value.status_code == 400 and bad.value.body["param"] == "questions"  # type: ignore[index]
    with pytest.raises(openai.APIStatusError) as large:
        ask(adapter, [PREDICATE], input="x" * (80 * 1024))
    assert large.value.status_code == 413 and large.value.body["code"] == "payload_too_large"  # type: ignore[index]


def test_a_429_is_a_rate_limit_error_the_sdk_retries_after_retry_after(adapter: AppServer) -> None:
    long_state = {**SYSTEMONE, "state": TICKET * 24}

    def hold() -> threading.Thread:
        def send() -> None:
            httpx.post(f"{adapter.url}/v1/systemone", json=long_state, headers=AUTH, timeout=300)

        thread = threading.Thread(target=send)
        thread.start()
        deadline = time.monotonic() + 30
        while httpx.get(f"{adapter.url}/metrics", headers=AUTH, timeout=30).json()["admitted_now"] < 1:
            assert time.monotonic() < deadline, "the long decision never started"
            time.sleep(0.01)
        return thread

    holder = hold()
    with pytest.raises(openai.RateLimitError) as limited:
        ask(adapter, [PREDICATE], max_retries=0)
    assert int(limited.value.response.headers["retry-after"]) >= 1
    assert limited.value.body["code"] == "overloaded"  # type: ignore[index]
    holder.join()

    seen: list[tuple[float, int, str | None]] = []

    def record(response: httpx2.Response) -> None:
        seen.append((time.monotonic(), response.status_code, response.headers.get("retry-after")))

    sent: list[float] = []
    hooks = {"request": [lambda request: sent.append(time.monotonic())], "response": [record]}
    holder = hold()
    decision = ask(adapter, [PREDICATE], max_retries=5, http_client=httpx2.Client(event_hooks=hooks))
    holder.join()
    assert decision.answers[0].type == "predicate"
    statuses = [status for _, status, _ in seen]
    assert statuses[0] == 429 and statuses[-1] == 200 and set(statuses) == {429, 200}, statuses
    first_429_at, _, retry_after = seen[0]
    assert retry_after is not None and sent[1] - first_429_at >= int(retry_after) - 0.05  # waited as told


def test_langchain_openai_decisions_one_call_per_question_type(adapter: AppServer) -> None:
    from langchain_openai.decisions import Choice, OpenAIDecisions, Predicate, Score

    decisions = OpenAIDecisions(model="jev-latest", base_url=f"{adapter.url}/v1", api_key=KEY)
    sdk = ask(adapter, [PREDICATE, CHOICE, SCORE]).answers
    refund = decisions.invoke(
        {"input": TICKET, "questions": {"refund": Predicate(instructions=PREDICATE["instructions"])}}
    )
    assert refund.predicates["refund"].probability == pytest.approx(sdk[0].probability, abs=1e-9)  # type: ignore[union-attr]
    choices = {c["value"]: c.get("description") for c in CHOICE["choices"]}  # type: ignore[attr-defined]
    team = decisions.invoke(
        {"input": TICKET, "questions": {"team": Choice(instructions=CHOICE["instructions"], choices=choices)}}
    )
    assert list(team.choices["team"].probabilities) == ["billing", "technical", "sales"]
    assert list(team.choices["team"].probabilities.values()) == pytest.approx(
        [p.probability for p in sdk[1].probabilities],  # type: ignore[union-attr]
        abs=1e-9,
    )
    urgency = decisions.invoke(
        {"input": TICKET, "questions": {"urgency": Score(instructions="How urgent is it?", levels=["low", "high"])}}
    )
    assert urgency.scores["urgency"].legend == {0: "low", 1: "high"}
    assert sum(urgency.scores["urgency"].probabilities.values()) == pytest.approx(1, abs=1e-6)
