"""Each question type defined once: its models, its options, its answer, the confidence a policy reads, its
decision-log fields and its answer shape (what decisionctl reads back of an answer is decisionctl.readback).

The engine, the prompt schemes, the policy, the handlers and decisionctl look a type up here (`kind_of`) instead
of branching on its name. A new type: its name in `contract.QuestionType` (with its limits and confidence formula),
its request and answer models in `schemas.py`, and its `QuestionKind` here, listed in `KINDS`; for OpenAI's
`/v1/decisions` its models in `openai_schemas.py` and their translation in `openai_decisions.py`
(docs/architecture.md lists the six, with decisionctl's readback; tests/test_change_counts.py makes the change).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Final, Generic, TypeVar

from pydantic import BaseModel

from decision_spec import contract
from decision_spec.contract import QUESTION_TYPES, SHAPE_OF_TYPE, AnswerShape, QuestionType
from decision_spec.schemas import (
    AnswerExtensions,
    AnyQuestion,
    ChoiceAnswer,
    ChoiceQuestion,
    NoulAnswer,
    NoulQuestion,
    Option,
    ScoreAnswer,
    ScoreQuestion,
    render_text,
)

Q = TypeVar("Q", bound=BaseModel)
A = TypeVar("A", bound=AnswerExtensions)
D = TypeVar("D", ChoiceAnswer, ScoreAnswer)  # the answers that carry `probabilities` and a `confidence`


class QuestionKind(ABC, Generic[Q, A]):
    """One question type. Probability vectors are over its declared options in their declared order."""

    name: ClassVar[QuestionType]
    answer_shape: ClassVar[AnswerShape]  # what a reader of the pick dispatches on (contract.AnswerShape)
    question_model: ClassVar[type[BaseModel]]
    answer_model: ClassVar[type[AnswerExtensions]]
    default_instructions: ClassVar[str] = "Which option fits best?"  # the generic prompt's, where none is sent
    levels: ClassVar[bool] = False  # options are levels, low to high (the generic prompt names the extremes)

    @abstractmethod
    def options(self, question: Q) -> list[Option]:
        """The options in declared order."""

    @abstractmethod
    def answer(self, question: Q, keys: list[str], probs: list[float], extensions: dict[str, Any]) -> A:
        """The contract's answer object (decision-api.md, Response) from the probabilities of the options `keys`."""

    @abstractmethod
    def log_fields(self, keys: list[str], probs: list[float]) -> dict[str, Any]:
        """What the decision log line says of an answer, from the probabilities of the options `keys`, after its id,
        type, margin and options hash (every dialect's answer is rendered from the same)."""

    def pick(self, probs: Sequence[float]) -> int:
        """The option a probability vector picks: the most probable (the first of equals)."""
        return contract.score_mode(probs)

    @abstractmethod
    def distribution(self, answer: A, options: Sequence[str] | None = None) -> list[float]:
        """The answer's probabilities in `options` order (its own where None)."""

    @abstractmethod
    def picked(self, answer: A, options: Sequence[str] | None = None) -> int:
        """The place, among `options` (its own where None), of the option the answer picks."""


class NoulKind(QuestionKind[NoulQuestion, NoulAnswer]):
    """Yes or no: the answer is the probability of yes."""

    name = "noul"
    answer_shape = SHAPE_OF_TYPE[name]
    question_model = NoulQuestion
    answer_model = NoulAnswer
    default_instructions = "Which answer fits the state?"

    def options(self, question: NoulQuestion) -> list[Option]:
        crit = question.criteria
        yes, no = (crit.true, crit.false) if crit else (None, None)
        return [
            Option("true", f"Yes: {render_text(yes)}" if render_text(yes) else "Yes", yes, name="Yes"),
            Option("false", f"No: {render_text(no)}" if render_text(no) else "No", no, name="No"),
        ]

    def answer(
        self, question: NoulQuestion, keys: list[str], probs: list[float], extensions: dict[str, Any]
    ) -> NoulAnswer:
        return NoulAnswer(noul=probs[0], **extensions)

    def log_fields(self, keys: list[str], probs: list[float]) -> dict[str, Any]:
        return {"noul": round(probs[0], 4)}

    def pick(self, probs: Sequence[float]) -> int:
        return 0 if probs[0] >= 0.5 else 1

    def distribution(self, answer: NoulAnswer, options: Sequence[str] | None = None) -> list[float]:
        return [answer.noul, 1.0 - answer.noul]

    def picked(self, answer: NoulAnswer, options: Sequence[str] | None = None) -> int:
        return 0 if answer.noul >= 0.5 else 1


