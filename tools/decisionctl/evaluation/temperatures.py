"""Per-type temperature fitted on labeled predictions, checked on a held-out part.

The adapter returns p = softmax(s / T0) with T0 the temperature in force (x_run). A new temperature
T gives p' proportional to p ** (T0 / T), so the exponent a = T0 / T is fitted on the returned
probabilities by minimising the negative log-likelihood of the expected options, and T = T0 / a.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from decision_adapter.manifest import Calibration

from decisionctl.evaluation import metrics
from decisionctl.evaluation.cases import Prediction, predicted_index

_FLOOR = 1e-12  # a probability the endpoint rounded to 0 still carries a finite (large) penalty
_LOG_A_BOUNDS = (math.log(1e-2), math.log(1e2))
_GOLDEN = (math.sqrt(5) - 1) / 2


def sharpen(probs: Sequence[float], exponent: float) -> list[float]:
    """p' proportional to p ** exponent, in log space so that tiny probabilities stay exact."""
    logs = [exponent * math.log(max(p, _FLOOR)) for p in probs]
    top = max(logs)
    weights = [math.exp(v - top) for v in logs]
    total = sum(weights)
    return [w / total for w in weights]


def rescale(pred: Prediction, exponent: float) -> Prediction:
    """The prediction as the endpoint would make it with temperature T0 / exponent."""
    probs = sharpen(pred.probs, exponent)
    predicted = predicted_index(pred.type, probs)
    return replace(
        pred,
        probs=probs,
        predicted_index=predicted,
        confidence=probs[predicted],
        temperature=pred.temperature / exponent,
        contract_confidence=None,
    )


def nll(preds: Sequence[Prediction], exponent: float) -> float:
    return -sum(math.log(max(sharpen(p.probs, exponent)[p.expected_index], _FLOOR)) for p in preds) / len(preds)


def golden_section(f: Callable[[float], float], lo: float, hi: float, tol: float = 1e-5) -> float:
    """Minimiser of a unimodal f on [lo, hi]."""
    x1, x2 = hi - _GOLDEN * (hi - lo), lo + _GOLDEN * (hi - lo)
    f1, f2 = f(x1), f(x2)
    while hi - lo > tol:
        if f1 <= f2:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - _GOLDEN * (hi - lo)
            f1 = f(x1)
        else:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + _GOLDEN * (hi - lo)
            f2 = f(x2)
    return (lo + hi) / 2


def fit_exponent(preds: Sequence[Prediction]) -> float:
    """The exponent a = T0 / T that minimises the negative log-likelihood (1.0 when there is nothing to fit)."""
    if not preds:
        return 1.0
    return math.exp(golden_section(lambda log_a: nll(preds, math.exp(log_a)), *_LOG_A_BOUNDS))


def split(preds: Sequence[Prediction], holdout: float, seed: int) -> tuple[list[Prediction], list[Prediction]]:
    """Per type, a seeded shuffle puts round(holdout * n) cases aside (at least one each side when n >= 2)."""
    rng = random.Random(seed)  # noqa: S311 (a reproducible split, not a secret)
    fit, held = [], []
    for group in metrics.by_type(sorted(preds, key=lambda p: p.id)).values():
        shuffled = list(group)
        rng.shuffle(shuffled)
        k = round(holdout * len(shuffled))
        if len(shuffled) >= 2:
            k = min(max(k, 1), len(shuffled) - 1)
        held += shuffled[:k]
        fit += shuffled[k:]
    return fit, held


def fit(preds: Sequence[Prediction], *, holdout: float = 0.4, seed: int = 0) -> dict[str, Any]:
    """Fit one temperature per type on the fit part and check it on the held-out part.

    A type's fitted temperature is applied only if it lowers that type's held-out ECE; otherwise the
    temperature in force is kept. (The held-out part then also chose what to apply, so the overall
    "after" figure is slightly optimistic: re-run evaluate on fresh cases to confirm.)
    """
    fit_part, held = split(preds, holdout, seed)
    fit_groups, held_groups = metrics.by_type(fit_part), metrics.by_type(held)
    per_type: dict[str, Any] = {}
    held_after: list[Prediction] = []
    for qtype, group in metrics.by_type(preds).items():
        temps = {p.temperature for p in group}
        if len(temps) != 1:
            raise ValueError(
                f"{qtype} predictions were made under different temperatures {sorted(temps)}: either the model "
                "sets them per option count (a manifest holds one per type: fit on cases with option counts in one "
                "bucket) or the endpoint's calibration changed during the run (re-run evaluate with --restart)"
            )
        t0 = temps.pop()
        exponent = fit_exponent(fit_groups.get(qtype, []))
        before = held_groups.get(qtype, [])
        ece_before, ece_fitted = metrics.ece(before), metrics.ece([rescale(p, exponent) for p in before])
        applied = ece_before is not None and ece_fitted is not None and ece_fitted < ece_before
        held_after += [rescale(p, exponent if applied else 1.0) for p in before]
        per_type[qtype] = {
            "temperature_before": t0,
            "fitted_temperature": t0 / exponent,
            "exponent": exponent,
            "at_search_bound": not _LOG_A_BOUNDS[0] + 1e-3 < math.log(exponent) < _LOG_A_BOUNDS[1] - 1e-3,
            "applied": applied,
            "temperature": t0 / exponent if applied else t0,
            "fit_cases": len(fit_groups.get(qtype, [])),
            "heldout_cases": len(before),
            "heldout_ece_before": ece_before,
            "heldout_ece_after": ece_fitted,
            "heldout_nll_before": nll(before, 1.0) if before else None,
            "heldout_nll_after": nll(before, exponent) if before else None,
        }
    ece_before, ece_after = metrics.ece(held), metrics.ece(held_after)
    return {
        "holdout": holdout,
        "seed": seed,
        "fit_cases": len(fit_part),
        "heldout_cases": len(held),
        "heldout_ece_before": ece_before,
        "heldout_ece_after": ece_after,
        "improved": ece_before is not None and ece_after is not None and ece_after < ece_before,
        "per_type": per_type,
        "heldout_before": held,
        "heldout_after": held_after,
    }


def to_calibration(result: dict[str, Any], provenance: dict[str, Any]) -> Calibration:
    temperatures = {t: round(v["temperature"], 6) for t, v in result["per_type"].items()}
    fitted_on = {
        **provenance,
        "holdout": result["holdout"],
        "seed": result["seed"],
        "fit_cases": result["fit_cases"],
        "heldout_cases": result["heldout_cases"],
        "heldout_ece_before": result["heldout_ece_before"],
        "heldout_ece_after": result["heldout_ece_after"],
        "applied": {t: v["applied"] for t, v in result["per_type"].items()},
    }
    return Calibration(temperature=temperatures, fitted_on=fitted_on)
