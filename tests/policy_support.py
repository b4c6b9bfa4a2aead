"""Hand-made predictions and the results and manifests built from them, for the policy tests
(tests/decisionctl/test_decisionctl_policy.py, tests/decisionctl/test_certified_mix.py)."""

from __future__ import annotations

import random
from typing import Any

from decision_spec.manifest import Manifest
from decisionctl.core import bands, metrics
from decisionctl.core.labeled import Prediction

MODEL = "b" * 64


def pred(i: int, qtype: str, probs: list[float], expected: int) -> Prediction:
    predicted = (0 if probs[0] >= 0.5 else 1) if qtype == "noul" else max(range(len(probs)), key=probs.__getitem__)
    options = ["yes", "no"] if qtype == "noul" else [f"o{k}" for k in range(len(probs))]
    return Prediction(f"{qtype}-{i}", qtype, options, probs, expected, predicted, probs[predicted], None, 1.0, MODEL, 0)


def predictions(seed: int = 3) -> list[Prediction]:
    """Confident answers always right, unsure ones at chance: noul certifies an automate band at E = 0.05."""
    rng = random.Random(seed)
    out = []
    for i in range(800):
        p = rng.random()
        confident = abs(p - 0.5) > 0.4
        right = rng.random() < (1.0 if confident else 0.55)
        predicted = 0 if p >= 0.5 else 1
        out.append(pred(i, "noul", [p, 1 - p], predicted if right else 1 - predicted))
    for i in range(60):
        raw = [rng.random() ** 3 for _ in range(3)]
        probs = [x / sum(raw) for x in raw]
        top = max(range(3), key=probs.__getitem__)
        right = rng.random() < probs[top]
        out.append(pred(i, "choice", probs, top if right else (top + 1) % 3))
    return out


def keys_of(preds: list[Prediction]) -> dict[str, str]:
    """Two noul questions (even and odd cases) and one choice question, keyed as x_options_sha256 is."""
    return {p.id: ("1" if p.type == "choice" else "2" if int(p.id.split("-")[1]) % 2 else "3") * 16 for p in preds}


def results_for(preds: list[Prediction], identity: dict[str, Any]) -> dict[str, Any]:
    return {
        "cases_file": "runs/cases/my-cases.jsonl",
        "cases_sha256": "c" * 64,
        "identity": identity,
        **metrics.report(preds, 0.9, min_support=5),
        "certification": bands.report(
            preds, keys_of(preds), max_error=0.05, confidence=0.95, review_accuracy=0.5, min_support=5
        ),
        "predictions": [p.to_json() for p in preds],
    }


def served(manifest: Manifest, **calibration: Any) -> dict[str, Any]:
    return {"model_sha256": manifest.sha256, "calibration": calibration, "order_debias_mode": "reverse"}
