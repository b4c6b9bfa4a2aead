"""The thresholds `evaluate` certifies (per question and per type, decisionctl.core.bands), as the policy block
a manifest serves, and what a policy does to a labeled set (the share of cases each action takes and the
accuracy within each).

The policy is bound to what the endpoint served while the cases were scored: the run identity's model
sha256 and calibration must be the manifest's, or the thresholds would be served with numbers they were
not measured on; its order-debiasing mode is recorded in the policy, and an adapter serving another mode
refuses the policy at start.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any

from decision_spec.contract import DEFAULT_REVIEW_INPUT_FLAGS
from decision_spec.manifest import Manifest
from decision_spec.policy import (
    ACTIONS,
    Band,
    Certificate,
    CertifiedMix,
    OptionMix,
    Policy,
    Provenance,
    QuestionBand,
    seal,
    verdict,
)

from decisionctl.core import metrics
from decisionctl.core.labeled import Prediction
from decisionctl.core.served_calibration import check_run_served


def band_of(entry: Mapping[str, Any], certification: Mapping[str, Any]) -> Band:
    """A certified band as the policy holds it (entry: one question's or type's bands.certify_group)."""
    auto, review = entry["automate"], entry["review"]
    certificate = Certificate(
        method=certification["method"],
        max_error=certification["max_error"],
        confidence=certification["confidence"],
        labels_sha256=entry["labels_sha256"],
        cases=entry["cases"],
        automated=auto["cases"] if auto else 0,
        errors=auto["errors"] if auto else 0,
        bound=auto["bound"] if auto else None,
        review_max_error=entry["review_max_error"],
        reviewed=review["cases"] if review else 0,
        review_errors=review["errors"] if review else 0,
        review_bound=review["bound"] if review else None,
    )
    return Band(
        automate_at_or_above=entry["automate_at_or_above"],
        review_at_or_above=entry["review_at_or_above"],
        support=entry["cases"],
        certificate=certificate,
    )


def certified_mix(results: Mapping[str, Any], keys: Mapping[str, str] | None) -> CertifiedMix | None:
    """What the certified bands did on the cases: each action's share (from the question bands where the cases
    name their questions, else the type bands) and, per question (`keys`: case id -> x_options_sha256), the
    share of its cases that picked each option. None without scored cases."""
    certification = results["certification"]
    bands = list(certification["questions"].values()) or list(certification["types"].values())
    cases = sum(b["cases"] for b in bands)
    if not cases:
        return None
    automated = sum(b["automate"]["cases"] for b in bands if b["automate"])
    reviewed = sum(b["review"]["cases"] for b in bands if b["review"])
    actions = {
        "automate": automated / cases,
        "review": reviewed / cases,
        "abstain": (cases - automated - reviewed) / cases,
    }
    picks: dict[str, list[Mapping[str, Any]]] = {}
    for p in results.get("predictions", []):
        key = keys.get(p["id"]) if keys else None
        if key is not None:
            picks.setdefault(key, []).append(p)
    questions = {
        key: OptionMix(
            type=ps[0]["type"],
            cases=len(ps),
            options=list(ps[0]["options"]),
            shares=[sum(1 for p in ps if p["predicted_index"] == i) / len(ps) for i in range(len(ps[0]["options"]))],
        )
        for key, ps in sorted(picks.items())
    }
    return CertifiedMix(cases=cases, actions=actions, questions=questions)


def from_results(
    results: Mapping[str, Any],
    manifest: Manifest,
    *,
    created: date,
    keys: Mapping[str, str] | None = None,
    review_input_flags: Sequence[str] | None = None,
) -> Policy:
    """The policy block for `results` (evaluate's results.json), bound to `manifest`'s model and calibration:
    its certified bands, per question and per type (the fallback for questions the cases never asked), and
    the mix they gave on the cases (`keys`: each case's x_options_sha256, for the option mix per question).
    `review_input_flags`: the input flags whose answers go to review; None keeps the previous policy's list, or, with
    no previous policy or one that recorded none, DEFAULT_REVIEW_INPUT_FLAGS (docs/security.md)."""
    check_run_served(results.get("identity"), manifest)
    certification = results["certification"]
    types = {t: band_of(entry, certification) for t, entry in certification["types"].items()}
    questions = {
        key: QuestionBand(type=entry["type"], **band_of(entry, certification).model_dump())
        for key, entry in certification["questions"].items()
    }
    provenance = Provenance(
        cases_file=str(results["cases_file"]).replace("\\", "/").rsplit("/", 1)[-1],
        cases_sha256=results["cases_sha256"],
        target_accuracy=1.0 - certification["max_error"],
        min_support=certification["min_support"],
        review_accuracy=certification["review_accuracy"],
        created=created.isoformat(),
    )
    previous = manifest.policy
    identity = results.get("identity") or {}
    return seal(
        model_sha256=manifest.sha256,
        calibration_sha256=manifest.calibration_sha256(),
        types=types,
        questions=questions,
        provenance=provenance,
        # limits an operator set on the previous policy are not measured by evaluate: keep them
        min_label_mass=previous.min_label_mass if previous else None,
        out_of_scope_at_or_above=previous.out_of_scope_at_or_above if previous else None,
        order_debias_mode=identity.get("order_debias_mode"),
        order_debias_tolerance=identity.get("order_debias_tolerance"),
        certified_mix=certified_mix(results, keys),
        state_boundary=identity.get("state_boundary"),
        option_labels=identity.get("option_labels"),
        review_input_flags=_reviewed_flags(review_input_flags, previous),
    )


def _reviewed_flags(given: Sequence[str] | None, previous: Policy | None) -> Sequence[str]:
    """The option's flags, else the previous policy's (its [] is an opt-out, kept), else the default."""
    if given is not None:
        return given
    if previous is not None and previous.review_input_flags is not None:
        return previous.review_input_flags
    return DEFAULT_REVIEW_INPUT_FLAGS


def action_table(
    preds: Sequence[Prediction], policy: Policy, keys: Mapping[str, str] | None = None
) -> dict[str, dict[str, dict[str, Any]]]:
    """Per type: for each action, the cases the policy's bands give it (each case its question's band, where
    `keys` gives each case's x_options_sha256), their share and the accuracy among them (label mass and out of
    scope are not in the predictions: this is the confidence band alone)."""
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for qtype, group in metrics.by_type(preds).items():
        taken: dict[str, list[Prediction]] = {a: [] for a in ACTIONS}
        for p in group:
            key = keys.get(p.id) if keys else None
            taken[verdict(policy, qtype, p.probs, options_sha256=key).action].append(p)
        table[qtype] = {
            action: {
                "cases": len(members),
                "share": len(members) / len(group),
                "accuracy": metrics.accuracy(members),
            }
            for action, members in taken.items()
        }
    return table
