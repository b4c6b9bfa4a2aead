"""The plain sections of an environment in cdk.json: DLC images, image repository, model artifact, alarms, invokers.

Validated as part of an environment by environment_config.py, which names every key at fault.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator

from decision_spec.answer_settings import ArtifactAnswerSettings
from decision_spec.config_base import FrozenConfig
from decision_spec.memory import ModelFootprint

# The retention periods CloudWatch Logs accepts, as `log_retention_days` names them (days), and the name of each in
# CDK's aws_logs.RetentionDays (stacks/log_retention.py looks it up there).
LOG_RETENTION_PERIODS = {
    1: "ONE_DAY", 3: "THREE_DAYS", 5: "FIVE_DAYS", 7: "ONE_WEEK", 14: "TWO_WEEKS", 30: "ONE_MONTH", 60: "TWO_MONTHS",
    90: "THREE_MONTHS", 120: "FOUR_MONTHS", 150: "FIVE_MONTHS", 180: "SIX_MONTHS", 365: "ONE_YEAR",
    400: "THIRTEEN_MONTHS", 545: "EIGHTEEN_MONTHS", 731: "TWO_YEARS", 1096: "THREE_YEARS", 1827: "FIVE_YEARS",
    2192: "SIX_YEARS", 2557: "SEVEN_YEARS", 2922: "EIGHT_YEARS", 3288: "NINE_YEARS", 3653: "TEN_YEARS",
}  # fmt: skip
LOG_RETENTION_DAYS = frozenset(LOG_RETENTION_PERIODS)

Sha256Hex = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
ImageDigest = Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]


class DlcImages(FrozenConfig):
    """The AWS llama.cpp Deep Learning Containers the images derive from, pinned by digest (never a tag)."""

    registry_account: str = Field(
        pattern=r"^\d{12}$",
        description="Account of the region's DLC registry (containers/decision_spec/dlc_registry.py).",
    )
    repository: str = Field(pattern=r"^[a-z0-9][a-z0-9._/-]*$", description="DLC repository, `llama-cpp` on x86.")
    cpu_digest: ImageDigest = Field(description="Digest of llama-cpp:server-sagemaker-cpu-v1.")
    cuda_digest: ImageDigest = Field(description="Digest of llama-cpp:server-sagemaker-cuda-v1.")

    def digest(self, flavour: str) -> str:
        return self.cuda_digest if flavour == "cuda" else self.cpu_digest


class ImageRepositoryConfig(FrozenConfig):
    # null (or absent: CDK's context drops nulls) keeps every image
    keep_images: int | None = Field(
        default=None, ge=2, le=1000, description="Newest images kept, older ones expire; null keeps every image."
    )
    untagged_expiry_days: int = Field(ge=1, le=3650, description="Days before an untagged image expires.")


class ModelArtifactConfig(FrozenConfig):
    s3_key: str = Field(
        pattern=r"^[A-Za-z0-9!_.*'()/-]+\.tar\.gz$", description="Key of model.tar.gz in the model bucket."
    )
    sha256: Sha256Hex = Field(
        description="Expected sha256 of the GGUF inside; the adapter refuses to start on mismatch."
    )
    download_timeout_seconds: int = Field(ge=60, le=3600, description="ModelDataDownloadTimeoutInSeconds.")
    noncurrent_version_expiry_days: int | None = Field(
        default=None,
        ge=1,
        le=3650,
        description="Days a replaced or deleted artifact version is kept; null keeps every version.",
    )
    answer_settings: ArtifactAnswerSettings | None = Field(
        default=None,
        description="The settings that change answers this environment expects the artifact to have been evaluated "
        "under; synth refuses one that contradicts the evaluation record (adapter_options.py).",
    )
    footprint: ModelFootprint | None = Field(
        default=None,
        description="The GGUF's size and KV bytes per token: components and serverless hosting size memory from "
        "them (hosting_config.py).",
    )

    @field_validator("s3_key")
    @classmethod
    def _relative_key(cls, key: str) -> str:
        if key.startswith("/") or "//" in key:
            raise ValueError("must be a relative S3 key without empty segments, e.g. models/<name>/model.tar.gz")
        return key


class Alarms(FrozenConfig):
    emails: tuple[Annotated[str, Field(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")], ...] = Field(default=())
    topic_arn: str | None = Field(
        default=None,
        pattern=r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]+$",
        description="Notify an existing topic instead of creating one.",
    )
    period_seconds: Literal[60, 300] = Field(description="Alarm evaluation period.")
    evaluation_periods: int = Field(ge=1, le=60)
    datapoints_to_alarm: int = Field(
        ge=1,
        le=60,
        description="M of the evaluation_periods (N) periods that must breach for an alarm to fire (M-of-N): an "
        "intermittent failure breaches some periods, not every one.",
    )
    http_5xx_rate_percent: float = Field(gt=0, le=100)
    http_4xx_rate_percent: float = Field(gt=0, le=100)
    invocation_errors: int = Field(ge=1, description="InvocationModelErrors per period.")
    overload_rejections: int = Field(ge=1, description="Adapter 429s (overload_rejected log lines) per period.")
    runtime_failures: int = Field(
        ge=0,
        description="Adapter runtime_failure log lines (500s from llama.cpp) per period above which the period "
        "breaches; 0: any failure breaches it.",
    )
    automation_rate_band: tuple[float, float] | None = Field(
        default=None,
        description="[min, max] percent of answers a served policy automates; outside it over a period alarms "
        "(live traffic is less, or more, certain than the evaluation set was). null: no alarm.",
    )
    automation_rate_min_answers: int = Field(
        default=20, ge=1, description="Answers with an action a period needs before its automation rate is judged."
    )
    input_flagged_percent: float = Field(
        default=5.0,
        gt=0,
        le=100,
        description="Percent of a period's answers that raised an input flag (control strings in caller text, text "
        "addressed to the classifier) above which the period breaches: someone may be trying to steer decisions.",
    )
    input_flagged_min_answers: int = Field(
        default=20, ge=1, description="Answers a period needs before its flagged share is judged."
    )

    @field_validator("datapoints_to_alarm")
    @classmethod
    def _m_of_n(cls, value: int, info: ValidationInfo) -> int:
        periods = info.data.get("evaluation_periods")
        if periods is not None and value > periods:
            raise ValueError(f"must be at most evaluation_periods ({periods}): M of N periods breach")
        return value

    @field_validator("automation_rate_band")
    @classmethod
    def _band(cls, band: tuple[float, float] | None) -> tuple[float, float] | None:
        if band is not None and not 0 <= band[0] < band[1] <= 100:
            raise ValueError(f"must be [min, max] percent with 0 <= min < max <= 100, got {list(band)}")
        return band


class InvokerAccess(FrozenConfig):
    enabled: bool
    bearer_token: bool = Field(
        default=False,
        description="Also allow sagemaker:CallWithBearerToken: tokens for SageMaker's /openai/v1 route "
        "(docs/calling.md).",
    )
