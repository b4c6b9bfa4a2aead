"""The endpoint sections of cdk.json (`cpu`, `gpu`, `chat`): instance pools, limits, scaling and guardrails.

Validated as part of an environment by environment_config.py, which names every key at fault; these classes check
what one section can see of itself (instance families, the pool, the fleet its deployment steps need).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from decision_spec.adapter_options import AdapterOptions
from decision_spec.config_base import FrozenConfig
from decision_spec.decision_settings import Contexts, QueueLength
from decision_spec.deployment_config import Deployment
from decision_spec.hosting_config import DEFAULT_HOSTING, Hosting, refusals
from decision_spec.instance_types import (
    InstanceType,
    check_cuda_coverage,
    has_local_nvme,
    instance_kind,
    is_gpu_instance,
)
from decision_spec.loop_config import ShadowCandidate, refuse_rolling


class Autoscaling(FrozenConfig):
    enabled: bool = Field(
        description="Register the variant with Application Auto Scaling. Switch off for one deployment before an "
        "instance type change: SageMaker refuses to change the instance type of a registered variant."
    )
    min_instances: int = Field(
        ge=0,
        le=100,
        description="Also the initial instance count; with hosting.mode components the fewest copies, 0 to scale to "
        "zero (instances mode keeps at least 1).",
    )
    max_instances: int = Field(ge=1, le=100)
    target_concurrent_requests_per_instance: float = Field(
        gt=0,
        le=10_000,
        description="SageMakerVariantConcurrentRequestsPerModelHighResolution target: requests in the container, "
        "running and queued (one model per instance); `decisionctl bench --recommend-scaling` measures it.",
    )
    scale_in_cooldown_seconds: int = Field(ge=0, le=3600)
    scale_out_cooldown_seconds: int = Field(ge=0, le=3600)

    @field_validator("max_instances")
    @classmethod
    def _max_not_below_min(cls, value: int, info: ValidationInfo) -> int:
        low = info.data.get("min_instances")
        if low is not None and value < low:
            raise ValueError(f"must be >= min_instances ({low})")
        return value


class _Endpoint(FrozenConfig):
    """Settings shared by every endpoint; `enabled: false` sections are not validated beyond that flag."""

    enabled: Literal[True]
    instance_type: InstanceType
    fallback_instance_types: tuple[InstanceType, ...] = Field(
        default=(), max_length=4, description="Instance pool after instance_type, in priority order (up to 5 in all)."
    )
    ctx_size: int = Field(ge=256, le=1 << 20, description="SM_LLAMA_CPP_CTX_SIZE.")
    startup_health_check_timeout_seconds: int = Field(
        ge=600, le=3600, description="ContainerStartupHealthCheckTimeoutInSeconds: GGUF loads need at least 600."
    )
    model_latency_p95_ms: int = Field(ge=1, le=600_000, description="Alarm threshold on ModelLatency p95.")
    model_latency_p95_ms_by_instance_type: dict[InstanceType, Annotated[int, Field(ge=1, le=600_000)]] = Field(
        default_factory=dict,
        description="A pool's per-type ModelLatency p95 thresholds; a pool type without one uses model_latency_p95_ms.",
    )
    autoscaling: Autoscaling
    instance_provision_timeout_seconds: int = Field(
        ge=300, le=3600, description="VariantInstanceProvisionTimeoutInSeconds: capacity search, pool types included."
    )
    deployment: Deployment = Field(description="How updates reach traffic (deployment_config.py).")

    @field_validator("deployment")
    @classmethod
    def _fleet_allows_steps(cls, value: Deployment, info: ValidationInfo) -> Deployment:
        scaling = info.data.get("autoscaling")
        # min_instances 0 is a components endpoint's (checked with hosting): its copies roll in batches at any count
        if isinstance(scaling, Autoscaling) and scaling.min_instances > 0:
            value.check_fleet(
                scaling.min_instances, scaling.max_instances if scaling.enabled else scaling.min_instances
            )
        return value

    @field_validator("fallback_instance_types")
    @classmethod
    def _distinct_pool(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        pool = (info.data.get("instance_type"), *value)
        if len(set(pool)) != len(pool):
            raise ValueError("instance types in a pool must be distinct (instance_type is priority 1)")
        return value

    @field_validator("model_latency_p95_ms_by_instance_type")
    @classmethod
    def _thresholds_of_the_pool(cls, value: dict[str, int], info: ValidationInfo) -> dict[str, int]:
        pool = (info.data.get("instance_type"), *info.data.get("fallback_instance_types", ()))
        strangers = sorted(set(value) - set(pool))
        if strangers:
            raise ValueError(f"{strangers} are not in the pool (instance_type and fallback_instance_types)")
        return value

    @property
    def instance_types(self) -> tuple[str, ...]:
        """Priority order: instance_type first, then the fallbacks."""
        return (self.instance_type, *self.fallback_instance_types)

    def latency_p95_ms(self, instance_type: str) -> int:
        """The rollback threshold of one pool type (types differ: one p95 over a mixed pool misreads a slow type)."""
        return self.model_latency_p95_ms_by_instance_type.get(instance_type, self.model_latency_p95_ms)

    @property
    def encrypt_volume(self) -> bool:
        """KMS volume encryption only where no pool member has local NVMe (SageMaker rejects it there)."""
        return not any(has_local_nvme(t) for t in self.instance_types)


class _DecisionEndpoint(_Endpoint):
    max_concurrency: Contexts = Field(description="DECISION_MAX_CONCURRENCY: model contexts evaluating at once.")
    max_queue: QueueLength = Field(description="DECISION_MAX_QUEUE: waiting requests before 429.")
    adapter: AdapterOptions | None = Field(
        default=None, description="The adapter's settings that leave answers alone (adapter_options.py)."
    )
    shadow: ShadowCandidate | None = Field(
        default=None,
        description="A candidate served as the endpoint's shadow variant (loop_config.py, stacks/shadow.py).",
    )
    hosting: Hosting = Field(
        default=DEFAULT_HOSTING,
        description="instances (default), components (scales to zero) or serverless (hosting_config.py).",
    )

    @model_validator(mode="after")
    def _hosting_allows(self) -> _DecisionEndpoint:
        found = refusals(
            self.hosting,
            gpu=isinstance(self, GpuEndpoint),
            pooled=bool(self.fallback_instance_types),
            shadow=self.shadow is not None,
            strategy=self.deployment.strategy,
            rollback_on_alarms=self.deployment.rollback_on_alarms,
            scaling_enabled=self.autoscaling.enabled,
            min_instances=self.autoscaling.min_instances,
        )
        if found:
            raise ValueError(f"hosting.mode {self.hosting.mode} cannot take " + "; ".join(found))
        return self

    @field_validator("shadow")
    @classmethod
    def _shadow_supported(cls, value: ShadowCandidate | None, info: ValidationInfo) -> ShadowCandidate | None:
        if value is None:
            return value
        deployment = info.data.get("deployment")
        if isinstance(deployment, Deployment):
            refuse_rolling(deployment.strategy)
        gpu = issubclass(cls, GpuEndpoint)
        if value.instance_type is not None:
            _check_family(value.instance_type, gpu=gpu)
            if gpu:
                check_cuda_coverage((value.instance_type,))
        return value

    @field_validator("max_queue")
    @classmethod
    def _holds_the_scaling_target(cls, value: int, info: ValidationInfo) -> int:
        # Past max_concurrency + max_queue the adapter answers 429, so a higher target never scales out in time.
        scaling, contexts = info.data.get("autoscaling"), info.data.get("max_concurrency")
        if isinstance(scaling, Autoscaling) and scaling.enabled and contexts is not None:
            target = scaling.target_concurrent_requests_per_instance
            if target > contexts + value:
                raise ValueError(
                    f"max_concurrency + max_queue ({contexts + value}) is below "
                    f"autoscaling.target_concurrent_requests_per_instance ({target:g}): an instance would turn "
                    "requests away with 429 before the variant scales out"
                )
        return value


def _check_family(value: str, *, gpu: bool) -> str:
    if is_gpu_instance(value) != gpu:
        raise ValueError(f"{value} is not {instance_kind(gpu)} instance type")
    return value


class CpuEndpoint(_DecisionEndpoint):
    threads: int = Field(ge=1, le=1024, description="SM_LLAMA_CPP_THREADS: usually the instance's vCPU count.")

    @field_validator("instance_type", "fallback_instance_types")
    @classmethod
    def _cpu_only(cls, value: str | tuple[str, ...]) -> str | tuple[str, ...]:
        for item in (value,) if isinstance(value, str) else value:
            _check_family(item, gpu=False)
        return value


class GpuEndpoint(_DecisionEndpoint):
    inference_ami_version: str = Field(
        pattern=r"^al2-ami-sagemaker-inference-gpu-[0-9][0-9-]*$",
        description="Pinned InferenceAmiVersion (CUDA driver).",
    )

    @field_validator("instance_type", "fallback_instance_types")
    @classmethod
    def _gpu_only(cls, value: str | tuple[str, ...]) -> str | tuple[str, ...]:
        items = (value,) if isinstance(value, str) else value
        for item in items:
            _check_family(item, gpu=True)
        check_cuda_coverage(items)  # the DLC's CUDA build must run on every type the pool may land on
        return value


class ChatEndpoint(_Endpoint):
    """The stock DLC image as a plain chat-completions endpoint: no derived build."""

    flavour: Literal["cpu", "cuda"]
    threads: int | None = Field(default=None, ge=1, le=1024, description="SM_LLAMA_CPP_THREADS (cpu flavour).")
    inference_ami_version: str | None = Field(
        default=None, validate_default=True, pattern=r"^al2-ami-sagemaker-inference-gpu-[0-9][0-9-]*$"
    )

    @field_validator("flavour")
    @classmethod
    def _matches_instances(cls, value: str, info: ValidationInfo) -> str:
        # flavour is declared after the instance fields, so it is the one that can see both.
        gpu = value == "cuda"
        types = [info.data.get("instance_type"), *info.data.get("fallback_instance_types", ())]
        wrong = [t for t in types if isinstance(t, str) and is_gpu_instance(t) != gpu]
        if wrong:
            kind = "GPU (ml.g*/ml.p*)" if gpu else "CPU"
            raise ValueError(f"the {value} image needs {kind} instance types; instance_type/fallbacks include {wrong}")
        if gpu:
            check_cuda_coverage(tuple(t for t in types if isinstance(t, str)))
        return value

    @field_validator("inference_ami_version")
    @classmethod
    def _ami_for_cuda(cls, value: str | None, info: ValidationInfo) -> str | None:
        if info.data.get("flavour") == "cuda" and value is None:
            raise ValueError("is required for the cuda flavour (the CUDA image needs a pinned driver AMI)")
        return value

    @model_validator(mode="after")
    def _keeps_an_instance(self) -> ChatEndpoint:
        if self.autoscaling.min_instances == 0:
            raise ValueError(
                "autoscaling.min_instances 0: the chat endpoint hosts its model on the variant, which keeps at least "
                "one instance (only decision sections take hosting.mode components)"
            )
        return self
