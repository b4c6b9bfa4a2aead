"""A manifest's yes/no intercept served over HTTP on the real model: p_yes = sigmoid(z / T + b), exactly the answer
served without it shifted on the log-odds, with T = 1 and with a temperature; choice and score answers untouched;
x_run reports the intercept, and nothing new where none is set."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import httpx
import pytest
from decision_spec.manifest import Calibration, read_manifest, write_manifest

from tests.app_support import app_server

pytestmark = pytest.mark.model

REQUEST = {
    "model": "jev-latest",
    "state": "I was charged twice for my March invoice; please refund the duplicate.",
    "questions": {
        "refund": {"type": "noul", "instructions": "Is the customer asking for money back?"},
        "plain": {"type": "noul"},
        "team": {
            "type": "choice",
            "instructions": "Which team should handle this?",
            "criteria": {"Billing": "payments, refunds", "Technical": "bugs, log-in", "Sales": None},
        },
        "anger": {
            "type": "score",
            "instructions": "How frustrated is the customer?",
            "criteria": ["Calm", "Frustrated", "Very angry"],
        },
    },
}
NOUL = ("refund", "plain")
OTHERS = ("team", "anger")


def served(model: Path, calibration: Calibration | None) -> dict[str, Any]:
    """The response to REQUEST from an app on `model` whose manifest holds `calibration`."""
    manifest = read_manifest(model / "manifest.json")
    write_manifest(manifest.model_copy(update={"calibration": calibration}), model / "manifest.json")
    with app_server(model_dir=model) as app:
        response = httpx.post(app.url + "/v1/systemone", json=REQUEST, timeout=300)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def shifted(p: float, b: float) -> float:
    return 1.0 / (1.0 + math.exp(-(math.log(p / (1.0 - p)) + b)))


@pytest.mark.parametrize(("temperature", "b"), [(None, -1.3), (2.5, 0.7)])
def test_a_yes_no_answer_is_the_unshifted_one_moved_by_the_intercept_and_others_are_unchanged(
    model_copy: Path, temperature: float | None, b: float
) -> None:
    temperatures = {} if temperature is None else {"noul": temperature}
    without = served(model_copy, Calibration(temperature=temperatures) if temperatures else None)
    with_b = served(model_copy, Calibration(temperature=temperatures, intercept={"noul": b}))
    for qid in NOUL:
        p0, p = without["answers"][qid]["noul"], with_b["answers"][qid]["noul"]
        assert 0.0 < p0 < 1.0
        assert p == pytest.approx(shifted(p0, b), abs=1e-6)
        assert abs(p - p0) > 1e-3  # the intercept moved it
    for qid in OTHERS:
        assert with_b["answers"][qid] == without["answers"][qid]
    assert with_b["x_run"]["calibration"]["intercept"] == {"noul": b}
    assert with_b["x_run"]["calibration"]["temperature"]["noul"] == (temperature or 1.0)
    assert "intercept" not in without["x_run"]["calibration"]  # none set: nothing new reported
