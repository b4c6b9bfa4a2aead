"""What the predictions on a labeled set say: accuracy, macro-F1, Brier, ECE, and thresholds to act on.

Pure functions, no I/O. "Confidence" here is the probability of the predicted option (for noul,
max(p, 1 - p)): the number a reliability diagram can hold against the observed accuracy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from decision_spec import contract

from decisionctl.core.labeled import Prediction

ECE_BINS = 10
THRESHOLD_GRID = tuple(round(0.05 * i, 2) for i in range(20))  # 0.00, 0.05, ..., 0.95


def accuracy(preds: Sequence[Prediction]) -> float | None:
    return sum(p.correct for p in preds) / len(preds) if preds else None


def brier(preds: Sequence[Prediction]) -> float | None:
    """Mean over cases of sum_i (p_i - y_i)^2 over the declared options (noul: yes, no), in [0, 2]."""
    if not preds:
        return None
    total = 0.0
    for p in preds:
        total += sum((q - (1.0 if i == p.expected_index else 0.0)) ** 2 for i, q in enumerate(p.probs))
    return total / len(preds)


@dataclass(frozen=True)
class Bin:
    lower: float
    upper: float
    count: int
    accuracy: float | None
    mean_confidence: float | None


def reliability_bins(preds: Sequence[Prediction], n_bins: int = ECE_BINS) -> list[Bin]:
    """Equal-width bins on confidence; bin k holds [k/n, (k+1)/n), the last one also 1.0."""
    members: list[list[Prediction]] = [[] for _ in range(n_bins)]
    for p in preds:
        members[min(int(p.confidence * n_bins), n_bins - 1)].append(p)
    bins = []
    for k, group in enumerate(members):
        acc = sum(p.correct for p in group) / len(group) if group else None
        conf = sum(p.confidence for p in group) / len(group) if group else None
        bins.append(Bin(k / n_bins, (k + 1) / n_bins, len(group), acc, conf))
    return bins


def ece(preds: Sequence[Prediction], n_bins: int = ECE_BINS) -> float | None:
    """Expected calibration error: sum over bins of (bin size / N) * |accuracy - mean confidence|."""
    if not preds:
        return None
    return sum(
        b.count / len(preds) * abs(b.accuracy - b.mean_confidence)
        for b in reliability_bins(preds, n_bins)
        if b.accuracy is not None and b.mean_confidence is not None
    )


def macro_f1(preds: Sequence[Prediction]) -> float | None:
    """Mean F1 over every option name expected or predicted (options of different questions pooled by name)."""
    if not preds:
        return None
    names = {p.options[p.expected_index] for p in preds} | {p.options[p.predicted_index] for p in preds}
    scores = []
    for name in sorted(names):
        tp = sum(1 for p in preds if p.options[p.predicted_index] == name and p.correct)
        fp = sum(1 for p in preds if p.options[p.predicted_index] == name and not p.correct)
        fn = sum(1 for p in preds if p.options[p.expected_index] == name and not p.correct)
        scores.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
    return sum(scores) / len(scores)


def wilson_lower(correct: int, n: int, z: float = 1.96) -> float | None:
    """Lower end of the 95% Wilson interval: how low the accuracy could plausibly be on so few cases."""
    if n == 0:
        return None
    phat = correct / n
    centre = phat + z * z / (2 * n)
    spread = z * math.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n))
    return max(0.0, (centre - spread) / (1 + z * z / n))


def coverage_table(preds: Sequence[Prediction], grid: Sequence[float] = THRESHOLD_GRID) -> list[dict[str, Any]]:
    """For each threshold t: the share of cases with confidence >= t, and the accuracy on them."""
    rows = []
    for t in grid:
        kept = [p for p in preds if p.confidence >= t - 1e-12]
        correct = sum(p.correct for p in kept)
        rows.append(
            {
                "threshold": t,
                "covered": len(kept),
                "coverage": len(kept) / len(preds) if preds else 0.0,
                "accuracy": correct / len(kept) if kept else None,
                "accuracy_lower95": wilson_lower(correct, len(kept)),
            }
        )
    return rows


def recommend(
    preds: Sequence[Prediction],
    target_accuracy: float,
    *,
    min_support: int = 5,
    review_accuracy: float = 0.5,
    grid: Sequence[float] = THRESHOLD_GRID,
) -> dict[str, Any]:
    """Act automatically at or above the lowest threshold whose covered cases reach the target accuracy.

    Below it, the review band reaches down to the lowest threshold at which the band's cases (at least
    `min_support`) are still right `review_accuracy` of the time (the suggestion helps a reviewer);
    below the band the model abstains and the case is handled without its suggestion.
    """
    n = len(preds)
    auto = None
    for row in coverage_table(preds, grid):
        if row["covered"] >= min_support and row["accuracy"] is not None and row["accuracy"] >= target_accuracy:
            auto = row
            break
    auto_t = auto["threshold"] if auto else None
    ceiling = auto_t if auto_t is not None else math.inf
    review_floor = None
    for t in grid:
        band = [p for p in preds if t - 1e-12 <= p.confidence < ceiling - 1e-12]
        if len(band) >= min_support and sum(p.correct for p in band) / len(band) >= review_accuracy:
            review_floor = t
            break
    floor = review_floor if review_floor is not None else math.inf
    in_review = [p for p in preds if floor - 1e-12 <= p.confidence < ceiling - 1e-12]
    abstained = [p for p in preds if p.confidence < min(floor, ceiling) - 1e-12]
    abstain = len(abstained)
    return {
        "target_accuracy": target_accuracy,
        "min_support": min_support,
        "review_accuracy": review_accuracy,
        "automate_at_or_above": auto_t,
        "automate": {
            "cases": auto["covered"],
            "coverage": auto["coverage"],
            "accuracy": auto["accuracy"],
            "accuracy_lower95": auto["accuracy_lower95"],
        }
        if auto
        else None,
        "review_band": [review_floor, auto_t if auto_t is not None else 1.0] if review_floor is not None else None,
        "review": {
            "cases": len(in_review),
            "coverage": len(in_review) / n if n else 0.0,
            "accuracy": accuracy(in_review),
        },
        "abstain_below": review_floor,
        "abstain": {"cases": abstain, "coverage": abstain / n if n else 0.0, "accuracy": accuracy(abstained)},
    }


def summary(preds: Sequence[Prediction]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "cases": len(preds),
        "accuracy": accuracy(preds),
        "brier": brier(preds),
        "ece": ece(preds),
        "mean_confidence": sum(p.confidence for p in preds) / len(preds) if preds else None,
    }
    if preds and all(p.type == "choice" for p in preds):
        out["macro_f1"] = macro_f1(preds)
    return out


def by_type(preds: Sequence[Prediction]) -> dict[str, list[Prediction]]:
    groups: dict[str, list[Prediction]] = {}
    for p in preds:
        groups.setdefault(p.type, []).append(p)
    return {t: groups[t] for t in contract.QUESTION_TYPES if t in groups}


def report(
    preds: Sequence[Prediction], target_accuracy: float, min_support: int = 5, review_accuracy: float = 0.5
) -> dict[str, Any]:
    """Everything `evaluate` reports, overall and per question type."""
    groups = by_type(preds)

    def rec(group: Sequence[Prediction]) -> dict[str, Any]:
        return recommend(group, target_accuracy, min_support=min_support, review_accuracy=review_accuracy)

    return {
        "metrics": {"overall": summary(preds), **{t: summary(g) for t, g in groups.items()}},
        "reliability": [vars(b) for b in reliability_bins(preds)],
        "coverage": {"overall": coverage_table(preds), **{t: coverage_table(g) for t, g in groups.items()}},
        "recommendation": {
            "overall": rec(preds),
            **{t: rec(g) for t, g in groups.items()},
        },
    }
