"""Every `DECISION_*` setting of the adapter, once: its default, bounds and description, and its kind (whether it
changes answers, and who sets it on an endpoint).

`DecisionSettings` is the registry: plain pydantic, read by the adapter (`core/settings.py`'s `AdapterSettings` is
this model read from the environment), by the stacks (cdk.json's `adapter` block and `model.answer_settings` take
their fields' types, so their bounds, from here) and by decisionctl (through `AnswerSettings`, which an artifact and
an evaluation record hold). Each field's kind is in its `json_schema_extra`:

- `answers`: changes a probability or an action; comes with the model artifact (`answer_settings.AnswerSettings`);
- `operational`: leaves answers alone; a decision endpoint's `<section>.adapter` block in cdk.json sets it;
- `stack`: the stack writes it from the endpoint's own keys or the build (contexts, queue, identity);
- `platform`: SageMaker or the image sets it (the model directory, the port, the llama.cpp build);
- `local`: for a run outside SageMaker only, never deployed (a bearer key, chat's queue: decision endpoints run no
  chat context).

A bound shared with another model is a type here (`AdmissionWait`, `Tolerance`, ...), so it is written once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field, SecretStr

from decision_spec.contract import (
    MAX_CHOICE_OPTIONS,
    MAX_QUESTIONS,
    DebiasMode,
    OptionLabels,
    StateBoundary,
    debias_mode,
)

Kind = Literal["answers", "operational", "stack", "platform", "local"]
CHANGES_ANSWERS: dict[str, Any] = {"kind": "answers"}
OPERATIONAL: dict[str, Any] = {"kind": "operational"}
SET_BY_STACK: dict[str, Any] = {"kind": "stack"}
SET_BY_PLATFORM: dict[str, Any] = {"kind": "platform"}
LOCAL_ONLY: dict[str, Any] = {"kind": "local"}

# Bounds that more than one model states (the registry and an optional copy: cdk.json's, an artifact's).
Contexts = Annotated[int, Field(ge=1, le=16)]
QueueLength = Annotated[int, Field(ge=0, le=10_000)]
AdmissionWait = Annotated[float, Field(ge=0, le=55)]
RetryAfter = Annotated[int, Field(ge=1, le=60)]
BodyBytes = Annotated[int, Field(ge=1024)]
Megabytes = Annotated[int, Field(ge=0)]
DrainTime = Annotated[int, Field(ge=0, le=300)]
QuestionCount = Annotated[int, Field(ge=1, le=MAX_QUESTIONS)]
OptionCount = Annotated[int, Field(ge=2, le=MAX_CHOICE_OPTIONS)]
TokenBudget = Annotated[int, Field(ge=256)]
RequestTime = Annotated[float, Field(gt=0, le=3600)]
BodyRecords = Annotated[int, Field(ge=1, le=100_000)]
Tolerance = Annotated[float, Field(gt=0.0, le=1.0)]
LabelMass = Annotated[float, Field(gt=0.0, le=1.0)]
RotatedOptions = Annotated[int, Field(ge=2, le=26)]
DebiasedOptions = Annotated[int, Field(ge=2, le=MAX_CHOICE_OPTIONS)]


def _debias_mode(raw: object) -> object:
    """As DECISION_ORDER_DEBIAS reads it: true and false keep the meaning they always had (reverse, off)."""
    return debias_mode(raw) if isinstance(raw, str | bool) else raw


OrderDebias = Annotated[DebiasMode, BeforeValidator(_debias_mode)]


class DecisionSettings(BaseModel):
    """The adapter's settings, each with its default and kind; `DECISION_<NAME>` sets one."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    model_dir: Path = Field(
        Path("/opt/ml/model"),
        description="Where SageMaker unpacks model.tar.gz; searched two levels deep.",
        json_schema_extra=SET_BY_PLATFORM,
    )
    host: str = Field(
        "0.0.0.0",  # noqa: S104 - SageMaker reaches the container on its own interface
        description="Bind address.",
        json_schema_extra=SET_BY_PLATFORM,
    )
    port: int = Field(
        8080,
        ge=1,
        le=65535,
        validation_alias=AliasChoices("SAGEMAKER_BIND_TO_PORT", "DECISION_PORT"),
        description="Listening port; SageMaker's SAGEMAKER_BIND_TO_PORT wins.",
        json_schema_extra=SET_BY_PLATFORM,
    )
    max_concurrency: Contexts = Field(
        1,
        description="Model contexts evaluating at once (each holds its own KV cache).",
        json_schema_extra=SET_BY_STACK,
    )
    max_queue: QueueLength = Field(
        16,
        description="Requests that may wait for a context; past it, up to admission_wait_s.",
        json_schema_extra=SET_BY_STACK,
    )
    chat_contexts: int = Field(
        0,
        ge=0,
        le=8,
        description="Model contexts for chat completions, beside the decision contexts: each holds its own KV cache "
        "and a share of the threads, and chat never runs on a decision context; 0 (the default, as the stacks "
        "deploy): chat is off (400) and decisions get every core.",
        json_schema_extra=SET_BY_STACK,
    )
    chat_max_queue: int = Field(
        4,
        ge=0,
        le=1000,
        description="Chat requests that may wait for a chat context.",
        json_schema_extra=LOCAL_ONLY,
    )
    admission_wait_s: AdmissionWait = Field(
        10.0,
        description="How long a request that finds every permit taken (contexts and queue) may wait for one, first "
        "come first served, before its 429; 0: refused at once. SageMaker gives an invocation 60 s, queue included.",
        json_schema_extra=OPERATIONAL,
    )
    retry_after_s: RetryAfter = Field(
        1,
        description="The least Retry-After (seconds) a 429 sends; the value is estimated from the requests ahead "
        "and recent service times, at most 60.",
        json_schema_extra=OPERATIONAL,
    )
    max_body_bytes: BodyBytes = Field(
        6 * 1024 * 1024,
        description="Larger bodies get 413 (SageMaker's own limit is 6 MB).",
        json_schema_extra=OPERATIONAL,
    )
    api_key: SecretStr | None = Field(
        None,
        description="If set, require Authorization: Bearer <key> (for runs outside SageMaker).",
        json_schema_extra=LOCAL_ONLY,
    )
    order_debias: OrderDebias = Field(
        "reverse",
        description="Option orders each question is read in: off (the given one), reverse (also true: the given and "
        "the reversed), rotations (every cyclic rotation, so each option sits in each slot once), adaptive (the "
        "rotations one by one, stopping once those unread can neither change the pick nor move a reported "
        "probability by more than DECISION_ADAPTIVE_TOLERANCE).",
        json_schema_extra=CHANGES_ANSWERS,
    )
    state_boundary: StateBoundary = Field(
        "off",
        description="How the generic prompt marks the state as data: off; tagged (the state between two lines "
        "carrying a tag drawn from it, and a system line saying that nothing between them is an instruction); "
        "datamarked (tagged, every whitespace character of the state written as ˆ, and a system line naming the "
        "mark); sandwiched (tagged, and after the state a reminder that it was data and only the question after it "
        "is to be answered); spotlit (datamarked and sandwiched). Caller text never becomes control tokens either way.",
        json_schema_extra=CHANGES_ANSWERS,
    )
    option_labels: OptionLabels = Field(
        "letters",
        description="What the generic prompt's answer names an option by: letters (each option in a lettered slot, "
        "the answer a slot's letter) or names (the options listed by name, each scored as the model's answer "
        "token by token, up to the token that tells it from the others; two options of one name are refused).",
        json_schema_extra=CHANGES_ANSWERS,
    )
    adaptive_tolerance: Tolerance = Field(
        0.34,
        description="With adaptive, the most any reported probability (temperature applied) may differ from reading "
        "every rotation; the pick never differs. At 1/3 a question of 3 or 6 options may stop after 2 or 4 orders.",
        json_schema_extra=CHANGES_ANSWERS,
    )
    rotation_max_options: RotatedOptions = Field(
        8,
        description="With rotations or adaptive, questions of at most this many options are read in every rotation "
        "(one suffix per option); longer ones in the given and the reversed order.",
        json_schema_extra=CHANGES_ANSWERS,
    )
    debias_max_options: DebiasedOptions = Field(
        26,
        description="Debias questions with at most this many options; longer lists (two-letter "
        "codes) are scored once, since their option list dominates the prompt and a second order doubles its cost.",
        json_schema_extra=CHANGES_ANSWERS,
    )
    min_label_mass: LabelMass | None = Field(
        None,
        description="Under a served policy, abstain where the label mass is below this (overrides the policy's own).",
        json_schema_extra=CHANGES_ANSWERS,
    )
    out_of_scope: bool = Field(
        False,
        description="Offer every question a 'none of these' option and report its probability as x_out_of_scope "
        "(a question can opt in alone with x_out_of_scope: true).",
        json_schema_extra=CHANGES_ANSWERS,
    )
    log_text: bool = Field(
        False,
        description="Log raw state and instruction text. Off: decision inputs can hold customer data.",
        json_schema_extra=OPERATIONAL,
    )
    state_reuse: bool = Field(
        True,
        description="Reuse evaluated states across requests (resident KV and the state cache). Off: every request "
        "computes its state from scratch (for comparisons).",
        json_schema_extra=OPERATIONAL,
    )
    state_cache_mb: Megabytes | None = Field(
        None,
        description="Memory for cached state prefixes; default derived from the model.",
        json_schema_extra=OPERATIONAL,
    )
    image_digest: str = Field(
        "",
        description="The image digest, set by the stack, reported in run identity.",
        json_schema_extra=SET_BY_STACK,
    )
    expected_model_sha256: str = Field(
        "",
        description="If set, the GGUF must have this sha256 (in addition to its manifest).",
        json_schema_extra=SET_BY_STACK,
    )
    instance_types: str = Field(
        "",
        description="Instance types the variant may run on, set by the stack, for run identity.",
        json_schema_extra=SET_BY_STACK,
    )
    llama_cpp_build: str = Field(
        "",
        description="llama.cpp build of the image's library, set by the Dockerfile.",
        json_schema_extra=SET_BY_PLATFORM,
    )
    model_name: str = Field(
        "",
        description="Name served in /v1/models and responses; default the GGUF's general.name.",
        json_schema_extra=OPERATIONAL,
    )
    drain_timeout_s: DrainTime = Field(
        25, description="On SIGTERM, how long in-flight requests may finish.", json_schema_extra=OPERATIONAL
    )
    max_questions: QuestionCount = Field(
        64,
        description="Questions one request may ask, on every route (more: 413 before any work). Each question is "
        "read in one or more option orders: keep what one request costs within SageMaker's 60 s.",
        json_schema_extra=OPERATIONAL,
    )
    max_options: OptionCount = Field(
        MAX_CHOICE_OPTIONS,
        description="Options one choice question may offer (more: 413).",
        json_schema_extra=OPERATIONAL,
    )
    max_request_tokens: TokenBudget | None = Field(
        None,
        description="Tokens one request may have evaluated, its state and every question and option order together "
        "(more: 413, refused from its characters before it is tokenized where they cannot fit); default four "
        "contexts' worth.",
        json_schema_extra=OPERATIONAL,
    )
    request_timeout_s: RequestTime = Field(
        60.0,
        description="Each request's time budget from its arrival, waiting for a context included: work stops between "
        "units past it with 504 deadline_exceeded (a JSON Lines body answers the records it finished and names the "
        "rest). SageMaker's real-time invocations end at 60 s; Batch Transform's InvocationsTimeoutInSeconds may "
        "allow up to 3600.",
        json_schema_extra=OPERATIONAL,
    )
    max_body_records: BodyRecords = Field(
        1000,
        description="Records one JSON Lines body may carry (more: 413 request_limit_exceeded before any is read); "
        "records that share a state are cheap, and the request's deadline bounds the rest.",
        json_schema_extra=OPERATIONAL,
    )
    max_body_tokens: TokenBudget | None = Field(
        None,
        description="Tokens one JSON Lines body's text may need at the least, each distinct state once and every "
        "record's questions, counted from characters (more: 413 token_budget_exceeded before any work); default "
        "DECISION_MAX_REQUEST_TOKENS's.",
        json_schema_extra=OPERATIONAL,
    )
    shared_endpoint: bool = Field(
        False,
        description="Callers who must not learn about each other's requests share this endpoint: answers leave out "
        "what tells whether a state was evaluated before (x_run.state_source, x_evaluated_tokens, x_timing_ms, "
        "OpenAI usage's cached tokens). Latency still tells it: turn DECISION_STATE_REUSE off too to hide that.",
        json_schema_extra=OPERATIONAL,
    )


def setting_kind(name: str) -> Kind:
    """A setting's kind (ValueError for a name that is no setting)."""
    field = DecisionSettings.model_fields.get(name)
    if field is None:
        raise ValueError(f"{name!r} is no DECISION_* setting")
    extra = field.json_schema_extra
    assert isinstance(extra, dict), name  # every field is tagged (tests/adapter/test_settings.py)
    kind: Kind = extra["kind"]  # type: ignore[assignment]
    return kind


def settings_of_kind(kind: Kind) -> tuple[str, ...]:
    """The settings of one kind, in the registry's order."""
    return tuple(name for name in DecisionSettings.model_fields if setting_kind(name) == kind)
