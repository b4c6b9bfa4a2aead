"""The thresholds `evaluate` recommends, as the policy block a manifest serves, and what a policy does to a
labeled set (the share of cases each action takes and the accuracy within each).

The policy is bound to what the endpoint served while the cases were scored: the run identity's model
sha256 and calibration must be the manifest's, or the thresholds would be served with numbers they were
not measured on; its order-debiasing mode is recorded in the policy, and an adapter serving another mode
refuses the policy at start.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any

from decision_adapter.manifest import Manifest
from decision_adapter.policy import ACTIONS, Band, Policy, Provenance, seal, verdict

from decisionctl import metrics
from decisionctl.cases import Prediction


class PolicyRefused(ValueError):
    """A policy that must not be written: the run was not scored under the manifest's model and calibration."""


def check_run_served(identity: Mapping[str, Any] | None, manifest: Manifest) -> None:
    """The evaluated run served this manifest's model and calibration; PolicyRefused otherwise."""
    run = identity or {}
    served = run.get("model_sha256")
    if served != manifest.sha256:
        raise PolicyRefused(
            f"the cases were scored on model sha256 {served or 'not reported'}, but the manifest is for "
            f"{manifest.sha256}: serve this manifest's model and evaluate again"
        )
    # the temperatures in force must be the manifest's: then the served numbers are the ones measured
    calibration = run.get("calibration") or {}
    source, temperatures = calibration.get("source"), calibration.get("temperature") or {}
    if manifest.calibration is None:
        matches = source != "manifest"
    else:
        wanted = {t: manifest.calibration.for_type(t) for t in temperatures}
        matches = source == "manifest" and {t: float(v) for t, v in temperatures.items()} == wanted
    if not matches:
        raise PolicyRefused(
            f"the cases were scored under calibration {dict(calibration)}, which is not the manifest's "
            f"({manifest.calibration.temperature if manifest.calibration else 'none'}): restart the adapter on this "
            "manifest and evaluate again"
        )


def from_results(results: Mapping[str, Any], manifest: Manifest, *, created: date) -> Policy:
    """The policy block for `results` (evaluate's results.json), bound to `manifest`'s model and calibration."""
    check_run_served(results.get("identity"), manifest)
    recommendations = results["recommendation"]
    types: dict[str, Band] = {}
    by_type = metrics.by_type([Prediction.from_json(p) for p in results["predictions"]])
    for qtype, preds in by_type.items():
        rec = recommendations[qtype]
        band = rec["review_band"]
        types[qtype] = Band(
            automate_at_or_above=rec["automate_at_or_above"],
            review_at_or_above=band[0] if band is not None else None,
            support=len(preds),
        )
    overall = recommendations["overall"]
    provenance = Provenance(
        cases_file=str(results["cases_file"]).replace("\\", "/").rsplit("/", 1)[-1],
        cases_sha256=results["cases_sha256"],
        target_accuracy=overall["target_accuracy"],
        min_support=overall["min_support"],
        review_accuracy=overall["review_accuracy"],
        created=created.isoformat(),
    )
    previous = manifest.policy
    return seal(
        model_sha256=manifest.sha256,
        calibration_sha256=manifest.calibration_sha256(),
        types=types,
        provenance=provenance,
        # limits an operator set on the previous policy are not measured by evaluate: keep them
        min_label_mass=previous.min_label_mass if previous else None,
        out_of_scope_at_or_above=previous.out_of_scope_at_or_above if previous else None,
        order_debias_mode=(results.get("identity") or {}).get("order_debias_mode"),
    )


def action_table(preds: Sequence[Prediction], policy: Policy) -> dict[str, dict[str, dict[str, Any]]]:
    """Per type: for each action, the cases the policy's bands give it, their share and the accuracy among
    them (label mass and out of scope are not in the predictions: this is the confidence band alone)."""
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for qtype, group in metrics.by_type(preds).items():
        taken: dict[str, list[Prediction]] = {a: [] for a in ACTIONS}
        for p in group:
            taken[verdict(policy, qtype, p.probs).action].append(p)
        table[qtype] = {
            action: {
                "cases": len(members),
                "share": len(members) / len(group),
                "accuracy": metrics.accuracy(members),
            }
            for action, members in taken.items()
        }
    return table
