"""Request and response models of OpenAI's Decisions API (`POST /v1/decisions`), read from the `openai` SDK's own
types (openai==3.51.0: types/decision_create_params.py, types/decision.py); openai_decisions.py parses the request
into the engine's decision and renders the answers in these models.

Unknown fields are ignored, as on the System One route; the `x_` switches a System One question takes are
accepted on a question here too, and every answer carries the System One answer's `x_` fields (the SDK's models
keep extra fields).

The question, answer and usage models are named `OpenAI...`: System One's in schemas.py have the other names. The
OpenAPI document keeps the schema names and titles it published before that rename (PUBLISHED_SCHEMA_NAMES, which
app.py applies): FastAPI names a schema after its class, module-qualified where two classes share a name.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from decision_spec.contract import (
    MAX_CHOICE_OPTIONS,
    MAX_QUESTIONS,
    MAX_SCORE_LEVELS,
    MIN_CHOICE_OPTIONS,
    MIN_SCORE_LEVELS,
)
from decision_spec.schemas import AnswerExtensions, OutOfScope, RequestRun, SlotProbabilities, Timings
from pydantic import BaseModel, ConfigDict, Discriminator, Field, StrictBool, StrictStr, Tag

# the name FastAPI gives a request model's schema -> the name the OpenAPI document publishes
PUBLISHED_SCHEMA_NAMES = {
    "ChoiceQuestion": "decision_adapter__schemas__ChoiceQuestion",
    "ScoreQuestion": "decision_adapter__schemas__ScoreQuestion",
    "OpenAIPredicateQuestion": "PredicateQuestion",
    "OpenAIChoiceQuestion": "decision_adapter__openai_schemas__ChoiceQuestion",
    "OpenAIScoreQuestion": "decision_adapter__openai_schemas__ScoreQuestion",
}


class _Part(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class InputText(_Part):
    type: Literal["input_text"]
    text: str


class InputJson(_Part):
    """A JSON object or an array of objects, rendered as text."""

    type: Literal["input_json"]
    data: dict[str, Any] | list[dict[str, Any]]


class InputImage(_Part):
    """Accepted by the models so that the refusal names where it is: this adapter serves text models only."""

    type: Literal["input_image"]
    image_url: str


class OutputText(_Part):
    type: Literal["output_text"]
    text: str


class RefusalText(_Part):
    type: Literal["refusal"]
    refusal: str


ContentPart = Annotated[InputText | InputJson | InputImage | OutputText | RefusalText, Field(discriminator="type")]
ToolOutputPart = Annotated[InputText | InputImage, Field(discriminator="type")]
QuestionPart = Annotated[InputText | InputImage | InputJson, Field(discriminator="type")]
# which content parts each role may send (the SDK's message types)
ROLE_PARTS: dict[str, tuple[str, ...]] = {
    "user": ("input_text", "input_image", "input_json"),
    "developer": ("input_text",),
    "system": ("input_text",),
    "assistant": ("output_text", "refusal"),
}


class Message(_Part):
    type: Literal["message"] = "message"
    role: Literal["user", "developer", "system", "assistant"]
    content: str | list[ContentPart]
    phase: Literal["commentary", "final_answer"] | None = None


class FunctionCall(_Part):
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str
    namespace: str | None = None


class FunctionCallOutput(_Part):
    type: Literal["function_call_output"]
    call_id: str
    output: str | list[ToolOutputPart]


class CustomToolCall(_Part):
    type: Literal["custom_tool_call"]
    call_id: str
    name: str
    input: str
    namespace: str | None = None


class CustomToolCallOutput(_Part):
    type: Literal["custom_tool_call_output"]
    call_id: str
    output: str | list[ToolOutputPart]


ITEM_TYPES = ("message", "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output")


def _item_type(value: Any) -> str:
    """A message may leave out its `type`; any other item names it."""
    if isinstance(value, dict):
        return str(value.get("type", "message"))
    return str(getattr(value, "type", "message"))


InputItem = Annotated[
    Annotated[Message, Tag("message")]
    | Annotated[FunctionCall, Tag("function_call")]
    | Annotated[FunctionCallOutput, Tag("function_call_output")]
    | Annotated[CustomToolCall, Tag("custom_tool_call")]
    | Annotated[CustomToolCallOutput, Tag("custom_tool_call_output")],
    Discriminator(_item_type),
]
Instructions = str | list[QuestionPart]


class _Question(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    instructions: Instructions
    name: str | None = None
    x_out_of_scope: OutOfScope = False
    x_slot_probabilities: SlotProbabilities = False


class OpenAIPredicateQuestion(_Question):
    """How likely a statement about the input is true: System One's noul."""

    model_config = ConfigDict(title="PredicateQuestion")  # the title the OpenAPI document gives it (module doc)
    type: Literal["predicate"]


