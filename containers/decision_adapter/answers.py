"""A decision answered before any dialect's shape (`Answered`: each question's scored options and, under a served
threshold policy, its verdict; the outcome, the run, the latency), the x_ fields every dialect's answer carries, and
System One's response rendered from it (each answer in its type's shape, from question_types.py); OpenAI's is
rendered from the same by openai_decisions.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from decision_spec import contract
from decision_spec.policy import Policy, Verdict, verdict
from decision_spec.question_types import kind_of
from decision_spec.schemas import AnyQuestion, DecisionResponse, RequestRun, Timings, Usage

from .outcomes import DecisionOutcome, Scored


@dataclass(frozen=True)
class Answered:
    """One decision answered: what every dialect's response and the decision log line are made from."""

    model: str  # the served model's name, as responses report it
    questions: dict[str, AnyQuestion]  # in the request's order
    outcome: DecisionOutcome
    verdicts: dict[str, Verdict]  # question id -> its action and reason under the served policy; empty without one
    extensions: dict[str, dict[str, Any]]  # question id -> its x_ fields, the same in every dialect (made once)
    run: RequestRun
    latency_ms: float
    shared: bool = False  # a shared endpoint withholds what tells whether another caller's state was evaluated first

    def timings(self) -> Timings | None:
        """x_timing_ms, withheld where the endpoint is shared."""
        return None if self.shared else Timings(**self.outcome.timings_ms, total=round(self.latency_ms, 2))

    def evaluated_tokens(self) -> int | None:
        """x_evaluated_tokens, withheld where the endpoint is shared."""
        return None if self.shared else self.outcome.evaluated_tokens


def answered(
    *,
    model: str,
    questions: dict[str, AnyQuestion],
    outcome: DecisionOutcome,
    run: RequestRun,
    latency_ms: float,
    shared: bool = False,
    policy: Policy | None = None,
    min_label_mass: float | None = None,
) -> Answered:
    """The outcome with each answer's verdict under `policy` (`min_label_mass`: the environment's minimum, which
    overrides the policy's)."""
    verdicts = {}
    if policy is not None:
        for qid, question in questions.items():
            scored = outcome.answers[qid]
            verdicts[qid] = verdict(
                policy,
                question.type,
                scored.probs,
                options_sha256=scored.options_sha256,
                label_mass=scored.label_mass,
                min_label_mass=min_label_mass,
                out_of_scope=scored.out_of_scope,
                input_flags=scored.input_flags,
            )
    extensions = {qid: _extensions(q, outcome.answers[qid], verdicts.get(qid)) for qid, q in questions.items()}
    return Answered(model, questions, outcome, verdicts, extensions, run, latency_ms, shared)


def _extensions(question: AnyQuestion, scored: Scored, taken: Verdict | None) -> dict[str, Any]:
    """One answer's x_ fields (schemas.AnswerExtensions), the same in every dialect."""
    extensions: dict[str, Any] = {
        "x_margin": round(contract.margin(scored.probs), 6),
        "x_options_sha256": scored.options_sha256,
        "x_orders": scored.orders,
        "x_orders_read": scored.orders_read or None,
        "x_label_mass": scored.label_mass,
        "x_out_of_scope": scored.out_of_scope,
        "x_input_flags": list(scored.input_flags) or None,
    }
    if question.x_slot_probabilities:
        extensions["x_slot_probabilities"] = scored.slot_probabilities
    if taken is not None:
        extensions |= {"x_action": taken.action, "x_action_reason": taken.reason}
    return extensions


def decision_response(answered: Answered) -> DecisionResponse:
    """System One's response (decision-api.md, Response): answers in the request's question order."""
    outcome = answered.outcome
    return DecisionResponse(
        model=answered.model,
        answers={
            qid: kind_of(q.type).answer(
                q, outcome.answers[qid].keys, outcome.answers[qid].probs, answered.extensions[qid]
            )
            for qid, q in answered.questions.items()
        },
        usage=Usage(input_tokens=outcome.input_tokens),
        x_run=answered.run,
        x_timing_ms=answered.timings(),
        x_evaluated_tokens=answered.evaluated_tokens(),
    )
