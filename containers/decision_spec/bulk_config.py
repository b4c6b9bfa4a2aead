"""The `batch` (Batch Transform) and `async` (asynchronous endpoint) sections of an environment, off by default.

Both run the decision image and model artifact of one enabled decision endpoint section (`model: cpu` or
`gpu`), so their instance types must be of that section's kind. A missing section, or one with
`"enabled": false`, is off and its other keys are not validated (they may stay, for switching it back on).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, ValidationInfo

from decision_spec.config_base import FrozenConfig
from decision_spec.instance_types import InstanceType, instance_kind, is_gpu_instance

# Keys in cdk.json; `async` is a Python keyword, so EnvironmentConfig holds it as async_inference.
BULK_SECTIONS = ("batch", "async")
# The adapter refuses bodies over DECISION_MAX_BODY_BYTES (6 MiB by default): a mini-batch must fit in it.
MINI_BATCH_MAX_MB = 6
# Transform job names are at most 63 characters: "<env>-batch-" (up to 22) leaves 41 for the execution name.
RUN_NAME = r"^[A-Za-z0-9][A-Za-z0-9-]{0,39}$"


class BatchSchedule(FrozenConfig):
    """An EventBridge Scheduler schedule that starts the state machine on batch/input/<run>/."""

    expression: str = Field(
        pattern=r"^(cron|rate|at)\(.+\)$", description="Scheduler expression, e.g. cron(0 2 * * ? *) (nightly)."
    )
    timezone: str = Field(default="UTC", pattern=r"^[A-Za-z][A-Za-z0-9_+/-]*$", description="IANA time zone.")
    run: str = Field(default="scheduled", pattern=RUN_NAME, description="Input folder transformed: batch/input/<run>/.")


class _Bulk(FrozenConfig):
    enabled: Literal[True]
    model: Literal["cpu", "gpu"] = Field(
        default="cpu", description="The decision endpoint section whose image, artifact and settings are run."
    )
    instance_type: InstanceType


class BatchTransform(_Bulk):
    """A Step Functions state machine that runs one Transform job on the section's Model per execution."""

    instance_count: int = Field(ge=1, le=100, description="Instances of the Transform job.")
    max_concurrent_transforms: int = Field(
        ge=1, le=64, description="Mini-batches in flight per instance; at most the adapter's concurrency + queue."
    )
    max_payload_mb: int = Field(ge=1, le=MINI_BATCH_MAX_MB, description="MaxPayloadInMB of one mini-batch.")
    invocation_timeout_seconds: int = Field(
        default=600, ge=1, le=3600, description="How long one mini-batch may take (InvocationsTimeoutInSeconds)."
    )
    invocation_max_retries: int = Field(default=1, ge=0, le=3, description="InvocationsMaxRetries per mini-batch.")
    timeout_hours: int = Field(default=24, ge=1, le=168, description="An execution (and its job) is stopped after.")
    schedule: BatchSchedule | None = None

    @property
    def in_flight(self) -> int:
        return self.max_concurrent_transforms


class AsyncEndpointConfig(_Bulk):
    """An asynchronous endpoint that scales to zero instances when its queue is empty."""

    max_instances: int = Field(ge=1, le=100)
    max_concurrent_invocations_per_instance: int = Field(
        ge=1, le=1000, description="Requests SageMaker sends one instance at once; at most concurrency + queue."
    )
    target_backlog_per_instance: float = Field(
        gt=0, le=100_000, description="ApproximateBacklogSizePerInstance target of the tracking policy."
    )
    scale_in_cooldown_seconds: int = Field(ge=0, le=3600)
    scale_out_cooldown_seconds: int = Field(ge=0, le=3600)

    @property
    def in_flight(self) -> int:
        return self.max_concurrent_invocations_per_instance


BulkSection = BatchTransform | AsyncEndpointConfig


class _DecisionSection(BaseModel):
    """What a bulk section needs to know of the decision endpoint it runs (CpuEndpoint or GpuEndpoint)."""

    max_concurrency: int
    max_queue: int


def check_runs_on(section: BulkSection | None, info: ValidationInfo) -> BulkSection | None:
    """For EnvironmentConfig's field validators: the section named by `model` is enabled (declared earlier, so
    in `info.data`), of the same instance kind, and admits the requests the section sends at once."""
    if section is None:
        return None
    endpoint = info.data.get(section.model)
    if endpoint is None:
        raise ValueError(f"model {section.model!r} names a decision endpoint section that is not enabled")
    if is_gpu_instance(section.instance_type) != (section.model == "gpu"):
        kind = instance_kind(section.model == "gpu")
        raise ValueError(f"instance_type {section.instance_type} is not {kind} instance type, as model needs")
    settings = _DecisionSection.model_validate(endpoint, from_attributes=True)
    capacity, in_flight = settings.max_concurrency + settings.max_queue, section.in_flight
    if in_flight > capacity:
        # more requests in flight than the adapter admits would be answered 429 and fail the mini-batch
        raise ValueError(
            f"sends {in_flight} requests at once, more than the {section.model} adapter admits "
            f"(max_concurrency + max_queue = {capacity})"
        )
    return section