class Choice(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    value: StrictStr | StrictBool  # typed: the string "true" and the boolean true are two choices
    description: str | None = None


class OpenAIChoiceQuestion(_Question):
    model_config = ConfigDict(title="ChoiceQuestion")
    type: Literal["choice"]
    choices: Annotated[list[Choice], Field(min_length=MIN_CHOICE_OPTIONS, max_length=MAX_CHOICE_OPTIONS)]


class Level(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    label: str
    description: str | None = None


class OpenAIScoreQuestion(_Question):
    model_config = ConfigDict(title="ScoreQuestion")
    type: Literal["score"]
    levels: Annotated[list[Level], Field(min_length=MIN_SCORE_LEVELS, max_length=MAX_SCORE_LEVELS)]


OpenAIQuestion = Annotated[
    OpenAIPredicateQuestion | OpenAIChoiceQuestion | OpenAIScoreQuestion, Field(discriminator="type")
]


class DecisionCreate(BaseModel):
    """`client.decisions.create(model, input, questions, ...)`. prompt_cache_key, prompt_cache_options and
    safety_identifier are accepted and ignored: the state cache keys on the state itself."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    model: str
    input: str | Annotated[list[InputItem], Field(min_length=1)]
    questions: Annotated[list[OpenAIQuestion], Field(min_length=1, max_length=MAX_QUESTIONS)]


# -- the response (types/decision.py). Every answer names its question (`name`, null where it has none) and
# carries the System One answer's x_ fields after its own.


class OpenAIPredicateAnswer(AnswerExtensions):
    type: Literal["predicate"] = "predicate"
    name: str | None = None
    probability: float  # of true


class ChoiceProbability(BaseModel):
    value: StrictStr | StrictBool
    probability: float


class OpenAIChoiceAnswer(AnswerExtensions):
    type: Literal["choice"] = "choice"
    name: str | None = None
    choice: StrictStr | StrictBool
    confidence: float
    probabilities: list[ChoiceProbability]  # in the declared order of the choices


class ScoreProbability(BaseModel):
    label: str
    value: int  # the level's place, 0 for the first (lowest): `score` is the sum of value x probability
    probability: float


class OpenAIScoreAnswer(AnswerExtensions):
    type: Literal["score"] = "score"
    name: str | None = None
    score: float
    confidence: float
    probabilities: list[ScoreProbability]


class OpenAIRefusalAnswer(AnswerExtensions):
    """Where this adapter declines: x_action_reason says why (openai_decisions.REFUSAL_REASONS)."""

    type: Literal["refusal"] = "refusal"
    name: str | None = None


OpenAIAnswer = Annotated[
    OpenAIPredicateAnswer | OpenAIChoiceAnswer | OpenAIScoreAnswer | OpenAIRefusalAnswer, Field(discriminator="type")
]


class InputTokensDetails(BaseModel):
    cached_tokens: int  # the state's tokens, read from the resident state or the state cache
    cache_write_tokens: int  # the state's tokens, evaluated and kept for reuse


class OutputTokensDetails(BaseModel):
    reasoning_tokens: int = 0


class OpenAIUsage(BaseModel):
    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int = 0  # nothing is generated
    output_tokens_details: OutputTokensDetails = OutputTokensDetails()
    total_tokens: int


class Decision(BaseModel):
    model: str
    answers: list[OpenAIAnswer]  # in question order
    usage: OpenAIUsage
    x_run: RequestRun | None = None
    x_timing_ms: Timings | None = None
    x_evaluated_tokens: int | None = None
