"""Each question type defined once: its models, its options, its answer, the confidence a policy reads, its
decision-log fields, and how an answer is read back (decisionctl's labeled cases, tables and captures).

The engine, the prompt schemes, the policy, the handlers and decisionctl look a type up here (`kind_of`) instead
of branching on its name. A new type: its name in `contract.QuestionType` (with its limits and confidence formula),
its request and answer models in `schemas.py`, and its `QuestionKind` here, listed in `KINDS` (docs/architecture.md
lists the files).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Generic, TypeVar

import numpy as np
from pydantic import BaseModel

from . import contract
from .contract import QUESTION_TYPES, AnswerShape, QuestionType
from .schemas import (
    AnswerExtensions,
    ChoiceAnswer,
    ChoiceQuestion,
    NoulAnswer,
    NoulQuestion,
    ScoreAnswer,
    ScoreQuestion,
    Text,
)

NOUL_OPTIONS: Final = ("yes", "no")  # a noul question's options as labeled cases and tables name them


@dataclass(frozen=True)
class Option:
    """One declared option: `key` names it in the answer, `text` shows it in the generic prompt, and
    `description` is the request's criterion as sent (what a GGUF's own template is given)."""

    key: str
    text: str
    description: Text | None


def render_text(value: Text | None) -> str:
    """Strings as they are; objects and arrays as compact JSON (structured text is model input too)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


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
    def log_fields(self, answer: A) -> dict[str, Any]:
        """What the decision log line says of the answer, after its id, type, margin and options hash."""

    def picked_probability(self, probs: Sequence[float]) -> float:
        """The value a policy's thresholds apply to: the probability of the option the answer picks."""
        return max(probs)

    def pick(self, probs: Sequence[float]) -> int:
        """The option a probability vector picks: the most probable (the first of equals)."""
        return contract.score_mode(probs)

    @abstractmethod
    def distribution(self, answer: A, options: Sequence[str] | None = None) -> list[float]:
        """The answer's probabilities in `options` order (its own where None)."""

    @abstractmethod
    def picked(self, answer: A, options: Sequence[str] | None = None) -> int:
        """The place, among `options` (its own where None), of the option the answer picks."""

    def contract_confidence(self, answer: A) -> float | None:
        """The answer's own `confidence` field; None where the type has none."""
        return None

    @abstractmethod
    def summary(self, answer: A) -> str:
        """The answer in a few words, as decisionctl's answer table shows it."""

    @abstractmethod
    def labelled_probabilities(self, answer: A) -> list[tuple[str, float]]:
        """Each option's name (a level's text) and probability, in the order decisionctl's answer table shows."""

    @abstractmethod
    def case_options(self, criteria: Any) -> tuple[str, ...]:
        """A labeled case's option names from its question's criteria; ValueError where they cannot be asked."""

    @abstractmethod
    def expected_index(self, expected: Any, options: Sequence[str]) -> int:
        """The place of a labeled case's expected answer among its options; ValueError where it names none."""

    @abstractmethod
    def option_names(self, answer: A) -> tuple[str, ...]:
        """The answer's option names in the order labeled cases use (decisionctl's captures and outcomes)."""

    @abstractmethod
    def named_distribution(self, answer: A) -> dict[str, float]:
        """The answer's probabilities by option name, in the answer's own order."""

    def picked_name(self, answer: A) -> str:
        """The name of the option the answer picks (evaluate's rule, cases.predicted_index)."""
        names = self.option_names(answer)
        return names[self.picked(answer, names)]

    @abstractmethod
    def final_option(self, answer: A, final: Any) -> str:
        """The option a final (human) answer to this answer's question names; ValueError says why it names none."""

    @abstractmethod
    def case_question(self, answer: A, final: str) -> tuple[dict[str, Any], Any]:
        """A labeled case's question fields after its type, and its expected answer, from an answer and the
        option people finally chose (the capture holds no criteria text beyond a score's legend)."""


