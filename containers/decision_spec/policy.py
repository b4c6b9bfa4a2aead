"""The threshold policy served with a model: which answers to automate, review or abstain on.

Pure, no I/O. `decisionctl evaluate --write-policy` measures the thresholds on labeled cases and writes
them into `manifest.json` as its `policy` block; the adapter checks at start that the policy was
measured on the model and the calibration it serves, and gives every answer an action.

A policy holds bands per question (keyed by the answer's `x_options_sha256`, the hash of the question's type,
instructions and options) and per type, the fallback for questions the cases never asked. Since
decision-policy/2 every band carries its certificate: the labeled cases, errors, bound, E, C and method its
automate threshold was certified with (docs/measure.md); decision-policy/1 policies are still served. A policy
may also record its certified mix (the action shares and option mix on those cases), which the stack's
decision-shift alarms compare live traffic with.

The value a threshold applies to is the one `evaluate` measures its coverage table on: the
probability of the option the answer picks (noul: max(p, 1 - p), yes when p >= 0.5; choice and
score: the largest probability over the declared options). It is not the contract's `confidence`
field, which rescales the top probability by the number of options.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from decision_spec.contract import (
    DEFAULT_REVIEW_INPUT_FLAGS,
    TOLERANCE,
    Action,
    DebiasMode,
    InputFlag,
    OptionLabels,
    QuestionType,
    Reason,
    StateBoundary,
    picked_probability,
)

POLICY_SCHEMA: Final = "decision-policy/2"
PolicySchema = Literal["decision-policy/1", "decision-policy/2"]  # /1: bands without certificates
ACTIONS: tuple[Action, ...] = get_args(Action)
BandSource = Literal["question", "type"]
BAND_REASONS: dict[BandSource, Reason] = {"question": "question_band", "type": "type_band"}
_HEX64 = r"^[0-9a-f]{64}$"
_HEX16 = r"^[0-9a-f]{16}$"


class PolicyError(ValueError):
    """A policy that cannot be served: measured under another model or calibration, or edited after sealing."""


class Certificate(BaseModel):
    """How a band's thresholds were certified and on what: with probability at least `confidence`, the error
    among the answers it automates is at most `max_error` on traffic like the cases (the review band's
    suggestions are wrong at most `review_max_error` of the time, a second claim at the same confidence)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: str = Field(description="The test and procedure (decisionctl.core.bounds.METHOD).")
    max_error: float = Field(gt=0.0, lt=1.0, description="E: the error allowed among automated answers.")
    confidence: float = Field(gt=0.0, lt=1.0, description="C: the probability the bound holds out of sample.")
    labels_sha256: str = Field(pattern=_HEX64, description="The label set: hash of the cases' ids and answers.")
    cases: int = Field(ge=0, description="Labeled cases of this question (or type).")
    automated: int = Field(ge=0, description="Cases at or above the automate threshold.")
    errors: int = Field(ge=0, description="Wrong answers among the automated cases.")
    bound: float | None = Field(
        None, ge=0.0, le=1.0, description="Exact upper bound at C on the automated error rate; None: none certified."
    )
    review_max_error: float | None = Field(None, gt=0.0, lt=1.0, description="1 - the review accuracy asked for.")
    reviewed: int = Field(0, ge=0, description="Cases in the review band.")
    review_errors: int = Field(0, ge=0, description="Wrong suggestions among them.")
    review_bound: float | None = Field(None, ge=0.0, le=1.0, description="Upper bound on their error rate.")


class Band(BaseModel):
    """Thresholds for one question type (or one question): automate at or above, review at or above."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    automate_at_or_above: float | None = Field(None, ge=0.0, le=1.0, description="None: automate nothing.")
    review_at_or_above: float | None = Field(None, ge=0.0, le=1.0, description="None: no review band.")
    support: int = Field(0, ge=0, description="Labeled cases these thresholds were measured on.")
    certificate: Certificate | None = Field(None, description="decision-policy/2: how they were certified.")

    @model_validator(mode="after")
    def _ordered(self) -> Band:
        auto, review = self.automate_at_or_above, self.review_at_or_above
        if auto is not None and review is not None and review > auto:
            raise ValueError(f"review_at_or_above ({review}) is above automate_at_or_above ({auto})")
        return self


class QuestionBand(Band):
    """Thresholds for the one question whose answers carry this `x_options_sha256`."""

    type: QuestionType


class Provenance(BaseModel):
    """Where the thresholds come from: the labeled cases and the targets they were chosen for."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cases_file: str = Field(description="The labeled file's name (no directories).")
    cases_sha256: str = Field(pattern=_HEX64)
    target_accuracy: float = Field(gt=0.0, le=1.0)
    min_support: int = Field(ge=1)
    review_accuracy: float = Field(ge=0.0, le=1.0)
    created: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$", description="UTC date; not part of the version.")


