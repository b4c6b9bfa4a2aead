"""The yes/no temperature and intercept fitted together on labeled predictions (Platt scaling on the log-odds).

The adapter returns p_yes = sigmoid(z / T0 + b0), with T0 and b0 the temperature and intercept in force
(x_run.calibration; b0 = 0 where it reports none). With b0 taken off, s = logit(p_yes) - b0 = z / T0 is known
from the answer alone, and a temperature T with an intercept b give p' = sigmoid(a s + b), a = T0 / T. (a, b)
minimise the negative log-likelihood of the expected answers. That likelihood is convex in (a, b), so the best b
for a given a (golden-section search) leaves a unimodal profile in a, searched the same way over log a; then
T = T0 / a. Options are in the order yes, no (decisionctl.core.labeled).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from decision_spec.contract import MAX_INTERCEPT, shift_log_odds

from decisionctl.core.labeled import Prediction
from decisionctl.core.picks import reanswered
from decisionctl.core.search import LOG_A_BOUNDS, golden_section

_FLOOR = 1e-12  # as temperatures._FLOOR: a probability rounded to 0 or 1 keeps a finite log-odds
_B_BOUNDS = (-MAX_INTERCEPT, MAX_INTERCEPT)  # the manifest's bound: nothing wider could be written


@dataclass(frozen=True)
class PairFit:
    exponent: float  # a = T0 / T
    intercept: float  # b
    at_search_bound: bool  # a or b at the edge of its search range: the answers carry little usable signal


def log_odds(pred: Prediction) -> float:
    """logit(p_yes) of a yes/no prediction, from both of its probabilities (so that neither end loses digits)."""
    yes, no = (min(max(p, _FLOOR), 1.0) for p in pred.probs[:2])
    return math.log(yes) - math.log(no)


def with_log_odds(pred: Prediction, z: float, *, temperature: float) -> Prediction:
    """The prediction as the endpoint would make it with log-odds of yes z, under `temperature`."""
    yes, no = shift_log_odds(1.0, 1.0, z)  # sigmoid(z), sigmoid(-z)
    return reanswered(pred, [yes, no], temperature=temperature)


def unshifted(pred: Prediction, served_intercept: float) -> Prediction:
    """The prediction as it would have been served without the intercept in force (its temperature kept)."""
    if not served_intercept:
        return pred
    return with_log_odds(pred, log_odds(pred) - served_intercept, temperature=pred.temperature)


def platt(pred: Prediction, exponent: float, intercept: float) -> Prediction:
    """An unshifted prediction (served without an intercept) as the endpoint would make it under the temperature
    T0 / exponent and the intercept b: p_yes = sigmoid(exponent * s + b)."""
    return with_log_odds(pred, exponent * log_odds(pred) + intercept, temperature=pred.temperature / exponent)


def nll(preds: Sequence[Prediction], exponent: float, intercept: float) -> float:
    """Mean negative log-likelihood of the expected answers under (a, b), on unshifted predictions."""
    s, sign = _arrays(preds)
    return _nll(s, sign, exponent, intercept)


def fit_pair(preds: Sequence[Prediction]) -> PairFit:
    """(a, b) minimising the negative log-likelihood on unshifted yes/no predictions ((1, 0) with none)."""
    if not preds:
        return PairFit(1.0, 0.0, False)
    s, sign = _arrays(preds)

    def best_b(a: float) -> float:
        return golden_section(lambda b: _nll(s, sign, a, b), *_B_BOUNDS)

    def profile(log_a: float) -> float:
        a = math.exp(log_a)
        return _nll(s, sign, a, best_b(a))

    exponent = math.exp(golden_section(profile, *LOG_A_BOUNDS))
    intercept = best_b(exponent)
    bound = not (
        LOG_A_BOUNDS[0] + 1e-3 < math.log(exponent) < LOG_A_BOUNDS[1] - 1e-3
        and _B_BOUNDS[0] + 1e-3 < intercept < _B_BOUNDS[1] - 1e-3
    )
    return PairFit(exponent, intercept, bound)


def _arrays(preds: Sequence[Prediction]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Each prediction's log-odds of yes, and +1 where yes is expected, -1 where no is."""
    s = np.array([log_odds(p) for p in preds], dtype=np.float64)
    sign = np.array([1.0 if p.expected_index == 0 else -1.0 for p in preds], dtype=np.float64)
    return s, sign


def _nll(s: npt.NDArray[np.float64], sign: npt.NDArray[np.float64], a: float, b: float) -> float:
    return float(np.mean(np.logaddexp(0.0, -sign * (a * s + b))))
