"""The figures of a scored run: the reliability diagram per type and the confidence histogram (evaluate and a
labeled batch run draw them), and a reliability diagram's series."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from decisionctl import plots
from decisionctl.core import metrics
from decisionctl.core.labeled import Prediction

RELIABILITY_PNG = "reliability.png"
HISTOGRAM_PNG = "confidence_hist.png"
HELDOUT_PNG = "reliability_heldout.png"


def reliability(preds: Sequence[Prediction]) -> plots.Reliability:
    """A reliability diagram's series: the predictions' ECE and their confidence bins."""
    bins = metrics.reliability_bins(preds)
    return plots.Reliability(
        cases=len(preds),
        ece=metrics.ece(preds),
        lower=[b.lower for b in bins],
        count=[b.count for b in bins],
        accuracy=[b.accuracy for b in bins],
        mean_confidence=[b.mean_confidence for b in bins],
    )


def write_plots(out: Path, preds: Sequence[Prediction], recommendation: dict[str, Any]) -> list[Path]:
    model = preds[0].model_sha256[:12] if preds and preds[0].model_sha256 else "unknown model"
    series = {"all types": preds, **metrics.by_type(preds)}
    plots.reliability_diagram(
        out / RELIABILITY_PNG,
        {label: reliability(members) for label, members in series.items()},
        title=f"Reliability, {len(preds)} cases ({model})",
        threshold=recommendation.get("automate_at_or_above"),
    )
    plots.confidence_histogram(
        out / HISTOGRAM_PNG,
        [p.confidence for p in preds if p.correct],
        [p.confidence for p in preds if not p.correct],
        title=f"Confidence of the predicted option ({model})",
        threshold=recommendation.get("automate_at_or_above"),
        review_band=recommendation.get("review_band"),
    )
    return [out / RELIABILITY_PNG, out / HISTOGRAM_PNG]


def write_heldout_plot(out: Path, before: Sequence[Prediction], after: Sequence[Prediction]) -> Path:
    """OUT/reliability_heldout.png: the held-out part of a calibration fit, as served and under the fitted
    temperature."""
    plots.reliability_diagram(
        out / HELDOUT_PNG,
        {"held-out, as served": reliability(before), "held-out, fitted temperature": reliability(after)},
        title=f"Held-out part ({len(before)} cases): before and after temperature",
    )
    return out / HELDOUT_PNG
