"""results.json of a labeled run: its metrics, coverage and recommendation, and what is certified after scoring
(bands.py); evaluate and a labeled batch run write it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from decision_spec.manifest import sha256_file

from decisionctl.core import bands, metrics
from decisionctl.core.labeled import Case, Run

RESULTS = "results.json"


def evaluation_results(
    run: Run,
    cases: Sequence[Case] | int,
    cases_path: Path,
    *,
    target_accuracy: float,
    min_support: int,
    review_accuracy: float = 0.5,
    max_error: float = 0.05,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """results.json: metrics, coverage, the point-estimate recommendation, and what is certified at
    `max_error` with probability `confidence` (per question where the cases are given, per type, overall)."""
    count = cases if isinstance(cases, int) else len(cases)  # a count: bulk runs never hold every case
    keys = None if isinstance(cases, int) else bands.question_keys(cases)
    return {
        "cases_file": str(cases_path),
        "cases_sha256": sha256_file(cases_path),
        "cases": count,
        "scored": len(run.predictions),
        "complete": len(run.predictions) == count,
        "sent_this_run": run.sent,
        "reused_from_earlier_runs": run.skipped,
        "identity": run.identity,
        "confidence": "probability of the predicted option; noul: max(p, 1 - p) with yes predicted when p >= 0.5",
        "brier": "mean over cases of the sum over declared options of (p - y)^2 (noul: yes and no), range 0..2",
        **metrics.report(run.predictions, target_accuracy, min_support=min_support, review_accuracy=review_accuracy),
        "certification": bands.report(
            run.predictions,
            keys,
            max_error=max_error,
            confidence=confidence,
            review_accuracy=review_accuracy,
            min_support=min_support,
        ),
        "predictions": [p.to_json() for p in run.predictions],
        "errors": run.errors,
    }


def write_results(out: Path, results: dict[str, Any]) -> Path:
    path = out / RESULTS
    path.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path
