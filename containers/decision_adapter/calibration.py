"""The calibration in force: the temperatures answers are divided by, the slot prior divided out of each order's
distribution, the intercept added to a yes/no answer's log-odds, and the one rule for where they come from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np
from decision_spec.contract import QUESTION_TYPES
from decision_spec.gguf_metadata import DecisionMetadataError, Temperatures
from decision_spec.schemas import CalibrationInForce

from .core.signals import Vector


class FittedPrior(Protocol):
    """A slot prior as the manifest records it (manifest.SlotPrior): what it was fitted under, and its slots."""

    @property
    def model_sha256(self) -> str: ...
    @property
    def prompt_template(self) -> str: ...
    @property
    def slots(self) -> dict[str, list[float]]: ...


class FittedCalibration(Protocol):
    """The calibration block a manifest records (manifest.Calibration): a temperature per type, maybe a slot prior,
    maybe a yes/no intercept."""

    @property
    def slot_prior(self) -> FittedPrior | None: ...
    def for_type(self, qtype: str) -> float: ...
    def intercept_for(self, qtype: str) -> float: ...


class SlotPriorMismatch(DecisionMetadataError):
    """The manifest's slot prior was fitted under another model file or prompt template: refused at start (logged
    as model_not_loaded: the model cannot be served as its manifest declares)."""


@dataclass(frozen=True)
class ActiveCalibration:
    source: Literal["manifest", "gguf", "identity"]
    temperatures: Temperatures
    slot_prior: dict[int, Vector] = field(default_factory=dict)  # option count -> prior per slot (choice)
    intercepts: dict[str, float] = field(default_factory=dict)  # type -> log-odds shift of yes (noul; manifest only)

    def temperature(self, qtype: str, n_options: int) -> float:
        return self.temperatures.of(qtype, n_options)

    def intercept(self, qtype: str) -> float:
        """b, added to a yes/no answer's log-odds of yes after the temperature: p_yes = sigmoid(z / T + b); 0 for
        other types and where none is set."""
        return self.intercepts.get(qtype, 0.0) if qtype == "noul" else 0.0

    def prior_of(self, qtype: str, n_slots: int) -> Vector | None:
        """The slot prior a question's orders are divided by: choice questions of a fitted option count only
        (yes/no and score options mean something in their order; an out-of-scope question has one slot more)."""
        return self.slot_prior.get(n_slots) if qtype == "choice" else None

    def describe(self) -> CalibrationInForce:
        """As run identity reports it."""
        prior = {str(n): [round(float(p), 6) for p in v] for n, v in sorted(self.slot_prior.items())} or None
        intercept = {t: float(b) for t, b in sorted(self.intercepts.items())} or None
        return CalibrationInForce(
            source=self.source, temperature=self.temperatures.describe(), slot_prior=prior, intercept=intercept
        )


def calibration_in_force(
    fitted: FittedCalibration | None, *, model_sha256: str, template: str, declared: Temperatures | None
) -> ActiveCalibration:
    """The manifest's temperatures first (`fitted`, for this model file), then those the GGUF declares (`declared`,
    the prompt scheme's), else none (T = 1). The manifest's slot prior, if any, only under the model (`model_sha256`,
    the manifest's) and the prompt template (the scheme's name) it was fitted under (SlotPriorMismatch otherwise).
    An intercept comes from the manifest alone (a GGUF declares none); one of 0 is none."""
    if fitted is not None:
        prior = checked_prior(fitted.slot_prior, model_sha256=model_sha256, template=template)
        temperatures = Temperatures({t: fitted.for_type(t) for t in QUESTION_TYPES})
        intercepts = {t: b for t in QUESTION_TYPES if (b := fitted.intercept_for(t))}
        return ActiveCalibration("manifest", temperatures, prior, intercepts)
    if declared is not None:
        return ActiveCalibration("gguf", declared)
    return ActiveCalibration("identity", Temperatures({}))


def checked_prior(prior: FittedPrior | None, *, model_sha256: str, template: str) -> dict[int, Vector]:
    """The prior's vectors per option count, after checking what it was fitted under."""
    if prior is None:
        return {}
    if prior.model_sha256 != model_sha256:
        raise SlotPriorMismatch(
            f"the manifest's slot prior was fitted on the model with sha256 {prior.model_sha256}, but the model "
            f"served has sha256 {model_sha256}; fit it again with `decisionctl fit-prior`"
        )
    if prior.prompt_template != template:
        raise SlotPriorMismatch(
            f"the manifest's slot prior was fitted under the prompt template {prior.prompt_template!r}, but the "
            f"adapter asks with {template!r}; fit it again with `decisionctl fit-prior`"
        )
    return {int(n): np.asarray(v, dtype=np.float64) for n, v in prior.slots.items()}
