"""Per-environment configuration: `cdk.json` context validated into frozen objects before any construct exists.

`cdk.json` holds `context.environments.<name>`; `cdk synth -c env=<name>` picks one (default `dev`).
Every problem is reported with the full key that holds it, e.g.
`environments.dev.gpu.instance_type: ...`, and synth stops there, so a half-configured stack
is never synthesized, let alone deployed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import aws_cdk as cdk
from decision_spec.config_base import FrozenConfig
from decision_spec.dlc_registry import DLC_REGISTRY_ACCOUNTS, registry_account
from decision_spec.evaluation_record import EvaluationConfig
from decision_spec.memory import ModelFootprint
from pydantic import Field, ValidationError, ValidationInfo, field_validator

from stacks.adapter_settings import ArtifactAnswerSettings
from stacks.bulk_config import BULK_SECTIONS, AsyncEndpointConfig, BatchTransform, check_runs_on
from stacks.data_capture import DataCapture
from stacks.decision_shift import DecisionShift, rollback_alarm_count
from stacks.endpoint_config import ChatEndpoint, CpuEndpoint, GpuEndpoint
from stacks.guardrails import MAX_ROLLBACK_ALARMS, Deployment
from stacks.hosting import refuse_batch, refuse_capture, require_footprint
from stacks.invoker_access import InvokerAccess
from stacks.log_retention import LOG_RETENTION_DAYS

DEFAULT_ENVIRONMENT = "dev"
BOOTSTRAP_QUALIFIER = (
    r"^[a-z0-9]{1,10}$"  # cdk bootstrap's limit; lowercase: it names an S3 bucket and an ECR repository
)
PLACEHOLDER_SHA256 = "0" * 64


def removal_policy_of(destroy_on_delete: bool) -> cdk.RemovalPolicy:
    """What `cdk destroy` does with a stateful resource: delete it, or leave it in the account."""
    return cdk.RemovalPolicy.DESTROY if destroy_on_delete else cdk.RemovalPolicy.RETAIN


IMAGE_FLAVOURS = {"cpu": "cpu", "gpu": "cuda"}  # decision endpoint section -> DLC image flavour
_ENV_NAME = re.compile(r"^[a-z][a-z0-9-]{0,15}$")

Sha256Hex = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
ImageDigest = Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]


class ConfigError(ValueError):
    """The cdk.json context is wrong; every line of the message starts with the key at fault."""


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
        "under; synth refuses one that contradicts the evaluation record (stacks/adapter_settings.py).",
    )
    footprint: ModelFootprint | None = Field(
        default=None,
        description="The GGUF's size and KV bytes per token: components and serverless hosting size memory from "
        "them (stacks/hosting.py).",
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


class EnvironmentConfig(FrozenConfig):
    name: str
    account: str | None = Field(default=None, pattern=r"^\d{12}$", description="Pins the account; null: any account.")
    region: str = Field(pattern=r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$")
    bootstrap_qualifier: str | None = Field(
        default=None,
        pattern=BOOTSTRAP_QUALIFIER,
        description="CDK bootstrap qualifier of this environment's own bootstrap roles; null: CDK's default "
        "(stacks/isolation.py says when two environments need their own).",
    )
    removal_policy: Literal["destroy", "retain"]
    termination_protection: bool
    log_retention_days: int
    dlc: DlcImages
    image_repository: ImageRepositoryConfig
    model: ModelArtifactConfig
    cpu: CpuEndpoint | None
    gpu: GpuEndpoint | None
    chat: ChatEndpoint | None
    # After the endpoint sections: their validators read the decision section they run on.
    batch: BatchTransform | None = None
    async_inference: AsyncEndpointConfig | None = Field(default=None, alias="async")
    alarms: Alarms
    # The production loop (docs/deploy.md): answers captured to S3, decision-shift alarms; off when absent.
    data_capture: DataCapture | None = None
    decision_shift: DecisionShift | None = None
    # The managed policy applications attach to invoke the endpoints (stacks/invoker_access.py); off when absent.
    invoker_access: InvokerAccess | None = None
    # The suite and the evaluation record of the deployed artifact (stacks/evaluation_binding.py); absent: warned.
    evaluation: EvaluationConfig | None = None
    tags: dict[str, str] = Field(default_factory=dict)

    @field_validator("log_retention_days")
    @classmethod
    def _known_retention(cls, value: int) -> int:
        if value not in LOG_RETENTION_DAYS:
            raise ValueError(f"must be one of CloudWatch's periods: {sorted(LOG_RETENTION_DAYS)}")
        return value

    @field_validator("dlc")
    @classmethod
    def _registry_of_the_region(cls, value: DlcImages, info: ValidationInfo) -> DlcImages:
        # CodeBuild and SageMaker pull the DLC from the regional registry; another account's fails minutes in.
        region = info.data.get("region")
        expected = registry_account(region) if isinstance(region, str) else value.registry_account
        if expected is None:
            raise ValueError(
                f"no DLC registry is published in {region}; regions with one: {', '.join(DLC_REGISTRY_ACCOUNTS)}"
            )
        if value.registry_account != expected:
            raise ValueError(
                f"registry_account {value.registry_account} is not the DLC registry of {region}: use {expected}"
            )
        return value

    @field_validator("alarms")
    @classmethod
    def _bakes_outlast_the_alarms(cls, value: Alarms, info: ValidationInfo) -> Alarms:
        # An alarm needs evaluation_periods full periods to fire; a shorter bake rolls nothing back.
        window = value.period_seconds * value.evaluation_periods
        for section in ("cpu", "gpu", "chat"):
            settings = info.data.get(section)
            deployment = getattr(settings, "deployment", None)
            if (
                isinstance(deployment, Deployment)
                and deployment.rollback_on_alarms
                and deployment.bake_seconds < window
            ):
                raise ValueError(
                    f"{section}.deployment bakes {deployment.bake_seconds} s, less than the {window} s "
                    "(period_seconds x evaluation_periods) an alarm needs to fire: nothing would roll back"
                )
        return value

    @field_validator("cpu", "gpu")
    @classmethod
    def _hosting_fits(
        cls, value: CpuEndpoint | GpuEndpoint | None, info: ValidationInfo
    ) -> CpuEndpoint | GpuEndpoint | None:
        model = info.data.get("model")
        if value is not None and isinstance(model, ModelArtifactConfig):
            require_footprint(
                value.hosting,
                model.footprint,
                ctx_size=value.ctx_size,
                contexts=value.max_concurrency,
                state_cache_mb=value.adapter.state_cache_mb if value.adapter is not None else None,
            )
        return value

    @field_validator("data_capture")
    @classmethod
    def _captures_decisions(cls, value: DataCapture | None, info: ValidationInfo) -> DataCapture | None:
        if value is not None and not any(info.data.get(section) is not None for section in ("cpu", "gpu")):
            raise ValueError(
                "needs a decision endpoint (cpu or gpu): the chat endpoint's generated text is not captured"
            )
        for section in ("cpu", "gpu"):
            settings = info.data.get(section)
            if value is not None and isinstance(settings, CpuEndpoint | GpuEndpoint):
                refuse_capture(section, settings.hosting.mode)
        return value

    @field_validator("decision_shift")
    @classmethod
    def _rollback_alarms_fit(cls, value: DecisionShift | None, info: ValidationInfo) -> DecisionShift | None:
        if value is not None and not any(info.data.get(section) is not None for section in ("cpu", "gpu")):
            raise ValueError("needs a decision endpoint (cpu or gpu): only the adapter writes decision lines")
        # SageMaker watches at most ten rollback alarms per endpoint (AutoRollbackConfiguration.Alarms).
        for section in ("cpu", "gpu"):
            settings = info.data.get(section)
            if value is None or not isinstance(settings, CpuEndpoint | GpuEndpoint):
                continue
            count = rollback_alarm_count(settings.instance_types, value)
            if settings.deployment.rollback_on_alarms and count > MAX_ROLLBACK_ALARMS:
                raise ValueError(
                    f"{section} would have {count} rollback alarms (5xx, a latency alarm per pool type, runtime "
                    f"failures and {value.alarm_count} decision-shift alarms), SageMaker watches at most "
                    f"{MAX_ROLLBACK_ALARMS}: shorten {section}.fallback_instance_types, or drop min_mean_label_mass "
                    "or routing_questions"
                )
        return value

    @field_validator("batch", "async_inference")
    @classmethod
    def _bulk_runs_on(
        cls, value: BatchTransform | AsyncEndpointConfig | None, info: ValidationInfo
    ) -> BatchTransform | AsyncEndpointConfig | None:
        checked = check_runs_on(value, info)
        if isinstance(value, BatchTransform):
            refuse_batch(value.model, getattr(info.data.get(value.model), "hosting", None))
        return checked

    @property
    def destroy_on_delete(self) -> bool:
        return self.removal_policy == "destroy"

    @property
    def cdk_removal_policy(self) -> cdk.RemovalPolicy:
        return removal_policy_of(self.destroy_on_delete)

    @property
    def decision_endpoints(self) -> dict[str, CpuEndpoint | GpuEndpoint]:
        """Enabled decision endpoints by section ("cpu", "gpu"); IMAGE_FLAVOURS maps them to images."""
        found: dict[str, CpuEndpoint | GpuEndpoint] = {}
        if self.cpu is not None:
            found["cpu"] = self.cpu
        if self.gpu is not None:
            found["gpu"] = self.gpu
        return found

    @property
    def image_flavours(self) -> set[str]:
        """DLC flavours this environment pulls: for decision images and for the stock chat endpoint."""
        flavours = {IMAGE_FLAVOURS[section] for section in self.decision_endpoints}
        if self.chat is not None:
            flavours.add(self.chat.flavour)
        return flavours

    def placeholders(self) -> list[str]:
        """Keys in use that still hold the all-zero placeholder: synth works, a deployment would not."""
        values = {
            f"dlc.{flavour}_digest": self.dlc.digest(flavour).removeprefix("sha256:")
            for flavour in sorted(self.image_flavours)
        }
        if self.decision_endpoints:
            values["model.sha256"] = self.model.sha256
        return [f"environments.{self.name}.{key}" for key, value in values.items() if value == PLACEHOLDER_SHA256]


_ENDPOINT_SECTIONS = ("cpu", "gpu", "chat")
LOOP_SECTIONS = ("data_capture", "decision_shift")
ACCESS_SECTIONS = ("invoker_access",)


def load_environment(environments: object, name: str) -> EnvironmentConfig:
    """Validate `context.environments[name]`; ConfigError names every key at fault."""
    if not isinstance(environments, Mapping) or not environments:
        raise ConfigError("environments: missing from the cdk.json context (an object with one entry per environment)")
    if name not in environments:
        known = ", ".join(sorted(str(k) for k in environments))
        raise ConfigError(f"environments.{name}: no such environment (known: {known}); choose one with -c env=<name>")
    if not _ENV_NAME.match(name):
        raise ConfigError(f"environments.{name}: names must match {_ENV_NAME.pattern} (they prefix resource names)")
    raw = environments[name]
    if not isinstance(raw, Mapping):
        raise ConfigError(f"environments.{name}: must be an object, got {type(raw).__name__}")
    data: dict[str, Any] = {**raw, "name": name}
    for section in _ENDPOINT_SECTIONS:
        data[section] = _enabled_section(raw.get(section), f"environments.{name}.{section}")
    for section in (*BULK_SECTIONS, *LOOP_SECTIONS, *ACCESS_SECTIONS):  # off when absent
        data[section] = _enabled_section(raw[section], f"environments.{name}.{section}") if section in raw else None
    if all(data[section] is None for section in _ENDPOINT_SECTIONS):
        raise ConfigError(f"environments.{name}: no endpoint is enabled; set enabled to true in one of cpu, gpu, chat")
    try:
        document = json.dumps(data)
    except TypeError as e:
        raise ConfigError(f"environments.{name}: not plain JSON data ({e})") from None
    try:
        # JSON mode: strict types (no "600" for 600, no true for 1) while arrays still fill tuples.
        return EnvironmentConfig.model_validate_json(document)
    except ValidationError as e:
        raise ConfigError(_describe(e, f"environments.{name}")) from None


def _enabled_section(raw: object, key: str) -> object:
    """A disabled endpoint section becomes None (its other keys may stay, for switching it back on)."""
    if raw is None:
        raise ConfigError(f'{key}: missing; write {{"enabled": false}} to leave this endpoint out')
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{key}: must be an object, got {type(raw).__name__}")
    enabled = raw.get("enabled")
    if not isinstance(enabled, bool):
        raise ConfigError(f"{key}.enabled: must be true or false, got {enabled!r}")
    return raw if enabled else None


def _describe(error: ValidationError, prefix: str) -> str:
    lines = []
    for item in error.errors(include_url=False):
        key = ".".join([prefix, *(str(part) for part in item["loc"])])
        # a whole section's value says nothing the message has not named
        whole = item["type"] == "missing" or isinstance(item.get("input"), dict)
        shown = "" if whole else f" (got {item.get('input')!r})"
        message = item["msg"].removeprefix("Value error, ")
        lines.append(f"{key}: {message}{shown}")
    return "invalid cdk.json context:\n  " + "\n  ".join(lines)