class OptionMix(BaseModel):
    """How often each option of one question was picked on the labeled cases a policy was certified on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: QuestionType
    cases: int = Field(ge=1)
    options: list[str] = Field(min_length=2, description="The question's options in declared order (noul: yes, no).")
    shares: list[float] = Field(description="Share of the cases that picked each option, in the same order.")

    @model_validator(mode="after")
    def _one_share_per_option(self) -> OptionMix:
        if len(self.shares) != len(self.options) or any(not 0.0 <= s <= 1.0 for s in self.shares):
            raise ValueError("shares must give one share in [0, 1] per option")
        return self


class CertifiedMix(BaseModel):
    """What the policy did on the cases it was certified on: the share of answers each action took (its bands on
    the cases' confidences) and each question's option mix. The stack alarms when live traffic leaves a band
    around these (stacks/decision_shift.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cases: int = Field(ge=1)
    actions: dict[Action, float] = Field(description="automate, review, abstain: shares of the cases, summing to 1.")
    questions: dict[str, OptionMix] = Field(default_factory=dict, description="Per x_options_sha256.")

    @model_validator(mode="after")
    def _shares_of_the_cases(self) -> CertifiedMix:
        if set(self.actions) != set(ACTIONS) or abs(sum(self.actions.values()) - 1.0) > 1e-6:
            raise ValueError(f"actions must give a share to each of {list(ACTIONS)}, summing to 1")
        return self


class Policy(BaseModel):
    """The `policy` block of manifest.json. `version` is a hash of the rest (the date left out), so a policy
    re-measured to the same thresholds on the same cases keeps its version and an edited one is noticed."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    schema_: PolicySchema = Field(POLICY_SCHEMA, alias="schema")
    version: str = Field(pattern=_HEX16)
    model_sha256: str = Field(pattern=_HEX64, description="The GGUF the thresholds were measured on.")
    calibration_sha256: str = Field(pattern=_HEX64, description="manifest.calibration_sha256 of the calibration.")
    order_debias_mode: DebiasMode | None = Field(
        None,
        description="The order-debiasing mode the thresholds were measured under (x_run.order_debias_mode); "
        "None: not recorded (a policy written before it was, or a GGUF scheme of its own).",
    )
    order_debias_tolerance: float | None = Field(
        None,
        description="With adaptive order-debiasing, the tolerance measured under (x_run.order_debias_tolerance).",
    )
    types: dict[QuestionType, Band] = Field(default_factory=dict)
    questions: dict[str, QuestionBand] = Field(
        default_factory=dict, description="Per x_options_sha256: one question's own thresholds."
    )
    min_label_mass: float | None = Field(None, gt=0.0, le=1.0, description="Abstain below this label mass.")
    out_of_scope_at_or_above: float | None = Field(
        None, gt=0.0, le=1.0, description="Abstain at this out-of-scope probability; None: when it is the top option."
    )
    provenance: Provenance
    certified_mix: CertifiedMix | None = Field(
        None, description="The action shares and option mix on the certifying cases; None: not recorded."
    )
    state_boundary: StateBoundary | None = Field(
        None,
        description="How the prompt marked the state as data when the thresholds were measured (x_run.state_boundary); "
        "None: not recorded.",
    )
    option_labels: OptionLabels | None = Field(
        None,
        description="What the prompt's answer named an option by when the thresholds were measured "
        "(x_run.option_labels); None: not recorded.",
    )
    review_input_flags: list[InputFlag] | None = Field(
        None,
        description="Answers raising any of these input flags (x_input_flags) go to review whatever their confidence "
        "(reason input_flagged). evaluate --write-policy writes the previous policy's list, else "
        f"{', '.join(DEFAULT_REVIEW_INPUT_FLAGS)} (DEFAULT_REVIEW_INPUT_FLAGS); []: no flag changes an action (the "
        "explicit opt-out, --review-input-flags none); None: not recorded (written before the default), no flag "
        "changes an action.",
    )

    @model_validator(mode="after")
    def _sealed(self) -> Policy:
        expected = content_version(self.model_dump(by_alias=True, mode="json"))
        if self.version != expected:
            raise ValueError(
                f"policy version {self.version} does not match its content (hash {expected}): it was edited after "
                "`decisionctl evaluate --write-policy` wrote it; write it again, or set version to the new hash"
            )
        for key in self.questions:
            if not _is_hex16(key):
                raise ValueError(f"questions are keyed by x_options_sha256 (16 hex digits), got {key!r}")
        if self.schema_ != POLICY_SCHEMA:
            return self
        bands = {
            **{f"type {t}": b for t, b in self.types.items()},
            **{f"question {k}": b for k, b in self.questions.items()},
        }
        for name, band in bands.items():
            if band.certificate is None:
                raise ValueError(f"{POLICY_SCHEMA}: the band of {name} has no certificate; write it with evaluate")
        return self

    def band_for(self, qtype: str, options_sha256: str | None) -> tuple[Band | None, BandSource]:
        """The band that applies to one answer and where it comes from ("question" or "type")."""
        own = self.questions.get(options_sha256) if options_sha256 else None
        if own is not None and own.type == qtype:
            return own, "question"
        return self.types.get(qtype), "type"  # type: ignore[call-overload]

    def band_name(self, qtype: str, options_sha256: str | None) -> str | None:
        """The key of the band serving an answer, as the decision log names it: the question's x_options_sha256
        where it has its own band, else its type; None where there is none."""
        band, source = self.band_for(qtype, options_sha256)
        if band is None:
            return None
        return options_sha256 if source == "question" else qtype

    def check_binding(self, *, model_sha256: str, calibration_sha256: str) -> None:
        """Refuse a policy measured under another model or calibration: its thresholds mean nothing here."""
        if self.model_sha256 != model_sha256:
            raise PolicyError(
                f"policy {self.version} was measured on the model with sha256 {self.model_sha256}, but the model "
                f"served has sha256 {model_sha256}; measure it again with `decisionctl evaluate --write-policy`"
            )
        if self.calibration_sha256 != calibration_sha256:
            raise PolicyError(
                f"policy {self.version} was measured under the calibration with hash {self.calibration_sha256}, but "
                f"the manifest's calibration hashes to {calibration_sha256} (calibration changed after the policy "
                "was written); measure it again with `decisionctl evaluate --write-policy`"
            )

    def _refuse_other(self, what: str, recorded: object, served: object, variable: str) -> None:
        """Refuse a policy measured under another value of a setting that moves probabilities."""
        if recorded is not None and served != recorded:
            shown = repr(recorded) if isinstance(recorded, str) else recorded
            raise PolicyError(
                f"policy {self.version} was measured with {what} {shown}, but the adapter serves "
                f"{served or 'none (the GGUF scheme of its own)'!r}: set {variable}={recorded}, or measure it again "
                "with `decisionctl evaluate --write-policy`"
            )

    def check_state_boundary(self, served: str | None) -> None:
        """Refuse a policy measured under another state boundary: the prompt, and so the probabilities, differ."""
        self._refuse_other("state boundary", self.state_boundary, served, "DECISION_STATE_BOUNDARY")

    def check_option_labels(self, served: str | None) -> None:
        """Refuse a policy measured under other option labels: the prompt and the answer read differ."""
        self._refuse_other("option labels", self.option_labels, served, "DECISION_OPTION_LABELS")

    def check_debias(self, served: str | None, tolerance: float | None = None) -> None:
        """Refuse a policy measured under another order-debiasing mode or adaptive tolerance: both move
        probabilities."""
        self._refuse_other("order-debiasing", self.order_debias_mode, served, "DECISION_ORDER_DEBIAS")
        self._refuse_other("adaptive tolerance", self.order_debias_tolerance, tolerance, "DECISION_ADAPTIVE_TOLERANCE")


def _is_hex16(s: str) -> bool:
    return len(s) == 16 and all(c in "0123456789abcdef" for c in s)


def canonical_sha256(value: Any) -> str:
    """sha256 of canonical JSON (sorted keys, no spaces): the hash of a manifest block."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def content_version(block: Mapping[str, Any]) -> str:
    """A policy block's version: the hash of everything but the version and the creation date."""
    content = {k: v for k, v in block.items() if k != "version"}
    recorded_later = ("order_debias_mode", "order_debias_tolerance", "certified_mix", "state_boundary", "option_labels")
    for key in (*recorded_later, "review_input_flags"):
        if content.get(key) is None:  # policies sealed before the field existed keep their version
            content.pop(key, None)
    for group in ("types", "questions"):  # decision-policy/1 bands have no certificate: their hash keeps
        if isinstance(content.get(group), Mapping):
            content[group] = {k: _without_empty_certificate(b) for k, b in content[group].items()}
    content["provenance"] = {k: v for k, v in dict(content.get("provenance") or {}).items() if k != "created"}
    return canonical_sha256(content)[:16]


def _without_empty_certificate(band: Any) -> Any:
    if isinstance(band, Mapping) and band.get("certificate", 0) is None:
        return {k: v for k, v in band.items() if k != "certificate"}
    return band


def seal(
    *,
    model_sha256: str,
    calibration_sha256: str,
    types: Mapping[str, Band],
    provenance: Provenance,
    questions: Mapping[str, QuestionBand] | None = None,
    min_label_mass: float | None = None,
    out_of_scope_at_or_above: float | None = None,
    order_debias_mode: str | None = None,
    order_debias_tolerance: float | None = None,
    schema: PolicySchema = POLICY_SCHEMA,
    certified_mix: CertifiedMix | None = None,
    state_boundary: str | None = None,
    review_input_flags: Sequence[str] | None = None,
    option_labels: str | None = None,
) -> Policy:
    """A policy with its version computed from its content."""
    block: dict[str, Any] = {
        "order_debias_mode": order_debias_mode,
        "order_debias_tolerance": order_debias_tolerance,
        "schema": schema,
        "model_sha256": model_sha256,
        "calibration_sha256": calibration_sha256,
        "types": {t: b.model_dump(mode="json") for t, b in types.items()},
        "questions": {k: b.model_dump(mode="json") for k, b in (questions or {}).items()},
        "min_label_mass": min_label_mass,
        "out_of_scope_at_or_above": out_of_scope_at_or_above,
        "provenance": provenance.model_dump(mode="json"),
        "certified_mix": certified_mix.model_dump(mode="json") if certified_mix is not None else None,
        "state_boundary": state_boundary,
        "option_labels": option_labels,
        "review_input_flags": list(review_input_flags) if review_input_flags is not None else None,
    }
    return Policy.model_validate({**block, "version": content_version(block)})


def confidence_of(qtype: str, probs: Sequence[float]) -> float:
    """The value thresholds apply to: the probability of the option the answer picks (see the module doc)."""
    return picked_probability(qtype, probs)


@dataclass(frozen=True)
class Verdict:
    """One answer's action and why."""

    action: Action
    reason: Reason


def verdict(  # noqa: PLR0911 - one return per rule, in the order the docstring gives
    policy: Policy,
    qtype: str,
    probs: Sequence[float],
    *,
    options_sha256: str | None = None,
    label_mass: float | None = None,
    min_label_mass: float | None = None,
    out_of_scope: float | None = None,
    input_flags: Sequence[str] = (),
) -> Verdict:
    """The action for one answer. `probs` are over the declared options (noul: yes, no); `out_of_scope` is
    the probability of the added "none of these" option among all n + 1; `min_label_mass` (the environment's)
    overrides the policy's. Out of scope wins over low label mass, which wins over an input flag the policy
    reviews (whatever the confidence), which wins over the confidence band."""
    if out_of_scope is not None and _out_of_scope(policy, probs, out_of_scope):
        return Verdict("abstain", "out_of_scope")
    floor = min_label_mass if min_label_mass is not None else policy.min_label_mass
    if floor is not None and label_mass is not None and label_mass < floor:
        return Verdict("abstain", "low_label_mass")
    if policy.review_input_flags and any(f in policy.review_input_flags for f in input_flags):
        return Verdict("review", "input_flagged")
    band, source = policy.band_for(qtype, options_sha256)
    if band is None:
        return Verdict("abstain", "not_measured")
    reason = BAND_REASONS[source]
    confidence = confidence_of(qtype, probs)
    if band.automate_at_or_above is not None and confidence >= band.automate_at_or_above - TOLERANCE:
        return Verdict("automate", reason)
    if band.review_at_or_above is not None and confidence >= band.review_at_or_above - TOLERANCE:
        return Verdict("review", reason)
    return Verdict("abstain", reason)


def _out_of_scope(policy: Policy, probs: Sequence[float], p_out: float) -> bool:
    if policy.out_of_scope_at_or_above is not None:
        return p_out >= policy.out_of_scope_at_or_above - TOLERANCE
    # the declared options share 1 - p_out among the n + 1; "none of these" is the top one when above them all
    top_declared = (1.0 - p_out) * max(probs)
    return p_out > top_declared
