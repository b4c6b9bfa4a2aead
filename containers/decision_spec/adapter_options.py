"""The adapter settings cdk.json states: `model.answer_settings` and `<section>.adapter`, in two kinds.

- The settings that change answers (order debiasing and its tolerance, the state boundary, the out-of-scope option,
  the minimum label mass, the option counts debiased or rotated) come with the model artifact: its manifest.json
  records them and the adapter adopts them at start, refusing another value in its environment. The evaluation
  record holds those its run served; where it binds, the stack writes them into the container environment, and
  `model.answer_settings` in cdk.json, if given, must agree with it (a contradiction stops synth, naming both
  values). `ArtifactAnswerSettings` (answer_settings.py) is AnswerSettings, strict.
- The settings that do not change answers (the registry's `operational` kind: admission wait, Retry-After floor,
  state cache, body limits, state reuse, text logging, drain time, the served model name, the request limits and
  deadline, a shared endpoint's reticence) are set per decision endpoint, `<section>.adapter` (`AdapterOptions`,
  the registry's types, so its bounds); `max_concurrency` and `max_queue` stay on the section.

Each setting's kind is the registry's (decision_spec/decision_settings.py): tests/stacks/test_adapter_settings.py
checks that `AdapterOptions` holds exactly the `operational` ones and the answer settings exactly the `answers`
ones.
"""

from __future__ import annotations

from pydantic import Field

from decision_spec.config_base import FrozenConfig
from decision_spec.decision_settings import (
    AdmissionWait,
    BodyBytes,
    BodyRecords,
    DrainTime,
    Megabytes,
    OptionCount,
    QuestionCount,
    RequestTime,
    RetryAfter,
    TokenBudget,
)


class AdapterOptions(FrozenConfig):
    """A decision endpoint's adapter settings that leave answers alone (the registry's `operational` kind, each with
    the registry's bounds, decision_spec/decision_settings.py); absent: the adapter's default."""

    admission_wait_s: AdmissionWait | None = Field(
        default=None, description="DECISION_ADMISSION_WAIT_S: how long a request may wait for a permit before its 429."
    )
    retry_after_s: RetryAfter | None = Field(
        default=None, description="DECISION_RETRY_AFTER_S: the least Retry-After a 429 sends."
    )
    max_body_bytes: BodyBytes | None = Field(
        default=None, description="DECISION_MAX_BODY_BYTES: larger bodies get 413."
    )
    log_text: bool | None = Field(
        default=None, description="DECISION_LOG_TEXT: log raw state and instruction text (customer data)."
    )
    state_reuse: bool | None = Field(
        default=None, description="DECISION_STATE_REUSE: reuse evaluated states across requests."
    )
    state_cache_mb: Megabytes | None = Field(
        default=None, description="DECISION_STATE_CACHE_MB: memory for cached states; absent: from the model."
    )
    model_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        description="DECISION_MODEL_NAME: the name answers and /v1/models give; absent: the GGUF's.",
    )
    drain_timeout_s: DrainTime | None = Field(
        default=None, description="DECISION_DRAIN_TIMEOUT_S: how long in-flight requests may finish."
    )
    max_questions: QuestionCount | None = Field(
        default=None, description="DECISION_MAX_QUESTIONS: questions one request may ask (413 past it)."
    )
    max_options: OptionCount | None = Field(
        default=None, description="DECISION_MAX_OPTIONS: options one choice question may offer."
    )
    max_request_tokens: TokenBudget | None = Field(
        default=None, description="DECISION_MAX_REQUEST_TOKENS: tokens one request may have evaluated."
    )
    request_timeout_s: RequestTime | None = Field(
        default=None,
        description="DECISION_REQUEST_TIMEOUT_S: each request's time budget, waiting included (504 past it); absent: "
        "60 s, SageMaker's real-time limit.",
    )
    max_body_records: BodyRecords | None = Field(
        default=None, description="DECISION_MAX_BODY_RECORDS: records one JSON Lines body may carry (413 past it)."
    )
    max_body_tokens: TokenBudget | None = Field(
        default=None,
        description="DECISION_MAX_BODY_TOKENS: tokens one JSON Lines body may need; absent: max_request_tokens'.",
    )
    shared_endpoint: bool | None = Field(
        default=None,
        description="DECISION_SHARED_ENDPOINT: answers leave out what tells whether a state was evaluated before.",
    )
