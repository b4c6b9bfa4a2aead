"""The calibration in force: the temperatures answers are divided by, and the one rule for where they come from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .contract import QUESTION_TYPES
from .gguf_metadata import Temperatures
from .manifest import Manifest
from .prompting import PromptScheme
from .schemas import CalibrationInForce


@dataclass(frozen=True)
class ActiveCalibration:
    source: Literal["manifest", "gguf", "identity"]
    temperatures: Temperatures

    def temperature(self, qtype: str, n_options: int) -> float:
        return self.temperatures.of(qtype, n_options)

    def describe(self) -> CalibrationInForce:
        """As run identity reports it."""
        return CalibrationInForce(source=self.source, temperature=self.temperatures.describe())


def calibration_in_force(manifest: Manifest | None, scheme: PromptScheme) -> ActiveCalibration:
    """The manifest's temperatures first (fitted for this model file), then those the GGUF declares, else
    none (T = 1)."""
    if manifest is not None and manifest.calibration is not None:
        fitted = manifest.calibration
        return ActiveCalibration("manifest", Temperatures({t: fitted.for_type(t) for t in QUESTION_TYPES}))
    if scheme.declared_temperatures is not None:
        return ActiveCalibration("gguf", scheme.declared_temperatures)
    return ActiveCalibration("identity", Temperatures({}))
