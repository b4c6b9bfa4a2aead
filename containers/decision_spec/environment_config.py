"""An environment of cdk.json (`context.environments.<name>`) and `load_environment`, which validates it whole.

`cdk.json` holds `context.environments.<name>`; `cdk synth -c env=<name>` picks one (default `dev`), validated into
frozen objects before any construct exists (a CLI that calls `load_environment` validates as synth does). Every
problem is reported with the full key that holds it, e.g. `environments.dev.gpu.instance_type: ...`, and synth stops
there, so a half-configured stack is never synthesized, let alone deployed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator

from decision_spec.bulk_config import BULK_SECTIONS, AsyncEndpointConfig, BatchTransform, check_runs_on
from decision_spec.config_base import FrozenConfig
from decision_spec.deployment_config import MAX_ROLLBACK_ALARMS, Deployment
from decision_spec.dlc_registry import DLC_REGISTRY_ACCOUNTS, registry_account
from decision_spec.endpoint_config import ChatEndpoint, CpuEndpoint, GpuEndpoint
from decision_spec.environment_sections import (
    LOG_RETENTION_DAYS,
    Alarms,
    DlcImages,
    ImageRepositoryConfig,
    InvokerAccess,
    ModelArtifactConfig,
)
from decision_spec.evaluation_record import EvaluationConfig
from decision_spec.hosting_config import refuse_batch, refuse_capture, require_footprint
from decision_spec.loop_config import DataCapture, DecisionShift, rollback_alarm_count

DEFAULT_ENVIRONMENT = "dev"
BOOTSTRAP_QUALIFIER = (
    r"^[a-z0-9]{1,10}$"  # cdk bootstrap's limit; lowercase: it names an S3 bucket and an ECR repository
)
PLACEHOLDER_SHA256 = "0" * 64


IMAGE_FLAVOURS = {"cpu": "cpu", "gpu": "cuda"}  # decision endpoint section -> DLC image flavour
_ENV_NAME = re.compile(r"^[a-z][a-z0-9-]{0,15}$")


class ConfigError(ValueError):
    """The cdk.json context is wrong; every line of the message starts with the key at fault."""


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