class _Distributed(QuestionKind[Q, D]):
    """A type whose answer carries `probabilities` per option and a `confidence`."""

    def distribution(self, answer: D, options: Sequence[str] | None = None) -> list[float]:
        return [answer.probabilities[name] for name in (answer.probabilities if options is None else options)]


class ChoiceKind(_Distributed[ChoiceQuestion, ChoiceAnswer]):
    """One of N named options."""

    name = "choice"
    answer_shape = SHAPE_OF_TYPE[name]
    question_model = ChoiceQuestion
    answer_model = ChoiceAnswer

    def options(self, question: ChoiceQuestion) -> list[Option]:
        return [
            Option(name, f"{name}: {render_text(desc)}" if desc is not None else name, desc)
            for name, desc in question.criteria.items()
        ]

    def answer(
        self, question: ChoiceQuestion, keys: list[str], probs: list[float], extensions: dict[str, Any]
    ) -> ChoiceAnswer:
        return ChoiceAnswer(
            choice=keys[self.pick(probs)],
            probabilities=dict(zip(keys, probs, strict=True)),
            confidence=contract.choice_confidence(probs),
            **extensions,
        )

    def log_fields(self, keys: list[str], probs: list[float]) -> dict[str, Any]:
        return {"choice": keys[self.pick(probs)], "confidence": round(contract.choice_confidence(probs), 4)}

    def picked(self, answer: ChoiceAnswer, options: Sequence[str] | None = None) -> int:
        return list(answer.probabilities if options is None else options).index(answer.choice)


class ScoreKind(_Distributed[ScoreQuestion, ScoreAnswer]):
    """An ordinal score: levels low to high, keyed "0".."n-1"; the answer is the expected level."""

    name = "score"
    answer_shape = SHAPE_OF_TYPE[name]
    question_model = ScoreQuestion
    answer_model = ScoreAnswer
    levels = True

    def options(self, question: ScoreQuestion) -> list[Option]:
        levels = question.criteria
        return [Option(str(i), render_text(level), level, name=render_text(level)) for i, level in enumerate(levels)]

    def answer(
        self, question: ScoreQuestion, keys: list[str], probs: list[float], extensions: dict[str, Any]
    ) -> ScoreAnswer:
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

    def log_fields(self, keys: list[str], probs: list[float]) -> dict[str, Any]:
        return {"score": contract.score_expectation(probs), "confidence": round(contract.score_confidence(probs), 4)}

    def picked(self, answer: ScoreAnswer, options: Sequence[str] | None = None) -> int:
        return self.pick(self.distribution(answer, options))


# In contract.QUESTION_TYPES order (tests/adapter/test_question_types.py checks every type has its kind and models).
KINDS: Final[dict[str, QuestionKind[Any, Any]]] = {kind.name: kind for kind in (NoulKind(), ChoiceKind(), ScoreKind())}


def kind_of(qtype: str) -> QuestionKind[Any, Any]:
    """The definition of a question type by its name (KeyError for a name the contract does not define)."""
    return KINDS[qtype]


def options_of(question: AnyQuestion) -> list[Option]:
    """The options in declared order (each type's own): noul is `true` then `false`, score levels are keyed
    "0".."n-1"."""
    options: list[Option] = kind_of(question.type).options(question)
    return options


def types_phrase() -> str:
    """The type names as a sentence says them: "noul, choice or score"."""
    return ", ".join(QUESTION_TYPES[:-1]) + " or " + QUESTION_TYPES[-1]
