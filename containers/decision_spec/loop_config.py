"""The production loop's sections of cdk.json: `data_capture`, `decision_shift` and a section's `shadow` candidate.

Each is validated here with what it alone can see, and with the environment by environment_config.py; what synth
builds from them (the capture configuration, the decision-shift metric filters and alarms, the shadow variant) is
the stacks' (stacks/data_capture.py, stacks/decision_shift.py, stacks/shadow.py; docs/loop.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from decision_spec.config_base import FrozenConfig
from decision_spec.contract import SHAPE_OF_TYPE
from decision_spec.policy import CertifiedMix

MAX_ALARM_METRICS = 10  # a metric math alarm reads at most 10 metrics (CloudWatch's hard limit)

# A pick is counted as one option index per answer (`picked.q<x_options_sha256>_<i>`), so only these answer shapes
# (decision_spec.contract.SHAPE_OF_TYPE) can route.
PICKED_SHAPES = ("categorical",)

Hex16 = Annotated[str, Field(pattern=r"^[0-9a-f]{16}$")]


class DataCapture(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    enabled: bool = Field(description="Capture answers; false (or no section) captures nothing.")
    sampling_percent: int = Field(
        ge=1, le=100, description="InitialSamplingPercentage: the share of invocations whose answers are captured."
    )
    prefix: str = Field(
        pattern=r"^[A-Za-z0-9!_.*'()-]+(/[A-Za-z0-9!_.*'()-]+)*$",
        description="Key prefix in the model bucket, without slashes at either end, e.g. capture.",
    )
    expiry_days: int = Field(ge=1, le=3650, description="Days captured answers are kept (lifecycle rule).")

    @field_validator("prefix")
    @classmethod
    def _not_the_models(cls, value: str) -> str:
        if value == "models" or value.startswith("models/"):
            raise ValueError("must not be under models/: the lifecycle rule would expire model artifacts")
        return value


class DecisionShift(FrozenConfig):
    enabled: bool
    policy_version: Hex16 = Field(description="The served policy's version (x_run.policy) the alarms watch.")
    certified: CertifiedMix = Field(description="Copied from that policy's certified_mix (its own model, one home).")
    routing_questions: tuple[Hex16, ...] = Field(
        default=(), description="x_options_sha256 of the questions whose option mix is alarmed on."
    )
    action_band_points: float = Field(gt=0, le=100, description="Allowed distance of an action share, in points.")
    option_band_points: float = Field(gt=0, le=100, description="Allowed distance of an option share, in points.")
    min_answers: int = Field(default=30, ge=1, description="Answers a period needs before its shares are judged.")
    min_mean_label_mass: float | None = Field(
        default=None, gt=0, le=1, description="Alarm below this mean label mass; null: no label-mass alarm."
    )

    @model_validator(mode="after")
    def _routing_questions_certified(self) -> DecisionShift:
        unknown = [q for q in self.routing_questions if q not in self.certified.questions]
        if unknown:
            known = ", ".join(sorted(self.certified.questions)) or "none"
            raise ValueError(
                f"routing_questions {unknown} have no option mix in certified.questions (known: {known}): copy the "
                "policy's certified_mix again, or name questions it certified"
            )
        types = {q: self.certified.questions[q].type for q in self.routing_questions}
        unpicked = sorted(q for q, t in types.items() if SHAPE_OF_TYPE[t] not in PICKED_SHAPES)
        if unpicked:
            raise ValueError(f"routing_questions {unpicked} are of a type whose answers pick no single option")
        options = sum(len(self.certified.questions[q].options) for q in self.routing_questions)
        if options > MAX_ALARM_METRICS:
            raise ValueError(
                f"the routing questions have {options} options in all, but one alarm reads at most "
                f"{MAX_ALARM_METRICS} metrics (CloudWatch metric math alarms): name fewer routing_questions"
            )
        return self

    @property
    def alarm_count(self) -> int:
        """The rollback alarms this adds to each decision endpoint."""
        return 1 + (1 if self.routing_questions else 0) + (1 if self.min_mean_label_mass is not None else 0)


def rollback_alarm_count(pool: Sequence[str], shift: DecisionShift | None) -> int:
    """The rollback alarms of a decision endpoint: 5xx, latency (one per pool type), runtime, and the shift's."""
    return 2 + len(pool) + (shift.alarm_count if shift is not None else 0)


class ShadowCandidate(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    s3_key: str = Field(
        pattern=r"^[A-Za-z0-9!_.*'()-]+(/[A-Za-z0-9!_.*'()-]+)*\.tar\.gz$",
        description="The candidate's model.tar.gz in the model bucket (decisionctl package-model --upload).",
    )
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="The sha256 of the GGUF inside it.")
    sampling_percent: int = Field(ge=1, le=100, description="Share of production requests copied to the shadow.")
    instance_type: str | None = Field(
        default=None,
        pattern=r"^ml\.[a-z][a-z0-9-]*\.[a-z0-9]+$",
        description="The shadow's instance type; null: the production variant's first (priority 1) type.",
    )
    instance_count: int = Field(default=1, ge=1, le=100, description="Shadow instances (not autoscaled).")


def refuse_rolling(strategy: str) -> None:
    """A rolling deployment of a multi-variant endpoint is one of the guardrails' exclusions."""
    if strategy == "rolling":
        raise ValueError(
            "a shadow variant makes the endpoint multi-variant, and SageMaker's deployment guardrails do not "
            "roll a multi-variant endpoint (rolling update exclusions): set deployment.strategy to canary, "
            "linear or all_at_once while the shadow runs, or remove shadow"
        )
