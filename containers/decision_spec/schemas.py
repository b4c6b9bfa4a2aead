"""Request and response models of the decision API (decision-api.md) and of /v1/models, in one place.

Validation failures become a 422 `{"detail": [{"loc": ["body", ...], "msg", "type"}]}`, the contract's
shape (app.py's handler, which leaves out FastAPI's echo of the input).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, field_validator, model_serializer

from decision_spec.contract import (
    DEFAULT_MODEL_ALIAS,
    MAX_CHOICE_OPTIONS,
    MAX_QUESTIONS,
    MAX_SCORE_LEVELS,
    MIN_CHOICE_OPTIONS,
    MIN_SCORE_LEVELS,
    Action,
    DebiasMode,
    InputFlag,
    OptionLabels,
    Reason,
    StateBoundary,
)

# Text the caller may send wherever the contract says "description": a string, an object or an array.
Text = str | dict[str, Any] | list[Any]


def render_text(value: Text | None) -> str:
    """Strings as they are; objects and arrays as compact JSON (structured text is model input too)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


@dataclass(frozen=True)
class Option:
    """One declared option of a question (its type's, question_types.py): `key` names it in the answer, `text`
    shows it in the generic prompt, `description` is the request's criterion as sent (what a GGUF's own
    template is given), and `name` is what the model answers with where options are named (the key where None)."""

    key: str
    text: str
    description: Text | None
    name: str | None = None

    @property
    def answered_as(self) -> str:
        """The option's name in an answer that names options (DECISION_OPTION_LABELS=names)."""
        return self.key if self.name is None else self.name


