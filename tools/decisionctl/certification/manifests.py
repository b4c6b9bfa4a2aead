"""What decisionctl writes into a manifest.json (fitted temperatures, a slot prior, a certified policy) and the
policy it reads back from one; each refusal leaves the manifest unchanged and says why."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from decision_spec.manifest import Calibration, Manifest, SlotPrior, read_manifest, write_manifest
from decision_spec.policy import Policy

from decisionctl.core.served_calibration import calibration_mismatch


class ManifestRefused(ValueError):
    """The manifest was not changed; the message says why."""


def write_temperatures(
    path: Path, calibration: Calibration, *, served: Mapping[str, Any] | None, improved: bool
) -> str:
    """Fitted temperatures (and a yes/no intercept) into the manifest at `path` if they lowered the held-out ECE; what
    happened, as text. `served`: the run identity the predictions were made under (served_under)."""
    manifest = served_under(path, served)
    if not improved:
        return f"{path} was not changed, because the fitted calibration did not lower the held-out ECE"
    if manifest.calibration is not None and manifest.calibration.slot_prior is not None:
        # the temperatures were fitted on answers the prior had already been divided out of: keep it with them
        calibration = calibration.model_copy(update={"slot_prior": manifest.calibration.slot_prior})
    write_manifest(manifest.model_copy(update={"calibration": calibration}), path)
    written = "the temperatures and the yes/no intercept" if calibration.intercept else "the temperatures"
    return (
        f"wrote {written} into {path}; restart the adapter (or re-run package-model and "
        "redeploy) and run evaluate again into a new --out directory to confirm"
    )


def served_under(path: Path, served: Mapping[str, Any] | None) -> Manifest:
    """The manifest at `path`, if the predictions' run identity `served` is its model and its slot prior
    (temperatures are fitted on answers the prior was divided out of); ManifestRefused otherwise."""
    manifest = read_manifest(path)
    served_sha256 = (served or {}).get("model_sha256")
    if served_sha256 != manifest.sha256:
        raise ManifestRefused(
            f"{path} is for model sha256 {manifest.sha256}, but the endpoint served {served_sha256 or 'not reported'}: "
            "the manifest was not changed"
        )
    mismatch = calibration_mismatch(served, manifest, temperatures_too=False)
    if mismatch:
        raise ManifestRefused(
            f"{mismatch}: restart the adapter on {path} and evaluate again into a new --out directory; the manifest "
            "was not changed"
        )
    return manifest


def write_slot_prior(path: Path, manifest: Manifest, prior: SlotPrior) -> None:
    """The fitted slot prior into `manifest` (read from `path`), refused if the endpoint served another model."""
    if prior.model_sha256 != manifest.sha256:
        raise ManifestRefused(
            f"the endpoint serves the model with sha256 {prior.model_sha256}, but {path} is for "
            f"{manifest.sha256}: nothing written"
        )
    calibration = (manifest.calibration or Calibration()).model_copy(update={"slot_prior": prior})
    write_manifest(manifest.model_copy(update={"calibration": calibration}), path)


def write_policy(path: Path, manifest: Manifest, policy: Policy) -> str:
    """`policy` into `manifest` at `path` unless it holds it already; what happened, as text."""
    if manifest.policy == policy:
        return f"{path} already holds policy {policy.version}"
    write_manifest(manifest.model_copy(update={"policy": policy}), path)
    return (
        f"wrote policy {policy.version} into {path}; restart the adapter (or re-run package-model and "
        "redeploy): its answers then carry x_action and x_run.policy names this version"
    )