class NoulKind(QuestionKind[NoulQuestion, NoulAnswer]):
    """Yes or no: the answer is the probability of yes."""

    name = "noul"
    answer_shape = "categorical"
    question_model = NoulQuestion
    answer_model = NoulAnswer
    default_instructions = "Which answer fits the state?"

    def options(self, question: NoulQuestion) -> list[Option]:
        crit = question.criteria
        yes, no = (crit.true, crit.false) if crit else (None, None)
        return [
            Option("true", f"Yes: {render_text(yes)}" if render_text(yes) else "Yes", yes),
            Option("false", f"No: {render_text(no)}" if render_text(no) else "No", no),
        ]

    def answer(
        self, question: NoulQuestion, keys: list[str], probs: list[float], extensions: dict[str, Any]
    ) -> NoulAnswer:
        return NoulAnswer(noul=probs[0], **extensions)

    def log_fields(self, answer: NoulAnswer) -> dict[str, Any]:
        return {"noul": round(answer.noul, 4)}

    def picked_probability(self, probs: Sequence[float]) -> float:
        return max(probs[0], 1.0 - probs[0])

    def pick(self, probs: Sequence[float]) -> int:
        return 0 if probs[0] >= 0.5 else 1

    def distribution(self, answer: NoulAnswer, options: Sequence[str] | None = None) -> list[float]:
        return [answer.noul, 1.0 - answer.noul]

    def picked(self, answer: NoulAnswer, options: Sequence[str] | None = None) -> int:
        return 0 if answer.noul >= 0.5 else 1

    def summary(self, answer: NoulAnswer) -> str:
        return NOUL_OPTIONS[self.picked(answer)]

    def labelled_probabilities(self, answer: NoulAnswer) -> list[tuple[str, float]]:
        return list(zip(NOUL_OPTIONS, self.distribution(answer), strict=True))

    def case_options(self, criteria: Any) -> tuple[str, ...]:
        return NOUL_OPTIONS

    def expected_index(self, expected: Any, options: Sequence[str]) -> int:
        if not isinstance(expected, bool):
            raise ValueError(f"a noul case expects true or false, got {expected!r}")
        return 0 if expected else 1

    def option_names(self, answer: NoulAnswer) -> tuple[str, ...]:
        return NOUL_OPTIONS

    def named_distribution(self, answer: NoulAnswer) -> dict[str, float]:
        return dict(zip(NOUL_OPTIONS, self.distribution(answer), strict=True))

    def final_option(self, answer: NoulAnswer, final: Any) -> str:
        value = final.strip().lower() if isinstance(final, str) else final
        if value in (True, "true", "yes", "1"):
            return "yes"
        if value in (False, "false", "no", "0"):
            return "no"
        raise ValueError("a noul final answer is true or false")

    def case_question(self, answer: NoulAnswer, final: str) -> tuple[dict[str, Any], Any]:
        return {}, final == "yes"


class _Distributed(QuestionKind[Q, D]):
    """A type whose answer carries `probabilities` per option and a `confidence`."""

    def distribution(self, answer: D, options: Sequence[str] | None = None) -> list[float]:
        return [answer.probabilities[name] for name in (answer.probabilities if options is None else options)]

    def contract_confidence(self, answer: D) -> float | None:
        return answer.confidence

    def named_distribution(self, answer: D) -> dict[str, float]:
        return dict(answer.probabilities)


class ChoiceKind(_Distributed[ChoiceQuestion, ChoiceAnswer]):
    """One of N named options."""

    name = "choice"
    answer_shape = "categorical"
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
            choice=keys[int(np.argmax(probs))],
            probabilities=dict(zip(keys, probs, strict=True)),
            confidence=contract.choice_confidence(probs),
            **extensions,
        )

    def log_fields(self, answer: ChoiceAnswer) -> dict[str, Any]:
        return {"choice": answer.choice, "confidence": round(answer.confidence, 4)}

    def picked(self, answer: ChoiceAnswer, options: Sequence[str] | None = None) -> int:
        return list(answer.probabilities if options is None else options).index(answer.choice)

    def summary(self, answer: ChoiceAnswer) -> str:
        return answer.choice

    def labelled_probabilities(self, answer: ChoiceAnswer) -> list[tuple[str, float]]:
        return sorted(answer.probabilities.items(), key=lambda kv: -kv[1])

    def case_options(self, criteria: Any) -> tuple[str, ...]:
        limits = (contract.MIN_CHOICE_OPTIONS, contract.MAX_CHOICE_OPTIONS)
        if not isinstance(criteria, dict) or not limits[0] <= len(criteria) <= limits[1]:
            raise ValueError("a choice question needs criteria as an object of 2 to 255 options")
        return tuple(criteria)

    def expected_index(self, expected: Any, options: Sequence[str]) -> int:
        if not isinstance(expected, str) or expected not in options:
            raise ValueError(f"expected {expected!r} is not one of the options {list(options)}")
        return list(options).index(expected)

    def option_names(self, answer: ChoiceAnswer) -> tuple[str, ...]:
        return tuple(answer.probabilities)

    def picked_name(self, answer: ChoiceAnswer) -> str:
        return answer.choice

    def final_option(self, answer: ChoiceAnswer, final: Any) -> str:
        if isinstance(final, str) and final in answer.probabilities:
            return final
        raise ValueError("a choice final answer is one of the question's option names")

    def case_question(self, answer: ChoiceAnswer, final: str) -> tuple[dict[str, Any], Any]:
        return {"criteria": {name: None for name in self.option_names(answer)}}, final


