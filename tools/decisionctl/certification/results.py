"""results.json of a labeled run (metrics, recommendation, certification after scoring) and the automation figures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from decision_spec.manifest import sha256_file

from decisionctl import plots, tables
from decisionctl.certification import bands
from decisionctl.evaluation import metrics, scoring
from decisionctl.evaluation.cases import Case

AUTOMATION_DIR = "automation"  # one figure per band: automated share against error, bound and threshold


def evaluation_results(
    run: scoring.Run,
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


def write_automation_plots(out: Path, certification: Mapping[str, Any]) -> list[Path]:
    """OUT/automation/<band>.png for every question and type band: automated share against error."""
    folder = out / AUTOMATION_DIR
    folder.mkdir(parents=True, exist_ok=True)
    e, c = certification["max_error"], certification["confidence"]
    figures = {
        **{f"{q['type']}-{key}": (tables.question_name(key, q), q) for key, q in certification["questions"].items()},
        **{f"type-{t}": (f"{t} (type band)", b) for t, b in certification["types"].items()},
    }
    written = []
    for stem, (name, band) in figures.items():
        path = folder / f"{stem}.png"
        plots.automation_curve(path, band, title=f"{name}: {band['cases']} cases", max_error=e, confidence=c)
        written.append(path)
    return written
