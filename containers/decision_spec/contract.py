"""The decision API contract as data and pure functions: no I/O.

Limits, answer shapes and the confidence formulas of docs/decision-api (jevcompat's spec). The
server computes its answers with these functions and the tests check the server's answers with them.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from typing import Any, Literal, Protocol, get_args

# The question types, named once; each is defined in question_types.py (its models are in schemas.py).
QuestionType = Literal["noul", "choice", "score"]
QUESTION_TYPES: tuple[str, ...] = get_args(QuestionType)
# What an answer is, as the modules that read a pick dispatch on it (each kind says its own, question_types.py).
# categorical: one softmax over the declared options and one picked index; every type today.
AnswerShape = Literal["categorical"]
ANSWER_SHAPES: tuple[str, ...] = get_args(AnswerShape)
# Each question type's answer shape, once: its kind's answer_shape (question_types.py) and the stacks' decision-shift
# alarms (which shapes can route) read it here.
SHAPE_OF_TYPE: dict[str, AnswerShape] = {"noul": "categorical", "choice": "categorical", "score": "categorical"}
MIN_CHOICE_OPTIONS, MAX_CHOICE_OPTIONS = 2, 255
MAX_QUESTIONS = 400  # questions in one request, on every route: OpenAI's own cap (DECISION_MAX_QUESTIONS lowers it)
SINGLE_LABEL_MAX = 26  # options labelled by one letter each (A..Z); beyond, two-letter codes
# A JSON Lines record's id as the caller wrote it (echoed on its answer line): any JSON scalar.
RecordId = str | int | float | bool | None
# The flags an answer's caller text can raise (x_input_flags; input_flags.py raises them, a policy reviews them).
InputFlag = Literal["control_strings", "addressed_to_classifier", "instructs_decider"]
INPUT_FLAGS: tuple[InputFlag, ...] = ("control_strings", "addressed_to_classifier", "instructs_decider")
# The flags a new policy reviews unless told otherwise (--review-input-flags): all of them, since no prompt boundary
# kept the decider from obeying caller text (docs/security.md); `none` opts out.
DEFAULT_REVIEW_INPUT_FLAGS: tuple[InputFlag, ...] = INPUT_FLAGS
MIN_SCORE_LEVELS, MAX_SCORE_LEVELS = 2, 10
MAX_INTERCEPT = 20.0  # |b| of a yes/no intercept: a shift beyond it says yes (or no) whatever the model read
DEFAULT_MODEL_ALIAS = "jev-latest"
# DECISION_STATE_BOUNDARY: how the generic prompt marks the state as data (prompting/boundary.py says each)
StateBoundary = Literal["off", "tagged", "datamarked", "sandwiched", "spotlit"]
STATE_BOUNDARIES: tuple[str, ...] = get_args(StateBoundary)
# DECISION_OPTION_LABELS: what the generic prompt's answer names an option by: a slot letter (letters), or the
# option's own name, scored token by token (names: prompting/generic.py, core/cloze.py)
OptionLabels = Literal["letters", "names"]
OPTION_LABELS: tuple[str, ...] = get_args(OptionLabels)
SUM_TOLERANCE = 1e-6
# A confidence equal to a threshold is at or above it (the policy's bands and evaluate's coverage grid alike).
TOLERANCE = 1e-12

# The actions a threshold policy gives an answer and the reasons it gives (the answers' `x_action` fields).
Action = Literal["automate", "review", "abstain"]
# Why an answer got its action: its confidence in its question's own band or in its type's band, too little of
# the model's probability on the labels, the model's pick of "none of these", or no band for its type.
# "confidence_band" is what adapters before per-question bands sent; clients still read it, this one never sends it.
Reason = Literal[
    "question_band", "type_band", "low_label_mass", "out_of_scope", "not_measured", "confidence_band", "input_flagged"
]


class QuestionModel(Protocol):
    """A question as its request model (schemas.AnyQuestion): what `options_hash` reads."""

    def model_dump(self, *, mode: str) -> dict[str, Any]: ...


def options_hash(question: QuestionModel) -> str:
    """A hash of what defines the options (type, instructions, criteria): changed wording = changed hash."""
    canon = json.dumps(question.model_dump(mode="json"), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()[:16]


def choice_confidence(probs: Sequence[float]) -> float:
    """(m - 1/n) / (1 - 1/n), m the top probability of n options."""
    n = len(probs)
    if n <= 1:
        return 1.0
    return clamp01((max(probs) - 1 / n) / (1 - 1 / n))


def uniform_spread(n: int) -> float:
    """D = (1/n) sum_i |i - (n-1)/2|: the mean distance from the centre of a uniform distribution."""
    return sum(abs(i - (n - 1) / 2) for i in range(n)) / n


def score_mode(probs: Sequence[float]) -> int:
    return max(range(len(probs)), key=lambda i: probs[i])


def score_confidence(probs: Sequence[float]) -> float:
    """max(0, 1 - sum_i p_i |i - k| / D) with k the mode."""
    n = len(probs)
    if n <= 1:
        return 1.0
    k = score_mode(probs)
    spread = sum(p * abs(i - k) for i, p in enumerate(probs))
    return clamp01(1 - spread / uniform_spread(n))


def score_expectation(probs: Sequence[float]) -> float:
    return sum(i * p for i, p in enumerate(probs))


def margin(probs: Sequence[float]) -> float:
    """Top probability minus the runner-up: the number applications route narrow calls on."""
    top = sorted(probs, reverse=True)
    return top[0] - (top[1] if len(top) > 1 else 0.0)


def shift_log_odds(first: float, second: float, intercept: float) -> tuple[float, float]:
    """Two probabilities summing to 1 with `intercept` added to the log-odds of the first over the second (a yes/no
    answer's intercept: yes' = sigmoid(log(yes / no) + b)); a probability of 0 or 1 stays so. The one definition the
    engine applies and decisionctl fits by, in floats: sigmoid(z) as exp(-logaddexp(0, -z)), numerically stable."""
    if first <= 0.0 or second <= 0.0:
        return (0.0, 1.0) if first <= 0.0 else (1.0, 0.0)
    z = math.log(first) - math.log(second) + intercept
    return math.exp(-_softplus(-z)), math.exp(-_softplus(z))


def _softplus(x: float) -> float:
    """log(1 + exp(x)) without overflow."""
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


def clamp01(x: float) -> float:
    return min(1.0, max(0.0, x))


def is_distribution(probs: Sequence[float], tol: float = SUM_TOLERANCE) -> bool:
    return all(math.isfinite(p) and 0.0 <= p <= 1.0 for p in probs) and abs(sum(probs) - 1.0) <= tol


# DECISION_ORDER_DEBIAS's modes (each one's option orders: decision_adapter.core.signals.option_orders).
DebiasMode = Literal["off", "reverse", "rotations", "adaptive"]
DEBIAS_MODES: tuple[DebiasMode, ...] = ("off", "reverse", "rotations", "adaptive")
_DEBIAS_ALIASES: dict[str, DebiasMode] = {
    "true": "reverse",  # what `true` always meant: the given and the reversed order
    "1": "reverse",
    "on": "reverse",
    "yes": "reverse",
    "false": "off",
    "0": "off",
    "no": "off",
}


def debias_mode(raw: str | bool) -> DebiasMode:
    """DECISION_ORDER_DEBIAS as a mode: off, reverse (also true), rotations, adaptive. ValueError names the choices."""
    if isinstance(raw, bool):
        return "reverse" if raw else "off"
    low = raw.strip().lower()
    if low in DEBIAS_MODES:
        return low
    if low in _DEBIAS_ALIASES:
        return _DEBIAS_ALIASES[low]
    raise ValueError(f"must be one of {', '.join(DEBIAS_MODES)} (true means reverse, false means off), got {raw!r}")


def picked_probability(qtype: str, probs: Sequence[float]) -> float:
    """The value a policy's thresholds apply to: the probability of the option an answer picks. Every answer shape
    (SHAPE_OF_TYPE) is categorical, whose pick is its most probable option; a new shape says its own here."""
    assert SHAPE_OF_TYPE[qtype] == "categorical"
    return max(probs)
