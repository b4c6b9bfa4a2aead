"""x_run.min_label_mass names the floor that acts (issue 46): the policy's own where DECISION_MIN_LABEL_MASS is unset,
the environment's where it is set, and null where neither sets one. A caller, and the evaluation record made from
x_run, then see the floor that decided the abstentions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from decision_spec.manifest import calibration_sha256, read_manifest, write_manifest
from decision_spec.policy import Band, Certificate, Provenance, seal

from tests.app_support import start_app
from tests.conftest import copy_model, require_model

pytestmark = [pytest.mark.model]

CERTIFICATE = Certificate(
    method="fallback-clopper-pearson/1", max_error=0.05, confidence=0.95, labels_sha256="e" * 64, cases=20,
    automated=0, errors=0, bound=1.0,
)  # fmt: skip
QUESTION = {"q": {"type": "noul", "instructions": "Is this a refund request?"}}


def floor_served(model: Path, env: dict[str, str] | None = None) -> Any:
    adapter = start_app(model_dir=model, env=env)
    try:
        reply = httpx.post(
            adapter.url + "/v1/systemone", json={"state": "Refund me.", "questions": QUESTION}, timeout=120
        )
        assert reply.status_code == 200, reply.text
        return reply.json()["x_run"].get("min_label_mass")  # left out where none acts (null fields are not sent)
    finally:
        adapter.stop()


def test_the_floor_that_acts_is_reported(tmp_path: Path) -> None:
    require_model()
    bare = copy_model(tmp_path / "bare")
    with_floor = copy_model(tmp_path / "floor")
    manifest = read_manifest(with_floor / "manifest.json")
    policy = seal(
        model_sha256=manifest.sha256,
        calibration_sha256=calibration_sha256(manifest.calibration),
        types={"noul": Band(automate_at_or_above=None, review_at_or_above=0.5, support=10, certificate=CERTIFICATE)},
        min_label_mass=0.2,
        provenance=Provenance(
            cases_file="cases.jsonl", cases_sha256="a" * 64, target_accuracy=0.9, min_support=5, review_accuracy=0.5,
            created="2026-12-03",
        ),
    )  # fmt: skip
    write_manifest(manifest.model_copy(update={"policy": policy}), with_floor / "manifest.json")
    assert floor_served(bare) is None  # no policy, no setting: no floor acts
    assert floor_served(with_floor) == 0.2  # the policy's (null before issue 46)
    assert floor_served(with_floor, {"DECISION_MIN_LABEL_MASS": "0.4"}) == 0.4  # the environment's
