"""The yes/no intercept as the manifest holds it, as the calibration in force carries it and x_run reports it, and the
adaptive stopping rule with it (no model)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from decision_adapter.adaptive import reported, settled
from decision_adapter.calibration import calibration_in_force
from decision_spec.gguf_metadata import Temperatures
from decision_spec.manifest import Calibration, read_manifest, write_manifest
from decision_spec.schemas import CalibrationInForce
from pydantic import ValidationError

ROOT = Path(__file__).resolve().parents[2]
SHA = "ab" * 32


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 20.5, -21.0])
def test_the_manifest_refuses_an_intercept_not_finite_or_out_of_range(bad: float) -> None:
    with pytest.raises(ValidationError, match="intercept for noul must be a finite number"):
        Calibration(intercept={"noul": bad})
    assert Calibration(intercept={"noul": -20.0}).intercept_for("noul") == -20.0


def test_only_yes_no_takes_an_intercept() -> None:
    with pytest.raises(ValidationError):
        Calibration.model_validate({"intercept": {"choice": 1.0}})
    block = Calibration(intercept={"noul": -1.15})
    assert (block.intercept_for("noul"), block.intercept_for("choice"), Calibration().intercept_for("noul")) == (
        -1.15,
        0.0,
        0.0,
    )


def test_the_shipped_manifest_holds_the_fitted_intercept_and_its_policy_binds_it(tmp_path: Path) -> None:
    """The decider's committed manifest carries the yes/no intercept `evaluate --fit-calibration` wrote
    (docs/decider.md), writes back byte for byte, and its policy is bound to that calibration: without the intercept
    it is another calibration, which the adapter refuses the policy under. No intercept writes no key for it."""
    shipped = ROOT / "evaluation" / "decider-manifest.json"
    manifest = read_manifest(shipped)
    assert manifest.calibration is not None and manifest.calibration.intercept_for("noul") < 0  # the lean to yes
    write_manifest(manifest, tmp_path / "manifest.json")
    assert (tmp_path / "manifest.json").read_bytes() == shipped.read_bytes()
    assert manifest.policy is not None and manifest.policy.calibration_sha256 == manifest.calibration_sha256()
    without = manifest.model_copy(update={"calibration": manifest.calibration.model_copy(update={"intercept": None})})
    assert without.calibration_sha256() != manifest.calibration_sha256()
    assert "intercept" not in json.dumps(Calibration(temperature={"noul": 2.0}).model_dump(exclude_none=True))


def test_the_calibration_in_force_carries_the_manifests_intercept_and_x_run_reports_it_only_when_set() -> None:
    fitted = Calibration(temperature={"noul": 2.0}, intercept={"noul": -1.15})
    active = calibration_in_force(fitted, model_sha256=SHA, template="t", declared=None)
    assert (active.intercept("noul"), active.intercept("choice"), active.temperature("noul", 2)) == (-1.15, 0.0, 2.0)
    described = active.describe()
    assert described.intercept == {"noul": -1.15}
    assert described.model_dump(mode="json")["intercept"] == {"noul": -1.15}
    for plain in (
        calibration_in_force(Calibration(temperature={"noul": 2.0}), model_sha256=SHA, template="t", declared=None),
        calibration_in_force(None, model_sha256=SHA, template="t", declared=Temperatures({"noul": 3.0})),
        calibration_in_force(Calibration(intercept={"noul": 0.0}), model_sha256=SHA, template="t", declared=None),
    ):
        assert plain.intercept("noul") == 0.0
        assert "intercept" not in plain.describe().model_dump(mode="json")  # not even null: identities compare equal
    old = {"source": "manifest", "temperature": {"noul": 2.0}, "slot_prior": None}
    assert CalibrationInForce.model_validate(old).model_dump(mode="json") == old


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("intercept", [-2.0, 1.5])
def test_adaptive_with_an_intercept_stops_only_within_the_tolerance_of_every_way_the_unread_orders_could_go(
    temperature: float, intercept: float
) -> None:
    """Yes/no with an out-of-scope option: 3 rotations, so adaptive may stop after 2 (alone it has 2 and reads both)."""
    rng = np.random.default_rng(11)
    n, k, tolerance, checked = 3, 2, 0.4, 0
    for _ in range(400):
        reads = rng.dirichlet(50 * rng.dirichlet(np.full(n, 0.5)) + 0.01, size=k)
        kw = {"temperature": temperature, "out_of_scope": True, "intercept": intercept}
        if not settled(reads.sum(axis=0), k, n, tolerance=tolerance, **kw):
            continue
        checked += 1
        now = reported(reads.mean(axis=0), temperature, out_of_scope=True, intercept=intercept)
        for _ in range(60):
            unread = rng.dirichlet(np.full(n, float(rng.choice([0.05, 1.0]))), size=n - k)
            full = reported(
                np.vstack([reads, unread]).mean(axis=0), temperature, out_of_scope=True, intercept=intercept
            )
            assert (full[0] >= 0.5) == (now[0] >= 0.5)  # the yes/no pick
            assert np.max(np.abs(full - now)) <= tolerance + 1e-12
    assert checked > 10


def test_reported_applies_the_intercept_to_yes_and_no_alone() -> None:
    mean = np.array([0.5, 0.3, 0.2])
    plain = reported(mean, 1.0, out_of_scope=True)
    moved = reported(mean, 1.0, out_of_scope=True, intercept=-1.0)
    logit = math.log(plain[0] / plain[1]) - 1.0
    assert moved[0] == pytest.approx(1 / (1 + math.exp(-logit)), abs=1e-12)
    assert moved[0] + moved[1] == pytest.approx(1.0) and moved[2] == plain[2]
