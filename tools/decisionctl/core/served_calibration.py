"""Whether scored predictions were made under a manifest: its model, its calibration (temperatures, yes/no intercept,
slot prior, as the run identity's x_run.calibration reports them) and its answer settings. What evaluate writes into
a manifest, and what a record says was served, is measured under it or refused."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from decision_spec.answer_settings import AnswerSettings, contradictions, run_answer_settings
from decision_spec.manifest import Calibration, Manifest

PRIOR_DIGITS = 6  # x_run reports the prior rounded so (decision_adapter.calibration)


def calibration_mismatch(
    identity: Mapping[str, Any] | None, manifest: Manifest, *, temperatures_too: bool = True
) -> str | None:
    """What differs between the calibration the run served and the manifest's, in words; None where they agree.
    Without `temperatures_too` only the slot prior is compared (a temperature fit works from the temperatures and the
    intercept the answers were served with, whichever they were, and takes the intercept off; the prior it cannot
    undo)."""
    calibration = (identity or {}).get("calibration") or {}
    source = calibration.get("source")
    if manifest.calibration is None:
        if source == "manifest" and temperatures_too:
            return f"the cases were scored under calibration {dict(calibration)}, which is not the manifest's (none)"
        return None
    served_prior = _prior(calibration.get("slot_prior"))
    prior = manifest.calibration.slot_prior
    held = _prior(prior.slots if prior is not None else None)
    if served_prior != held:  # named first: a prior fitted and not yet served is the usual cause (byom.md step 5)
        return (
            f"the cases were scored under the slot prior {served_prior or 'none'}, but the manifest holds "
            f"{held or 'none'} (the adapter was not restarted on it, or the predictions in --out are older)"
        )
    return _scaling_mismatch(identity, manifest.calibration) if temperatures_too else None


def _scaling_mismatch(identity: Mapping[str, Any] | None, held: Calibration) -> str | None:
    """What differs between the temperatures and the yes/no intercept the run served and the manifest's `held`."""
    calibration = (identity or {}).get("calibration") or {}
    temperatures = calibration.get("temperature") or {}
    wanted = {t: held.for_type(t) for t in temperatures}
    if calibration.get("source") != "manifest" or {t: float(v) for t, v in temperatures.items()} != wanted:
        return (
            f"the cases were scored under calibration {dict(calibration)}, which is not the manifest's "
            f"({held.temperature or 'no temperatures'})"
        )
    served_b = {t: float(b) for t, b in (calibration.get("intercept") or {}).items() if b}  # 0 is none
    held_b = {t: b for t, b in (held.intercept or {}).items() if b}
    if served_b != held_b:
        return (
            f"the cases were scored under the yes/no intercept {served_b or 'none'}, but the manifest holds "
            f"{held_b or 'none'} (the adapter was not restarted on it, or the predictions in --out are older)"
        )
    return None


def served_intercept(identity: Mapping[str, Any] | None, qtype: str) -> float:
    """The intercept the run served for this type (x_run.calibration.intercept; 0 where it reports none)."""
    calibration = (identity or {}).get("calibration") or {}
    return float((calibration.get("intercept") or {}).get(qtype, 0.0))


def _prior(slots: Mapping[str, Any] | None) -> dict[str, list[float]]:
    """The prior per option count as x_run rounds it; a uniform one divides nothing out, so it counts as none."""
    rounded = {str(n): [round(float(p), PRIOR_DIGITS) for p in v] for n, v in (slots or {}).items()}
    return {n: v for n, v in rounded.items() if max(v) - min(v) > 10**-PRIOR_DIGITS}


class PolicyRefused(ValueError):
    """A policy that must not be written: the run was not scored under the manifest's model and calibration."""


def check_run_served(identity: Mapping[str, Any] | None, manifest: Manifest) -> None:
    """The evaluated run served this manifest's model, calibration and the answer settings its block records;
    PolicyRefused otherwise."""
    run = identity or {}
    served = run.get("model_sha256")
    if served != manifest.sha256:
        raise PolicyRefused(
            f"the cases were scored on model sha256 {served or 'not reported'}, but the manifest is for "
            f"{manifest.sha256}: serve this manifest's model and evaluate again"
        )
    # the temperatures and the slot prior in force must be the manifest's: then the served numbers are those measured
    mismatch = calibration_mismatch(run, manifest)
    if mismatch:
        raise PolicyRefused(f"{mismatch}: restart the adapter on this manifest and evaluate again")
    # an adapter adopts the manifest's answer settings at start: another value means it serves another artifact
    # (its block only: a policy written now replaces the one there, and the modes that policy was measured under)
    contradicted = contradictions(run_answer_settings(run), manifest.answer_settings or AnswerSettings())
    if contradicted:
        scored = ", ".join(f"{name} {value}" for name, (value, _) in contradicted.items())
        recorded = ", ".join(f"{name} {value}" for name, (_, value) in contradicted.items())
        raise PolicyRefused(
            f"the cases were scored under {scored}, but the manifest records {recorded}: restart the adapter on "
            "this manifest (it adopts the manifest's answer settings) and evaluate again"
        )
