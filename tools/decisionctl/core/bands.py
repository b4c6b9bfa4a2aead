"""What `evaluate` certifies per question and per type: the cases each band is measured on, its thresholds and
certificate, the share of cases it automates at E, and the text it prints. No I/O.

A question is named by the hash the adapter puts in `x_options_sha256` (its type, instructions and options),
so the band written for it is the one served for it; a type's band pools every case of that type and serves
questions the cases never asked. Output names a question by its type, hash and first case id, never by its
wording (the instructions may quote customer data).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from decision_spec.contract import options_hash
from decision_spec.schemas import Question
from pydantic import TypeAdapter

from decisionctl.core import bounds, metrics
from decisionctl.core.labeled import Case, Prediction

_QUESTION: TypeAdapter[Any] = TypeAdapter(Question)


def question_key(question: Mapping[str, Any]) -> str:
    """The adapter's x_options_sha256 of a case's question: the key of its band in the policy."""
    return options_hash(_QUESTION.validate_python(dict(question)))


def question_keys(cases: Iterable[Case]) -> dict[str, str]:
    """Case id -> its question's key."""
    return {c.id: question_key(c.question) for c in cases}


def labels_sha256(preds: Sequence[Prediction]) -> str:
    """The label set a band was measured on: sha256 of its cases' ids and expected answers, in id order."""
    labels = sorted([p.id, p.options[p.expected_index]] for p in preds)
    return hashlib.sha256(json.dumps(labels, separators=(",", ":")).encode("utf-8")).hexdigest()


def _share(count: int, total: int) -> float:
    return count / total if total else 0.0


def certify_group(
    preds: Sequence[Prediction], *, max_error: float, confidence: float, review_accuracy: float, min_support: int
) -> dict[str, Any]:
    """One band's certification on its cases: thresholds, counts, shares, bounds, and the grid it searched."""
    conf = np.array([[p.confidence for p in preds]], dtype=np.float64)
    wrong = np.array([[not p.correct for p in preds]], dtype=bool)
    auto = bounds.certify_automate(conf, wrong, max_error=max_error, confidence=confidence)
    review_error = 1.0 - review_accuracy
    review = bounds.certify_review(conf, wrong, auto.index, max_error=review_error, confidence=confidence)
    n_cases = len(preds)
    grid: list[dict[str, Any]] = []
    for j, t in enumerate(bounds.GRID):
        n, k, level = int(auto.cases[0, j]), int(auto.errors[0, j]), float(auto.levels[0, j])
        grid.append(
            {
                "threshold": t,
                "cases": n,
                "share": _share(n, n_cases),
                "errors": k,
                "error": k / n if n else None,
                "level": level,
                "bound": bounds.upper_bound(k, n, level) if n else None,
                "certified": bool(auto.rejected[0, j]),
            }
        )
    i, r = int(auto.index[0]), int(review.index[0])
    automated = grid[i] if i >= 0 else None
    out: dict[str, Any] = {
        "cases": n_cases,
        "accuracy": metrics.accuracy(preds),
        "labels_sha256": labels_sha256(preds),
        "automate_at_or_above": automated["threshold"] if automated else None,
        "automate": _band(automated["cases"], automated["errors"], n_cases, automated["bound"]) if automated else None,
        "review_at_or_above": bounds.GRID[r] if r >= 0 else None,
        "review_max_error": review_error,
        "review": None,
        "grid": grid,
        "cases_needed": None if automated else needed(grid, max_error, confidence, min_support),
    }
    if r >= 0:
        n, k = int(review.cases[0, r]), int(review.errors[0, r])
        out["review"] = _band(n, k, n_cases, bounds.upper_bound(k, n, float(review.levels[0, r])))
    taken = (out["automate"] or {"cases": 0})["cases"] + (out["review"] or {"cases": 0})["cases"]
    out["abstain"] = {"cases": n_cases - taken, "share": _share(n_cases - taken, n_cases)}
    return out


def _band(cases: int, errors: int, total: int, bound: float | None) -> dict[str, Any]:
    return {
        "cases": cases,
        "share": _share(cases, total),
        "errors": errors,
        "error": errors / cases if cases else None,
        "bound": bound,
    }


def needed(grid: Sequence[Mapping[str, Any]], max_error: float, confidence: float, min_support: int) -> dict[str, Any]:
    """For a band that certified nothing: how many cases of it would certify, at the error measured at the
    threshold (with at least `min_support` cases) where that number is smallest. Counted at the level every
    threshold is sure to get, (1 - C) / m; None where every such threshold's error is at or above E."""
    level = (1.0 - confidence) / len(bounds.GRID)
    best: dict[str, Any] | None = None
    for row in grid:
        if row["cases"] < min_support:
            continue
        inside = bounds.cases_needed(row["errors"] / row["cases"], max_error, level)
        if inside is None:
            continue
        total = math.ceil(inside / row["share"])
        if best is None or total < best["cases"]:
            best = {"cases": total, "threshold": row["threshold"], "error": row["errors"] / row["cases"]}
    measured = [r["errors"] / r["cases"] for r in grid if r["cases"] >= min_support]
    return {
        "at_best": best,
        "lowest_error_measured": min(measured) if measured else None,
        "without_errors": bounds.cases_needed(0.0, max_error, level),
    }


def report(
    preds: Sequence[Prediction],
    keys: Mapping[str, str] | None,
    *,
    max_error: float,
    confidence: float,
    review_accuracy: float,
    min_support: int,
) -> dict[str, Any]:
    """Per question (where `keys` gives each case's question), per type, and overall: what is certified."""
    settings = {"max_error": max_error, "confidence": confidence, "review_accuracy": review_accuracy}

    def group(members: Sequence[Prediction]) -> dict[str, Any]:
        return certify_group(members, **settings, min_support=min_support)

    questions: dict[str, dict[str, Any]] = {}
    if keys is not None:
        members: dict[str, list[Prediction]] = {}
        for p in preds:
            members.setdefault(keys[p.id], []).append(p)
        for key, ps in members.items():
            questions[key] = {"type": ps[0].type, "first_case": ps[0].id, **group(ps)}
    types = {t: group(ps) for t, ps in metrics.by_type(preds).items()}
    return {
        "method": bounds.METHOD,
        **settings,
        "min_support": min_support,
        "questions": questions,
        "types": types,
        "overall": overall(list(questions.values()) or list(types.values()), len(preds)),
    }


def overall(bands: Sequence[Mapping[str, Any]], total: int) -> dict[str, Any]:
    """What the bands do together on their cases. The bound is the automated-weighted mean of the bands'
    bounds: it holds when every band's does (each at C on its own)."""
    automated = [b["automate"] for b in bands if b["automate"]]
    reviewed = [b["review"] for b in bands if b["review"]]
    n_auto, n_review = sum(a["cases"] for a in automated), sum(r["cases"] for r in reviewed)
    errors = sum(a["errors"] for a in automated)
    return {
        "cases": total,
        "bands": len(bands),
        "bands_automating": len(automated),
        "automate": _band(n_auto, errors, total, sum(a["bound"] * a["cases"] for a in automated) / n_auto)
        if n_auto
        else None,
        "review": _band(n_review, sum(r["errors"] for r in reviewed), total, None) if n_review else None,
        "abstain": {"cases": total - n_auto - n_review, "share": _share(total - n_auto - n_review, total)},
    }
