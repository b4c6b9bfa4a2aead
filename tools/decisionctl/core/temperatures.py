"""Per-type temperature fitted on labeled predictions, checked on a held-out part.

The adapter returns p = softmax(s / T0) with T0 the temperature in force (x_run). A new temperature
T gives p' proportional to p ** (T0 / T), so the exponent a = T0 / T is fitted on the returned
probabilities by minimising the negative log-likelihood of the expected options, and T = T0 / a. For
yes/no the temperature and an intercept on the log-odds of yes are also fitted together (intercepts.py).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

from decision_spec.manifest import Calibration

from decisionctl.core import intercepts, metrics
from decisionctl.core.labeled import Prediction
from decisionctl.core.picks import reanswered
from decisionctl.core.search import LOG_A_BOUNDS, golden_section

_FLOOR = 1e-12  # a probability the endpoint rounded to 0 still carries a finite (large) penalty


def sharpen(probs: Sequence[float], exponent: float) -> list[float]:
    """p' proportional to p ** exponent, in log space so that tiny probabilities stay exact."""
    logs = [exponent * math.log(max(p, _FLOOR)) for p in probs]
    top = max(logs)
    weights = [math.exp(v - top) for v in logs]
    total = sum(weights)
    return [w / total for w in weights]


def rescale(pred: Prediction, exponent: float) -> Prediction:
    """The prediction as the endpoint would make it with temperature T0 / exponent."""
    return reanswered(pred, sharpen(pred.probs, exponent), temperature=pred.temperature / exponent)


def nll(preds: Sequence[Prediction], exponent: float) -> float:
    return -sum(math.log(max(sharpen(p.probs, exponent)[p.expected_index], _FLOOR)) for p in preds) / len(preds)


def fit_exponent(preds: Sequence[Prediction]) -> float:
    """The exponent a = T0 / T that minimises the negative log-likelihood (1.0 when there is nothing to fit)."""
    if not preds:
        return 1.0
    return math.exp(golden_section(lambda log_a: nll(preds, math.exp(log_a)), *LOG_A_BOUNDS))


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


def fit(
    preds: Sequence[Prediction], *, holdout: float = 0.4, seed: int = 0, served_intercept: float = 0.0
) -> dict[str, Any]:
    """Fit one temperature per type on the fit part and check it on the held-out part; for yes/no also the
    temperature and an intercept together (intercepts.py). `served_intercept`: the yes/no intercept the answers
    were served with (x_run.calibration.intercept), taken off before anything is fitted.

    A type's fitted temperature is applied only if it lowers that type's held-out ECE; otherwise the
    temperature in force is kept. The yes/no pair is applied only if it lowers the held-out log-loss below what
    would be applied without it (the temperature alone, or the calibration in force): a proper score, which a
    temperature that flattens every answer to near 0.5 cannot win by hiding a lean, as it can win ECE. (The
    held-out part then also chose what to apply, so the overall "after" figure is slightly optimistic: re-run
    evaluate on fresh cases to confirm.)
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
        before = held_groups.get(qtype, [])
        b0 = served_intercept if qtype == "noul" else 0.0
        # a temperature is a power of the distribution only without an intercept: fitted where it is taken off
        fit_base = [intercepts.unshifted(p, b0) for p in fit_groups.get(qtype, [])]
        held_base = [intercepts.unshifted(p, b0) for p in before]
        exponent = fit_exponent(fit_base)
        ece_before, ece_fitted = metrics.ece(before), metrics.ece([rescale(p, exponent) for p in held_base])
        applied = ece_before is not None and ece_fitted is not None and ece_fitted < ece_before
        chosen = [rescale(p, exponent) for p in held_base] if applied else [rescale(p, 1.0) for p in before]
        per_type[qtype] = {
            "temperature_before": t0,
            "fitted_temperature": t0 / exponent,
            "exponent": exponent,
            "at_search_bound": not LOG_A_BOUNDS[0] + 1e-3 < math.log(exponent) < LOG_A_BOUNDS[1] - 1e-3,
            "applied": applied,
            "temperature": t0 / exponent if applied else t0,
            "fit_cases": len(fit_base),
            "heldout_cases": len(before),
            "heldout_ece_before": ece_before,
            "heldout_ece_after": ece_fitted,
            "heldout_nll_before": nll(before, 1.0) if before else None,
            "heldout_nll_after": nll(held_base, exponent) if before else None,
        }
        if qtype == "noul":
            without = ece_fitted if applied else ece_before  # reported beside the pair's; log-loss decides
            kept = 0.0 if applied else b0  # the intercept that applies without the pair
            pair, chosen = _fit_pair(fit_base, held_base, chosen, t0=t0, b0=b0, kept=kept, ece_without=without)
            per_type[qtype].update(pair)
        held_after += chosen
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


def _fit_pair(
    fit_base: list[Prediction],
    held_base: list[Prediction],
    chosen: list[Prediction],
    *,
    t0: float,
    b0: float,
    kept: float,
    ece_without: float | None,
) -> tuple[dict[str, Any], list[Prediction]]:
    """The yes/no temperature and intercept fitted together on the fit part (answers with the served intercept `b0`
    taken off), checked on the held-out part against `chosen` (what applies without the pair, whose intercept is
    `kept`) by log-loss: the report's fields, and the held-out answers as they would then be served."""
    pair = intercepts.fit_pair(fit_base)
    shifted = [intercepts.platt(p, pair.exponent, pair.intercept) for p in held_base]
    nll_pair = nll(shifted, 1.0) if shifted else None
    nll_without = nll(chosen, 1.0) if chosen else None
    applied = nll_pair is not None and nll_without is not None and nll_pair < nll_without
    report = {
        "intercept_before": b0,
        "pair_temperature": t0 / pair.exponent,
        "pair_exponent": pair.exponent,
        "pair_intercept": pair.intercept,
        "pair_at_search_bound": pair.at_search_bound,
        "heldout_ece_without_pair": ece_without,
        "heldout_ece_pair": metrics.ece(shifted),
        "heldout_nll_without_pair": nll_without,
        "heldout_nll_pair": nll_pair,
        "pair_applied": applied,
        "intercept": pair.intercept if applied else kept,
    }
    if applied:
        report["temperature"] = t0 / pair.exponent
    return report, shifted if applied else chosen


def to_calibration(result: dict[str, Any], provenance: dict[str, Any]) -> Calibration:
    temperatures = {t: round(v["temperature"], 6) for t, v in result["per_type"].items()}
    noul = result["per_type"].get("noul") or {}
    intercept = round(noul.get("intercept", 0.0), 6)
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
    if "pair_applied" in noul:  # the yes/no temperature and intercept fitted together, written or not
        fitted_on["intercept_fit"] = {
            "noul": {
                "temperature": round(noul["pair_temperature"], 6),
                "intercept": round(noul["pair_intercept"], 6),
                "heldout_ece_without": noul["heldout_ece_without_pair"],
                "heldout_ece_with": noul["heldout_ece_pair"],
                "heldout_nll_without": noul["heldout_nll_without_pair"],
                "heldout_nll_with": noul["heldout_nll_pair"],
                "applied": noul["pair_applied"],
            }
        }
    return Calibration(
        temperature=temperatures, fitted_on=fitted_on, intercept={"noul": intercept} if intercept else None
    )
