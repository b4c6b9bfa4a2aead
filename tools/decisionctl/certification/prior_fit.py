"""The fit-prior use case: the model's slot prior fitted from unlabeled requests and written into a manifest."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path

from decision_spec.manifest import read_manifest

from decisionctl.certification import manifests
from decisionctl.certification.slot_prior import FitError, choice_items, fit_prior, to_slot_prior
from decisionctl.transport import RetryPolicy, Sender


def fit_slot_prior(
    requests: Path,
    manifest_path: Path,
    *,
    connect: Callable[[], Sender],
    retry: RetryPolicy,
    report: Path | None,
    say: Callable[[str], None],
) -> bool:
    """Fit the prior on `requests`' choice questions and write it into the manifest (and `report`); every step is
    said. False where nothing was written: the manifest or requests unreadable, the fit or the manifest refused."""
    try:
        manifest = read_manifest(manifest_path)
        items = list(choice_items(requests))
    except (OSError, ValueError) as exc:
        say(str(exc))
        return False
    say(f"fit-prior: {len(items)} choice questions, {sum(len(i.options) for i in items)} reads")
    endpoint = connect()
    try:
        fit = fit_prior(endpoint, items, retry, say)
        prior = to_slot_prior(fit, requests, created=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
    except FitError as exc:
        say(str(exc))
        return False
    finally:
        endpoint.close()
    try:
        manifests.write_slot_prior(manifest_path, manifest, prior)
    except manifests.ManifestRefused as exc:
        say(str(exc))
        return False
    block = prior.model_dump(mode="json")
    if report is not None:
        report.write_text(json.dumps(block, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    for n, slots in block["slots"].items():
        say(f"  {n} options ({block['fitted_on']['questions'][n]} questions): " + " ".join(f"{p:.3f}" for p in slots))
    say(f"wrote slot_prior into {manifest_path}")
    if manifest.policy is not None:
        say(
            "the manifest's policy was measured under the previous calibration, so the adapter will refuse it: "
            "measure it again with `decisionctl evaluate --write-policy`"
        )
    return True
