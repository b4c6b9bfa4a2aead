"""`service.decide_each`, the mini-batch loop behind the JSON Lines route, without a model: the engine is a
stand-in (`ScriptedEngine`, named as such) that answers or raises as scripted, so every kind of per-record
error can be produced; the real-model path is tests/adapter/test_adapter_jsonlines.py."""

from __future__ import annotations

from typing import Any, cast

import pytest
from decision_adapter.asked import Asked, asked_of
from decision_adapter.core.errors import ModelNotServed, RequestLimitExceeded, RuntimeFailure, TokenBudgetExceeded
from decision_adapter.engine import AnswerMemo, DecisionEngine
from decision_adapter.limits import RequestLimits, TokenFloor
from decision_adapter.outcomes import DecisionOutcome, Scored
from decision_adapter.service import decide_each, evaluation_order
from decision_spec.schemas import DecisionRequest

QUESTIONS = {"refund": {"type": "noul", "instructions": "Money back?"}}
# a token reads at most 4 characters: a 100-token context holds 400 at the most
LIMITS = RequestLimits(n_ctx=100, max_request_tokens=400, floor=TokenFloor({}, 4), max_questions=2, max_options=4)


def request(state: Any) -> Asked:
    return asked_of(DecisionRequest.model_validate({"state": state, "questions": QUESTIONS}))


class ScriptedEngine:
    """Stand-in for DecisionEngine: raises the error scripted for a state, else answers and fills the memo."""

    def __init__(self, raises: dict[str, Exception]) -> None:
        self.raises = raises
        self.seen: list[Any] = []

    def score(self, req: Asked, memo: AnswerMemo, deadline: object = None) -> DecisionOutcome:
        self.seen.append(req.state)
        if isinstance(req.state, str) and req.state in self.raises:
            raise self.raises[req.state]
        reused = str(req.state) in memo
        memo[str(req.state)] = Scored(
            keys=["yes", "no"], probs=[0.5, 0.5], options_sha256="0" * 16, suffix_tokens=1, orders=1
        )
        return DecisionOutcome(answers={}, input_tokens=1, evaluated_tokens=0 if reused else 1, state_source="computed")


def test_states_are_evaluated_together_in_order_of_first_appearance() -> None:
    requests = [request(s) for s in ["a", "b", "a", {"k": 1}, "b"]]
    assert evaluation_order(requests) == [0, 2, 1, 4, 3]


def test_a_records_adapter_error_is_its_own_and_the_others_are_answered_with_one_memo() -> None:
    engine = ScriptedEngine({"long": TokenBudgetExceeded("too long"), "odd": ModelNotServed("not here")})
    requests = [request(s) for s in ["a", "long", "b", "a", "odd"]]
    decided = decide_each(cast(DecisionEngine, engine), requests, LIMITS, route="/invocations")
    assert engine.seen == ["a", "a", "long", "b", "odd"]
    assert [type(d.error).__name__ if d.error else None for d in decided] == [
        None, "TokenBudgetExceeded", None, None, "ModelNotServed"
    ]  # fmt: skip
    assert [d.outcome.evaluated_tokens if d.outcome else None for d in decided] == [1, None, 1, 0, None]
    assert len({d.request_id for d in decided}) == len(requests)


def test_a_runtime_failure_fails_the_mini_batch() -> None:
    engine = ScriptedEngine({"b": RuntimeFailure("llama_decode failed")})
    with pytest.raises(RuntimeFailure):
        decide_each(cast(DecisionEngine, engine), [request("a"), request("b")], LIMITS, route="/invocations")


def test_a_record_past_the_limits_is_refused_before_the_engine_sees_it() -> None:
    engine = ScriptedEngine({})
    many = asked_of(
        DecisionRequest.model_validate({"state": "c", "questions": {f"q{i}": QUESTIONS["refund"] for i in range(3)}})
    )
    requests = [request("a"), request("x" * 401), many, request("b")]
    decided = decide_each(cast(DecisionEngine, engine), requests, LIMITS, route="/invocations")
    assert engine.seen == ["a", "b"]  # neither the long state nor the three questions reached the engine
    assert [type(d.error) if d.error else None for d in decided] == [
        None, TokenBudgetExceeded, RequestLimitExceeded, None
    ]  # fmt: skip
    assert "at least 106 tokens" in str(decided[1].error)  # 401 characters and the question's 17
    assert "DECISION_MAX_QUESTIONS" in str(decided[2].error)
