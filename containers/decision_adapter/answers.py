"""The decision response built from the engine's scored options: the one place an answer takes its shape."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from . import contract
from .engine import DecisionOutcome, Scored
from .schemas import (
    Answer,
    AnyQuestion,
    ChoiceAnswer,
    ChoiceQuestion,
    DecisionResponse,
    NoulAnswer,
    NoulQuestion,
    RunRecord,
    ScoreAnswer,
    Timings,
    Usage,
)


def decision_response(
    *, model: str, questions: dict[str, AnyQuestion], outcome: DecisionOutcome, run: RunRecord, total_ms: float
) -> DecisionResponse:
    """The response to one decision request, answers in the request's question order."""
    return DecisionResponse(
        model=model,
        answers={qid: answer_of(outcome.answers[qid], q) for qid, q in questions.items()},
        usage=Usage(input_tokens=outcome.input_tokens),
        x_run=run,
        x_timing_ms=Timings(**outcome.timings_ms, total=round(total_ms, 2)),
        x_evaluated_tokens=outcome.evaluated_tokens,
    )


def answer_of(scored: Scored, question: AnyQuestion) -> Answer:
    """The contract's answer object for one question (decision-api.md, Response)."""
    probs = scored.probs
    extensions: dict[str, Any] = {
        "x_margin": round(contract.margin(probs), 6),
        "x_options_sha256": scored.options_sha256,
        "x_orders": scored.orders,
    }
    if isinstance(question, NoulQuestion):
        return NoulAnswer(noul=probs[0], **extensions)
    if isinstance(question, ChoiceQuestion):
        return ChoiceAnswer(
            choice=scored.keys[int(np.argmax(probs))],
            probabilities=dict(zip(scored.keys, probs, strict=True)),
            confidence=contract.choice_confidence(probs),
            **extensions,
        )
    legend = {
        str(i): (level if isinstance(level, str) else json.dumps(level, ensure_ascii=False))
        for i, level in enumerate(question.criteria)
    }
    return ScoreAnswer(
        score=contract.score_expectation(probs),
        legend=legend,
        probabilities={str(i): p for i, p in enumerate(probs)},
        confidence=contract.score_confidence(probs),
        **extensions,
    )
