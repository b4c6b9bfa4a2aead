"""The decision response built from the engine's scored options (each answer in its type's shape, from
question_types.py), and where a served threshold policy gives each answer its action."""

from __future__ import annotations

from typing import Any

from decision_spec import contract
from decision_spec.policy import Policy, verdict
from decision_spec.question_types import kind_of
from decision_spec.schemas import Answer, AnyQuestion, DecisionResponse, RequestRun, Timings, Usage

from .outcomes import DecisionOutcome, Scored


def decision_response(
    *,
    model: str,
    questions: dict[str, AnyQuestion],
    outcome: DecisionOutcome,
    run: RequestRun,
    total_ms: float,
    policy: Policy | None = None,
    min_label_mass: float | None = None,
) -> DecisionResponse:
    """The response to one decision request, answers in the request's question order; with a policy, each
    answer's action (`min_label_mass`: the environment's minimum, which overrides the policy's)."""
    return DecisionResponse(
        model=model,
        answers={
            qid: answer_of(outcome.answers[qid], q, policy=policy, min_label_mass=min_label_mass)
            for qid, q in questions.items()
        },
        usage=Usage(input_tokens=outcome.input_tokens),
        x_run=run,
        x_timing_ms=Timings(**outcome.timings_ms, total=round(total_ms, 2)),
        x_evaluated_tokens=outcome.evaluated_tokens,
    )


def answer_of(
    scored: Scored, question: AnyQuestion, *, policy: Policy | None = None, min_label_mass: float | None = None
) -> Answer:
    """The contract's answer object for one question (decision-api.md, Response)."""
    probs = scored.probs
    extensions: dict[str, Any] = {
        "x_margin": round(contract.margin(probs), 6),
        "x_options_sha256": scored.options_sha256,
        "x_orders": scored.orders,
        "x_orders_read": scored.orders_read or None,
        "x_label_mass": scored.label_mass,
        "x_out_of_scope": scored.out_of_scope,
        "x_input_flags": list(scored.input_flags) or None,
    }
    if question.x_slot_probabilities:
        extensions["x_slot_probabilities"] = scored.slot_probabilities
    if policy is not None:
        taken = verdict(
            policy,
            question.type,
            probs,
            options_sha256=scored.options_sha256,
            label_mass=scored.label_mass,
            min_label_mass=min_label_mass,
            out_of_scope=scored.out_of_scope,
            input_flags=scored.input_flags,
        )
        extensions |= {"x_action": taken.action, "x_action_reason": taken.reason}
    answer: Answer = kind_of(question.type).answer(question, scored.keys, probs, extensions)
    return answer
