"""The `<section>.deployment` block of cdk.json: how an endpoint update reaches traffic (SageMaker's guardrails).

An update is any change that makes a new endpoint config: a new image digest, model, calibration,
environment or instance type. Strategies and the capacity each needs while it runs:

- `all_at_once`, `canary`, `linear` (blue/green): SageMaker first provisions a complete new fleet of the
  variant's current instance count beside the old one, then moves traffic to it (at once; a canary of
  `batch_instances` first; or `batch_instances` per step), baking `wait_seconds` after each step, and keeps
  the old fleet `termination_wait_seconds` more. Needs twice the current instances (quota and capacity, for
  whichever pool types it gets) for the whole deployment.
- `rolling`: replaces `batch_instances` at a time: a new batch comes up, takes its share of traffic, bakes
  `wait_seconds`, then an old batch goes. Needs the current count plus `batch_instances`; a rollback also
  goes batch by batch. For GPU pools, where twice the capacity may not exist.

With `rollback_on_alarms`, any of the endpoint's rollback alarms (5xx rate, ModelLatency p95, runtime
failures) going into ALARM during a bake sends all traffic back to the old fleet. Canary sizes must be
at most half the fleet, linear steps 10-50% of it and rolling batches 5-50%, so those strategies need at
least two instances (checked against `autoscaling.min_instances` and `max_instances`). CloudFormation
passes the configuration on every update (`RetainDeploymentConfig` false): what cdk.json says applies.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Strategy = Literal["all_at_once", "canary", "linear", "rolling"]
# The smallest share of the fleet one step may be, per strategy (SageMaker's rule; the largest is half).
_MIN_STEP_SHARE = {"canary": 0.0, "linear": 0.10, "rolling": 0.05}
MAX_ROLLBACK_ALARMS = 10  # AutoRollbackConfiguration accepts at most ten alarms


class Deployment(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    strategy: Strategy
    batch_instances: int | None = Field(
        default=None,
        ge=1,
        le=50,
        description="canary: new instances that take traffic first; linear: instances per step; rolling: instances "
        "replaced per batch. Not for all_at_once.",
    )
    wait_seconds: int = Field(ge=0, le=3600, description="Bake after each traffic step (WaitIntervalInSeconds).")
    termination_wait_seconds: int = Field(
        default=0,
        ge=0,
        le=3600,
        description="Blue/green only: how long the old fleet stays, alarms still watched, after the last step.",
    )
    max_execution_seconds: int | None = Field(
        default=None, ge=600, le=28800, description="MaximumExecutionTimeoutInSeconds: the whole deployment."
    )
    rollback_on_alarms: bool = Field(description="Roll back when a rollback alarm fires during the deployment.")
    max_step_share_percent: float = Field(
        default=50.0,
        gt=0,
        le=50,
        description="The most of the fleet (at min_instances) one step may serve: the canary, a linear step or a "
        "rolling batch. 50 is SageMaker's limit; 25 keeps an untested release to a quarter of the traffic.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Deployment:
        if self.strategy == "all_at_once" and self.batch_instances is not None:
            raise ValueError("batch_instances is for canary, linear and rolling; all_at_once moves all traffic")
        if self.strategy != "all_at_once" and self.batch_instances is None:
            raise ValueError(f"{self.strategy} needs batch_instances (instances per step)")
        if self.strategy == "rolling" and self.termination_wait_seconds:
            raise ValueError("termination_wait_seconds is for blue/green strategies; a rolling update has no old fleet")
        waits = self.wait_seconds + self.termination_wait_seconds
        if self.max_execution_seconds is not None and self.max_execution_seconds <= waits:
            raise ValueError(f"max_execution_seconds must exceed wait_seconds + termination_wait_seconds ({waits})")
        return self

    @property
    def bake_seconds(self) -> int:
        """The longest stretch in which an alarm can still roll the deployment back."""
        return max(self.wait_seconds, self.termination_wait_seconds)

    def check_fleet(self, smallest: int, largest: int) -> None:
        """Raise ValueError if a step would be outside SageMaker's share of the fleet at either bound."""
        if self.batch_instances is None:
            return
        batch = self.batch_instances
        share = 100 * batch / smallest
        if 2 * batch <= smallest and share > self.max_step_share_percent:
            needed = math.ceil(100 * batch / self.max_step_share_percent)
            raise ValueError(
                f"a {self.strategy} step of {batch} instance(s) is {share:g}% of {smallest} instances, above "
                f"max_step_share_percent {self.max_step_share_percent:g}: raise autoscaling.min_instances to {needed} "
                "(instances that always run; docs/deploy.md, Canary sizes), or raise max_step_share_percent"
            )
        if 2 * batch > smallest:
            raise ValueError(
                f"{self.strategy} with batch_instances {batch} needs at least {2 * batch} instances (a step may be at "
                f"most half the fleet), but the variant may run {smallest}: raise autoscaling.min_instances"
            )
        least = _MIN_STEP_SHARE[self.strategy]
        if batch < least * largest:
            raise ValueError(
                f"{self.strategy} steps must be at least {least:.0%} of the fleet: batch_instances {batch} is less at "
                f"{largest} instances (autoscaling.max_instances)"
            )
