"""The decision answered and System One's response rendered from hand-built scored options (answers.answered,
answers.decision_response), per question type; OpenAI's rendered from the same (openai_decisions.decision_of).

No model, no engine: each answer is checked against the contract's pure functions (contract.py, the oracle) and
against one case computed by hand per type. The same responses from the real model are tested in
test_adapter_response.py.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any, cast

import pytest
from decision_adapter import handlers, openai_decisions
from decision_adapter import openai_schemas as oa
from decision_adapter.answers import answered, decision_response
from decision_adapter.asked import asked_of
from decision_adapter.core.settings import AdapterSettings
from decision_adapter.openai_decisions import usage_of
from decision_adapter.outcomes import DecisionOutcome, Scored
from decision_spec import contract
from decision_spec.manifest import calibration_sha256
from decision_spec.policy import Provenance, seal
from decision_spec.schemas import (
    AnyQuestion,
    CalibrationInForce,
    ChoiceAnswer,
    DecisionRequest,
    DecisionResponse,
    Hardware,
    NoulAnswer,
    RequestRun,
    RunIdentity,
    ScoreAnswer,
)

RUN = RequestRun(
    model_file="m.gguf",
    model_sha256="0" * 64,
    model_name="m",
    llama_cpp_python="0.3.36",
    llama_cpp_build="b1",
    adapter="0",
    image_digest="local",
    instance_types="local",
    hardware=Hardware(cpu="cpu", logical_cpus=2, threads=2, machine="x86_64", gpus=[]),
    n_gpu_layers=0,
    prompt_template="generic-v2/plain",
    order_debias=True,
    calibration=CalibrationInForce(source="identity", temperature={"noul": 1.0, "choice": 1.0, "score": 1.0}),
    request_id="r1",
    state_source="computed",
)
TEAM: dict[str, Any] = {"type": "choice", "criteria": {"billing": "payments", "sales": None, "legal": None}}
ANGER: dict[str, Any] = {"type": "score", "criteria": ["Calm", {"level": "cross", "note": "très"}, "Very angry"]}
URGENT: dict[str, Any] = {"type": "noul", "x_slot_probabilities": True}


def scored(keys: list[str], probs: list[float], **extra: Any) -> Scored:
    return Scored(keys, probs, options_sha256="ab" * 8, suffix_tokens=7, orders=2, **extra)


def respond(questions: dict[str, dict[str, Any]], answers: dict[str, Scored], **outcome: Any) -> DecisionResponse:
    parsed: dict[str, AnyQuestion] = dict(
        DecisionRequest.model_validate({"state": "s", "questions": questions}).questions
    )
    decided = DecisionOutcome(
        answers,
        input_tokens=outcome.get("input_tokens", 40),
        evaluated_tokens=outcome.get("evaluated_tokens", 30),
        state_source="computed",
        timings_ms={"tokenize": 0.5, "state": 10.25, "questions": 3.0},
    )
    done = answered(model="m", questions=parsed, outcome=decided, run=RUN, latency_ms=outcome.get("total", 14.0))
    return decision_response(done)


def answer(question: dict[str, Any], keys: list[str], probs: list[float], **extra: Any) -> Any:
    return respond({"q": question}, {"q": scored(keys, probs, **extra)}).answers["q"]


def test_noul_is_the_probability_of_yes_and_has_no_confidence() -> None:
    noul = answer(URGENT, ["true", "false"], [0.8, 0.2], slot_probabilities=[[0.7, 0.3], [0.1, 0.9]])
    assert isinstance(noul, NoulAnswer) and (noul.type, noul.noul) == ("noul", 0.8)
    wire = noul.model_dump(exclude_none=True)
    assert "confidence" not in wire and "probabilities" not in wire
    assert wire["x_slot_probabilities"] == [[0.7, 0.3], [0.1, 0.9]]  # asked for by the question


def test_choice_picks_the_argmax_with_the_contract_confidence() -> None:
    choice = answer(TEAM, ["billing", "sales", "legal"], [0.2, 0.7, 0.1])
    assert isinstance(choice, ChoiceAnswer) and choice.choice == "sales"
    assert choice.probabilities == {"billing": 0.2, "sales": 0.7, "legal": 0.1}
    assert list(choice.probabilities) == ["billing", "sales", "legal"]  # the request's option order
    assert choice.confidence == pytest.approx((0.7 - 1 / 3) / (1 - 1 / 3)) == pytest.approx(0.55)
    assert choice.confidence == contract.choice_confidence([0.2, 0.7, 0.1])
    assert contract.is_distribution(list(choice.probabilities.values()))


def test_a_tie_picks_the_first_declared_option() -> None:
    assert answer(TEAM, ["billing", "sales", "legal"], [0.1, 0.45, 0.45]).choice == "sales"
    uniform = answer(TEAM, ["billing", "sales", "legal"], [1 / 3, 1 / 3, 1 / 3])
    assert uniform.choice == "billing" and uniform.confidence == pytest.approx(0.0, abs=1e-12)
    assert uniform.x_margin == 0.0


def test_score_is_the_expected_level_with_its_legend_and_confidence() -> None:
    score = answer(ANGER, ["0", "1", "2"], [0.1, 0.6, 0.3])
    assert isinstance(score, ScoreAnswer)
    assert score.score == pytest.approx(0 * 0.1 + 1 * 0.6 + 2 * 0.3) == pytest.approx(1.2)
    # mode 1, spread 0.1 * 1 + 0.3 * 1 = 0.4, D = (1 + 0 + 1) / 3: 1 - 0.4 / (2/3) = 0.4
    assert score.confidence == pytest.approx(0.4) and score.confidence == contract.score_confidence([0.1, 0.6, 0.3])
    assert score.probabilities == {"0": 0.1, "1": 0.6, "2": 0.3}
    assert score.legend == {
        "0": "Calm",
        "1": json.dumps({"level": "cross", "note": "très"}, ensure_ascii=False),
        "2": "Very angry",
    }
    assert score.legend["1"] == '{"level": "cross", "note": "très"}'  # a structured level as its JSON text


@pytest.mark.parametrize(
    "probs",
    [[0.25, 0.25, 0.25, 0.25], [0.0, 0.0, 1.0, 0.0], [0.5, 0.0, 0.0, 0.5], [0.05, 0.15, 0.3, 0.5]],
)
def test_score_answers_follow_the_contract_formulas(probs: list[float]) -> None:
    four = {"type": "score", "criteria": ["a", "b", "c", "d"]}
    score = answer(four, ["0", "1", "2", "3"], probs)
    assert score.score == pytest.approx(sum(i * p for i, p in enumerate(probs)))
    assert score.score == contract.score_expectation(probs)
    assert score.confidence == contract.score_confidence(probs)
    assert 0.0 <= score.confidence <= 1.0


def test_every_answer_carries_its_extension_fields() -> None:
    choice = answer(
        TEAM,
        ["billing", "sales", "legal"],
        [0.6123456789, 0.3, 0.0876543211],
        label_mass=0.42,
        out_of_scope=0.05,
        orders_read=["given", "reversed"],
        slot_probabilities=[[0.5, 0.3, 0.2]],
    )
    assert choice.x_margin == round(0.6123456789 - 0.3, 6) == 0.312346
    assert (choice.x_options_sha256, choice.x_orders, choice.x_orders_read) == ("ab" * 8, 2, ["given", "reversed"])
    assert (choice.x_label_mass, choice.x_out_of_scope) == (0.42, 0.05)
    assert choice.x_slot_probabilities is None  # not asked for by this question
    assert (choice.x_action, choice.x_action_reason) == (None, None)  # no policy served
    assert answer(TEAM, ["billing", "sales", "legal"], [0.6, 0.3, 0.1]).x_orders_read is None  # none recorded


def test_the_response_keeps_the_question_order_usage_and_timings() -> None:
    questions = {"urgent": URGENT, "team": TEAM, "anger": ANGER}
    answers = {  # the engine's order need not be the request's
        "anger": scored(["0", "1", "2"], [0.2, 0.5, 0.3]),
        "team": scored(["billing", "sales", "legal"], [0.5, 0.3, 0.2]),
        "urgent": scored(["true", "false"], [0.9, 0.1]),
    }
    response = respond(questions, answers, input_tokens=304, evaluated_tokens=120, total=14.056)
    assert list(response.answers) == ["urgent", "team", "anger"]
    assert [a.type for a in response.answers.values()] == ["noul", "choice", "score"]
    assert (response.model, response.usage.input_tokens, response.usage.output_tokens) == ("m", 304, 0)
    assert response.x_evaluated_tokens == 120 and response.x_run == RUN
    assert response.x_timing_ms is not None
    assert response.x_timing_ms.model_dump() == {"tokenize": 0.5, "state": 10.25, "questions": 3.0, "total": 14.06}
    wire = response.model_dump(mode="json", exclude_none=True)
    assert list(wire["answers"]["team"]) == [
        "type",
        "choice",
        "probabilities",
        "confidence",
        "x_margin",
        "x_options_sha256",
        "x_orders",
    ]
    assert all(k.startswith("x_") for k in list(wire)[3:]) and list(wire)[:3] == ["model", "answers", "usage"]


@pytest.mark.parametrize("shared", [False, True])
def test_a_shared_endpoint_withholds_what_tells_of_other_callers_requests(shared: bool) -> None:
    """handlers.respond on a stand-in for the model service (what respond reads of it: identity, settings, policy),
    then OpenAI's usage of the same outcome: whether the state was evaluated before is withheld when shared."""
    identity = RunIdentity.model_validate(RUN.model_dump(exclude={"request_id", "state_source"}))
    service = SimpleNamespace(
        identity=identity, model_name="m", policy=None, settings=AdapterSettings(shared_endpoint=shared)
    )
    body = DecisionRequest.model_validate({"state": "s", "questions": {"q": TEAM}})
    outcome = DecisionOutcome(
        {"q": scored(["billing", "sales", "legal"], [0.5, 0.3, 0.2])},
        input_tokens=40,
        evaluated_tokens=0,
        state_source="resident",
        timings_ms={"tokenize": 1.0, "state": 0.0, "questions": 9.0},
    )
    done = handlers.respond(
        cast(Any, service), asked_of(body), outcome, request_id="r", route="/v1/systemone", latency_ms=9
    )
    wire = decision_response(done).model_dump(exclude_none=True)
    usage = usage_of(done).input_tokens_details
    if shared:
        assert "state_source" not in wire["x_run"] and "x_timing_ms" not in wire and "x_evaluated_tokens" not in wire
        assert usage.cached_tokens == usage.cache_write_tokens == 0
    else:
        assert wire["x_run"]["state_source"] == "resident" and wire["x_evaluated_tokens"] == 0
        assert usage.cached_tokens == 33  # the state's tokens: the request's 40 less the question's 7
    unshared = handlers.respond(
        cast(Any, SimpleNamespace(**{**vars(service), "settings": AdapterSettings()})),
        asked_of(body),
        outcome,
        request_id="r",
        route="/v1/systemone",
        latency_ms=9,
    )
    assert wire["answers"] == decision_response(unshared).model_dump(exclude_none=True)["answers"]  # never change


