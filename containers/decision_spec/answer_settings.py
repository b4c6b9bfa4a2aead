"""The settings that change answers, as a model artifact records them: what its probabilities and actions were
measured under.

The settings of the registry's `answers` kind (decision_spec/decision_settings.py: their defaults and bounds), each
optional. One model, read by the adapter (manifest.json's `answer_settings`, adopted at start by
`settings.adopt_answer_settings`), by decisionctl (`package-model --answer-setting` writes it; an evaluation record
holds those its run served) and by the stacks (cdk.json's `model.answer_settings`: this model, strict). Each field
is the registry's field of the same name, `DECISION_<NAME>`, with its bounds (the same types); None: not recorded,
so the adapter's environment or default decides. tests/adapter/test_answer_settings.py checks that both sides agree and
that every other setting leaves answers alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from decision_spec.contract import OptionLabels, StateBoundary
from decision_spec.decision_settings import DebiasedOptions, LabelMass, OrderDebias, RotatedOptions, Tolerance

ENV_PREFIX = "DECISION_"
# The answer settings x_run reports, and a policy records, under their own names (RunIdentity's and Policy's).
REPORTED_AS = {
    "order_debias": "order_debias_mode",
    "adaptive_tolerance": "order_debias_tolerance",
    "state_boundary": "state_boundary",
    "option_labels": "option_labels",
}


class AnswerSettings(BaseModel):
    """Order debiasing and its tolerance, the state boundary, the option labels, the out-of-scope option, the minimum
    label mass and the option counts that are debiased or rotated: each one moves a probability or an action."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    order_debias: OrderDebias | None = Field(None, description="DECISION_ORDER_DEBIAS: the option orders read.")
    adaptive_tolerance: Tolerance | None = Field(
        None, description="DECISION_ADAPTIVE_TOLERANCE: how far adaptive may stop from every rotation."
    )
    state_boundary: StateBoundary | None = Field(
        None,
        description="DECISION_STATE_BOUNDARY: how the generic prompt marks the state as data (off, tagged, "
        "datamarked, sandwiched, spotlit).",
    )
    option_labels: OptionLabels | None = Field(
        None,
        description="DECISION_OPTION_LABELS: what the generic prompt's answer names an option by (letters, names).",
    )
    out_of_scope: bool | None = Field(
        None, description="DECISION_OUT_OF_SCOPE: every question offered a 'none of these' option."
    )
    min_label_mass: LabelMass | None = Field(
        None, description="DECISION_MIN_LABEL_MASS: abstain below this label mass."
    )
    rotation_max_options: RotatedOptions | None = Field(
        None, description="DECISION_ROTATION_MAX_OPTIONS: questions read in every rotation."
    )
    debias_max_options: DebiasedOptions | None = Field(
        None, description="DECISION_DEBIAS_MAX_OPTIONS: questions read in more than one order."
    )

    def recorded(self) -> dict[str, Any]:
        """The settings recorded, by name (JSON values)."""
        return self.model_dump(mode="json", exclude_none=True)


class ArtifactAnswerSettings(AnswerSettings):
    """The settings that change answers (AnswerSettings: the one model the adapter, decisionctl and the stacks read),
    as cdk.json states them and the evaluation record holds them: strict, as every cdk.json section; null or absent:
    not stated."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


# x_run reports every answer setting: REPORTED_AS's under their own names there, the others under theirs (a policy
# records only REPORTED_AS's: the others were not measured into it). RunIdentity has a field for each.
RUN_REPORTS = tuple(AnswerSettings.model_fields)


def variable(name: str) -> str:
    """The adapter's environment variable of an answer setting."""
    return ENV_PREFIX + name.upper()


def shown(value: object) -> str:
    """A setting's value as its environment variable writes it."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def reported(fields: Mapping[str, Any]) -> AnswerSettings:
    """The answer settings an x_run (or a policy block) reports under its own names (REPORTED_AS); a tolerance only
    with adaptive, the one mode that reads it."""
    values = {name: fields.get(field) for name, field in REPORTED_AS.items()}
    if values["order_debias"] != "adaptive":
        values["adaptive_tolerance"] = None
    return AnswerSettings.model_validate(values)


def run_answer_settings(run: Mapping[str, Any]) -> AnswerSettings:
    """The answer settings an x_run (a run identity) reports: those `reported` reads, and the rest of RUN_REPORTS
    under their own names."""
    rest = {name: run.get(name) for name in RUN_REPORTS if name not in REPORTED_AS}
    return AnswerSettings.model_validate({**reported(run).model_dump(), **rest})


def contradictions(first: AnswerSettings, second: AnswerSettings) -> dict[str, tuple[Any, Any]]:
    """The settings both record, with different values: name -> (first's, second's)."""
    a, b = first.recorded(), second.recorded()
    both = [name for name in AnswerSettings.model_fields if name in a and name in b]
    return {name: (a[name], b[name]) for name in both if a[name] != b[name]}


def merged(first: AnswerSettings, fallback: AnswerSettings) -> AnswerSettings:
    """`first`'s settings, and `fallback`'s where `first` records none."""
    return AnswerSettings.model_validate({**fallback.recorded(), **first.recorded()})


ANSWER_VARIABLES = tuple(variable(name) for name in AnswerSettings.model_fields)  # their DECISION_* variables
