"""What decisionctl reads back per question type: a labeled case's options and expected answer, an answer's
option names, probabilities by name, pick and table row, and the option a final (human) answer names.

The server's side of a type (its options, answer, log fields, pick) is `decision_spec.question_types`; this
side ships with the CLI only. A new type needs its `Readback` here, listed in `READBACKS`
(tests/decisionctl/test_readback.py fails until it is).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Final, Generic, TypeVar

from decision_spec import contract
from decision_spec.contract import QuestionType
from decision_spec.question_types import kind_of
from decision_spec.schemas import AnswerExtensions, ChoiceAnswer, NoulAnswer, ScoreAnswer

NOUL_OPTIONS: Final = ("yes", "no")  # a noul question's options as labeled cases and tables name them

A = TypeVar("A", bound=AnswerExtensions)
D = TypeVar("D", ChoiceAnswer, ScoreAnswer)  # the answers that carry `probabilities` and a `confidence`


class Readback(ABC, Generic[A]):
    """How decisionctl reads one question type's answers and labeled cases."""

    name: ClassVar[QuestionType]

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
        """The name of the option the answer picks (evaluate's rule, picks.predicted_index)."""
        names = self.option_names(answer)
        return names[kind_of(self.name).picked(answer, names)]

    @abstractmethod
    def final_option(self, answer: A, final: Any) -> str:
        """The option a final (human) answer to this answer's question names; ValueError says why it names none."""

    @abstractmethod
    def case_question(self, answer: A, final: str) -> tuple[dict[str, Any], Any]:
        """A labeled case's question fields after its type, and its expected answer, from an answer and the
        option people finally chose (the capture holds no criteria text beyond a score's legend)."""


class NoulReadback(Readback[NoulAnswer]):
    name = "noul"

    def summary(self, answer: NoulAnswer) -> str:
        return NOUL_OPTIONS[kind_of(self.name).picked(answer)]

    def labelled_probabilities(self, answer: NoulAnswer) -> list[tuple[str, float]]:
        return list(zip(NOUL_OPTIONS, kind_of(self.name).distribution(answer), strict=True))

    def case_options(self, criteria: Any) -> tuple[str, ...]:
        return NOUL_OPTIONS

    def expected_index(self, expected: Any, options: Sequence[str]) -> int:
        if not isinstance(expected, bool):
            raise ValueError(f"a noul case expects true or false, got {expected!r}")
        return 0 if expected else 1

    def option_names(self, answer: NoulAnswer) -> tuple[str, ...]:
        return NOUL_OPTIONS

    def named_distribution(self, answer: NoulAnswer) -> dict[str, float]:
        return dict(zip(NOUL_OPTIONS, kind_of(self.name).distribution(answer), strict=True))

    def final_option(self, answer: NoulAnswer, final: Any) -> str:
        value = final.strip().lower() if isinstance(final, str) else final
        if value in (True, "true", "yes", "1"):
            return "yes"
        if value in (False, "false", "no", "0"):
            return "no"
        raise ValueError("a noul final answer is true or false")

    def case_question(self, answer: NoulAnswer, final: str) -> tuple[dict[str, Any], Any]:
        return {}, final == "yes"


class _Distributed(Readback[D]):
    """A type whose answer carries `probabilities` per option and a `confidence`."""

    def contract_confidence(self, answer: D) -> float | None:
        return answer.confidence

    def named_distribution(self, answer: D) -> dict[str, float]:
        return dict(answer.probabilities)


class ChoiceReadback(_Distributed[ChoiceAnswer]):
    name = "choice"

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


class ScoreReadback(_Distributed[ScoreAnswer]):
    name = "score"

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


# In contract.QUESTION_TYPES order, as question_types.KINDS.
READBACKS: Final[dict[str, Readback[Any]]] = {r.name: r for r in (NoulReadback(), ChoiceReadback(), ScoreReadback())}


def readback_of(qtype: str) -> Readback[Any]:
    """How decisionctl reads a question type by its name (KeyError for a name the contract does not define)."""
    return READBACKS[qtype]