class NoulCriteria(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    true: Text | None = None
    false: Text | None = None


# Opt-in per question: offer the model a "none of these" option too and report its probability as the answer's
# x_out_of_scope. Not part of what defines the options (model_dump leaves it out, so x_options_sha256 keeps).
OutOfScope = Annotated[bool, Field(False, exclude=True)]
# Opt-in per question: report each order's raw slot distribution (before the slot prior and the temperature) as
# x_slot_probabilities, what `decisionctl fit-prior` fits from. Not part of what defines the options either.
SlotProbabilities = Annotated[bool, Field(False, exclude=True)]


class NoulQuestion(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    type: Literal["noul"]
    instructions: Text | None = None
    criteria: NoulCriteria | None = None
    x_out_of_scope: OutOfScope = False
    x_slot_probabilities: SlotProbabilities = False


class ChoiceQuestion(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    type: Literal["choice"]
    instructions: Text | None = None
    criteria: Annotated[dict[str, Text | None], Field(min_length=MIN_CHOICE_OPTIONS, max_length=MAX_CHOICE_OPTIONS)]
    x_out_of_scope: OutOfScope = False
    x_slot_probabilities: SlotProbabilities = False


class ScoreQuestion(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    type: Literal["score"]
    instructions: Text | None = None
    criteria: Annotated[list[Text], Field(min_length=MIN_SCORE_LEVELS, max_length=MAX_SCORE_LEVELS)]
    x_out_of_scope: OutOfScope = False
    x_slot_probabilities: SlotProbabilities = False


AnyQuestion = NoulQuestion | ChoiceQuestion | ScoreQuestion
Question = Annotated[AnyQuestion, Field(discriminator="type")]


class DecisionRequest(BaseModel):
    """Unknown top-level fields are ignored (the contract says so)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    model: str = DEFAULT_MODEL_ALIAS
    state: Text
    questions: Annotated[dict[str, Question], Field(min_length=1, max_length=MAX_QUESTIONS)]

    @field_validator("questions")
    @classmethod
    def _ids_non_empty(cls, v: dict[str, Question]) -> dict[str, Question]:
        if any(qid == "" for qid in v):
            raise ValueError("question ids must be non-empty strings")
        return v


# The roles a chat template knows: a role is compared and rendered by the template as its own text, so it is not
# caller text, and anything else is refused.
ChatRole = Literal["system", "developer", "user", "assistant", "tool", "function"]


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: ChatRole
    content: str | list[Any] | None = None

    @field_validator("content")
    @classmethod
    def _text_only(cls, value: str | list[Any] | None) -> str:
        """OpenAI's forms of text content, as the one string a chat template renders: null is empty (an
        assistant turn that only called tools), and an array of parts is its text parts joined by newlines.
        Other parts (images, audio) are not served: a 422 names them."""
        if value is None:
            return ""
        if isinstance(value, str):
            return value
        texts = []
        for part in value:
            if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise ValueError(f"only text content parts are served, not {kind!r}")
            texts.append(part["text"])
        return "\n".join(texts)


# OpenAI's bound on stop sequences; llama-cpp-python compares each stop's every prefix with the text's end after each
# generated token, so a stop's length is bounded too.
MAX_STOP_SEQUENCES, MAX_STOP_CHARS = 4, 64
StopText = Annotated[str, Field(min_length=1, max_length=MAX_STOP_CHARS)]


class ChatCompletionRequest(BaseModel):
    """The OpenAI chat-completions subset the stock DLC path serves on /invocations."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    max_tokens: int | None = Field(None, ge=1, le=8192)
    max_completion_tokens: int | None = Field(None, ge=1, le=8192)
    temperature: float = Field(0.0, ge=0.0, le=5.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    stop: StopText | Annotated[list[StopText], Field(max_length=MAX_STOP_SEQUENCES)] | None = None
    seed: int | None = None
    stream: Literal[False] = False


class ModelCard(BaseModel):
    name: str
    description: str
    release_date: str


class ModelList(BaseModel):
    models: list[ModelCard]


# -- the decision response. Field order is the order on the wire. Fields the contract does not define start
# with x_; they default to None so that a client reads another server's replies with the same models (the
# adapter always sets them and serializes with exclude_none).


class AnswerExtensions(BaseModel):
    """The x_ fields every answer carries, written after the contract's own fields."""

    x_margin: float | None = None  # top probability minus the runner-up
    x_options_sha256: str | None = None  # hash of what defines the options: changed wording, changed hash
    x_orders: int | None = None  # option orders the question was read in
    x_orders_read: list[str] | None = None  # which, in reading order: "given", "reversed", "rotation:r"
    x_slot_probabilities: list[list[float]] | None = None  # per order read, per slot; only where asked
    x_label_mass: float | None = None  # the model's probability, over its whole vocabulary, on the offered labels
    x_out_of_scope: float | None = None  # probability of the added "none of these" option, where it was offered
    x_input_flags: list[InputFlag] | None = None  # what the caller text raised (input_flags.py); None: nothing
    x_action: Action | None = None  # under the served threshold policy (x_run.policy names it)
    x_action_reason: Reason | None = None

    @model_serializer(mode="wrap")
    def _extensions_last(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Pydantic writes a base class's fields first; on the wire the contract's fields come first."""
        fields: dict[str, Any] = handler(self)
        return {
            **{k: v for k, v in fields.items() if not k.startswith("x_")},
            **{k: v for k, v in fields.items() if k.startswith("x_")},
        }


class NoulAnswer(AnswerExtensions):
    type: Literal["noul"] = "noul"
    noul: float  # the probability of yes


class ChoiceAnswer(AnswerExtensions):
    type: Literal["choice"] = "choice"
    choice: str
    probabilities: dict[str, float]
    confidence: float


class ScoreAnswer(AnswerExtensions):
    type: Literal["score"] = "score"
    score: float  # the expected level, sum of i * p_i
    legend: dict[str, Text]  # the levels; this adapter writes a structured level as its JSON text
    probabilities: dict[str, float]
    confidence: float


Answer = Annotated[NoulAnswer | ChoiceAnswer | ScoreAnswer, Field(discriminator="type")]


class Usage(BaseModel):
    input_tokens: int
    output_tokens: int = 0  # nothing is generated


class Gpu(BaseModel):
    name: str
    memory: str


class Hardware(BaseModel):
    cpu: str
    logical_cpus: int
    threads: int
    machine: str
    gpus: list[Gpu]


class CalibrationInForce(BaseModel):
    """The calibration answers are served under (temperatures, slot prior, yes/no intercept), and its source."""

    source: Literal["manifest", "gguf", "identity"]
    temperature: dict[str, float]
    slot_prior: dict[str, list[float]] | None = None  # option count -> the prior divided out (choice questions)
    # type -> b added to the log-odds of yes after the temperature (noul). Left out where none is served, even without
    # exclude_none: run identities written before it existed (identity.json, evaluation records) compare equal
    intercept: dict[str, float] | None = Field(None, exclude_if=lambda v: v is None)


class RunIdentity(BaseModel):
    """What produced a decision: model file, runtime build, image, hardware, prompt template, calibration."""

    model_config = ConfigDict(frozen=True, protected_namespaces=())

    model_file: str
    model_sha256: str
    model_name: str
    llama_cpp_python: str
    llama_cpp_build: str
    adapter: str
    image_digest: str
    instance_types: str
    hardware: Hardware
    n_gpu_layers: int
    prompt_template: str
    order_debias: bool
    calibration: CalibrationInForce
    order_debias_mode: DebiasMode | None = None
    order_debias_tolerance: float | None = None  # adaptive mode: the most a reported probability may differ
    policy: str | None = None  # version of the threshold policy the answers' x_action come from
    state_boundary: StateBoundary | None = None  # how the generic prompt marks the state as data; None: a GGUF's scheme
    # the other settings that change answers (answer_settings.py), as served; None: not in force (a GGUF's scheme)
    option_labels: OptionLabels | None = None
    out_of_scope: bool | None = None
    min_label_mass: float | None = None
    rotation_max_options: int | None = None
    debias_max_options: int | None = None


class RequestRun(RunIdentity):
    """`x_run`: the run identity and what is particular to one request."""

    request_id: str
    # where the evaluated state came from; None where DECISION_SHARED_ENDPOINT withholds it
    state_source: Literal["resident", "cache", "computed"] | None = None


class Timings(BaseModel):
    """Milliseconds per stage of a decision."""

    tokenize: float
    state: float
    questions: float
    total: float


class DecisionResponse(BaseModel):
    model: str
    answers: dict[str, Answer]
    usage: Usage
    x_run: RequestRun | None = None
    x_timing_ms: Timings | None = None
    x_evaluated_tokens: int | None = None  # tokens decoded for this request (reused state is not decoded)