class ScoreKind(_Distributed[ScoreQuestion, ScoreAnswer]):
    """An ordinal score: levels low to high, keyed "0".."n-1"; the answer is the expected level."""

    name = "score"
    answer_shape = "categorical"
    question_model = ScoreQuestion
    answer_model = ScoreAnswer
    levels = True

    def options(self, question: ScoreQuestion) -> list[Option]:
        return [Option(str(i), render_text(level), level) for i, level in enumerate(question.criteria)]

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

    def log_fields(self, answer: ScoreAnswer) -> dict[str, Any]:
        return {"score": answer.score, "confidence": round(answer.confidence, 4)}

    def picked(self, answer: ScoreAnswer, options: Sequence[str] | None = None) -> int:
        return self.pick(self.distribution(answer, options))

    def summary(self, answer: ScoreAnswer) -> str:
        mode = max(answer.probabilities, key=lambda k: answer.probabilities[k]) if answer.probabilities else ""
        return f"{answer.score:.2f} (mode {answer.legend.get(mode, mode)})"

    def labelled_probabilities(self, answer: ScoreAnswer) -> list[tuple[str, float]]:
        ordered = sorted(answer.probabilities.items(), key=lambda kv: -kv[1])
        return [(str(answer.legend.get(k, k)), p) for k, p in ordered]

    def case_options(self, criteria: Any) -> tuple[str, ...]:
        limits = (contract.MIN_SCORE_LEVELS, contract.MAX_SCORE_LEVELS)
        if not isinstance(criteria, list) or not limits[0] <= len(criteria) <= limits[1]:
            raise ValueError("a score question needs criteria as an array of 2 to 10 levels")
        return tuple(str(i) for i in range(len(criteria)))

    def expected_index(self, expected: Any, options: Sequence[str]) -> int:
        if isinstance(expected, bool) or not isinstance(expected, int) or not 0 <= expected < len(options):
            raise ValueError(f"a score case expects a level index 0..{len(options) - 1}, got {expected!r}")
        return expected

    def option_names(self, answer: ScoreAnswer) -> tuple[str, ...]:
        return tuple(sorted(answer.probabilities, key=int))

    def final_option(self, answer: ScoreAnswer, final: Any) -> str:
        if isinstance(final, int) and not isinstance(final, bool) and str(final) in answer.probabilities:
            return str(final)
        if isinstance(final, str):
            if final.strip() in answer.probabilities:
                return final.strip()
            for index, level in answer.legend.items():
                if level == final:
                    return index
        raise ValueError(f"a score final answer is a level index 0..{len(answer.probabilities) - 1} or its text")

    def case_question(self, answer: ScoreAnswer, final: str) -> tuple[dict[str, Any], Any]:
        return {"criteria": [answer.legend.get(k, k) for k in self.option_names(answer)]}, int(final)


# In contract.QUESTION_TYPES order (tests/adapter/test_question_types.py checks every type has its kind and models).
KINDS: Final[dict[str, QuestionKind[Any, Any]]] = {kind.name: kind for kind in (NoulKind(), ChoiceKind(), ScoreKind())}


def kind_of(qtype: str) -> QuestionKind[Any, Any]:
    """The definition of a question type by its name (KeyError for a name the contract does not define)."""
    return KINDS[qtype]


def types_phrase() -> str:
    """The type names as a sentence says them: "noul, choice or score"."""
    return ", ".join(QUESTION_TYPES[:-1]) + " or " + QUESTION_TYPES[-1]