def test_openais_answers_are_rendered_from_the_same_decision_as_system_ones() -> None:
    """/v1/decisions renders its answers from the decision answered, not from System One's response (before issue 47
    it translated that response): each carries the same pick, probabilities, confidence and x_ fields as System One's
    answer to the same scored options, under a policy too (a declined question is a refusal)."""
    body = oa.DecisionCreate.model_validate(
        {
            "model": "m",
            "input": "s",
            "questions": [
                {"type": "predicate", "instructions": "Urgent?", "name": "urgent"},
                {"type": "choice", "instructions": "Team?", "choices": [{"value": "billing"}, {"value": True}]},
                {"type": "score", "instructions": "Anger?", "levels": [{"label": "Calm"}, {"label": "Cross"}]},
            ],
        }
    )
    parsed = openai_decisions.parse(body)
    ids = list(parsed.asked.questions)
    assert ids == ["urgent", "#1", "#2"]
    outcome = DecisionOutcome(
        {
            "urgent": scored(["true", "false"], [0.3, 0.7], label_mass=0.9),
            "#1": scored(["billing", "true"], [0.25, 0.75], input_flags=["instructs_decider"]),
            "#2": scored(["0", "1"], [0.4, 0.6]),
        },
        input_tokens=40,
        evaluated_tokens=30,
        state_source="computed",
        timings_ms={"tokenize": 0.5, "state": 10.25, "questions": 3.0},
    )
    declining = seal(
        model_sha256="0" * 64,
        calibration_sha256=calibration_sha256(None),
        types={},
        provenance=Provenance(
            cases_file="c.jsonl",
            cases_sha256="a" * 64,
            target_accuracy=0.9,
            min_support=5,
            review_accuracy=0.5,
            created="2026-12-01",
        ),
        min_label_mass=0.95,
    )
    for policy in (None, declining):
        done = answered(
            model="m", questions=parsed.asked.questions, outcome=outcome, run=RUN, latency_ms=9.0, policy=policy
        )
        system_one = decision_response(done).answers
        openai = openai_decisions.decision_of(parsed, done).answers
        urgent, team, anger = openai
        if policy is None:
            assert isinstance(urgent, oa.OpenAIPredicateAnswer) and urgent.probability == system_one["urgent"].noul
        else:  # too little mass on the labels: the model declined, the policy abstains, OpenAI's answer refuses
            assert (
                isinstance(urgent, oa.OpenAIRefusalAnswer) and system_one["urgent"].x_action_reason == "low_label_mass"
            )
        choice, score = system_one["#1"], system_one["#2"]
        assert isinstance(team, oa.OpenAIChoiceAnswer) and isinstance(choice, ChoiceAnswer)
        assert team.choice is True and choice.choice == "true"  # the typed value of the key System One names
        assert [p.probability for p in team.probabilities] == list(choice.probabilities.values())
        assert team.confidence == choice.confidence
        assert isinstance(anger, oa.OpenAIScoreAnswer) and isinstance(score, ScoreAnswer)
        assert (anger.score, anger.confidence) == (score.score, score.confidence)
        assert [(p.label, p.value, p.probability) for p in anger.probabilities] == [("Calm", 0, 0.4), ("Cross", 1, 0.6)]
        for mine, theirs in zip(openai, system_one.values(), strict=True):
            extensions = {k: v for k, v in theirs.model_dump().items() if k.startswith("x_")}
            assert {k: v for k, v in mine.model_dump().items() if k.startswith("x_")} == extensions
