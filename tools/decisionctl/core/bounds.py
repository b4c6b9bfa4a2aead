"""Certified thresholds: exact binomial (Clopper-Pearson) tests run by the fallback procedure over a fixed
descending grid, so the error among automated cases is at most E with probability C out of sample.

Pure functions on numpy arrays, no I/O. Every function takes a leading axis of independent labeled sets
(one set when evaluate calls it, thousands in the validity simulation), so the two run the same code.

For a threshold t, the cases at or above it are, given how many there are (n), independent draws of the
traffic at or above t; the wrong ones among them (k) are Binomial(n, r(t)), r(t) the error rate the
threshold would have out of sample. p(t) = P(Binomial(n, E) <= k) is then a valid p-value for "r(t) > E".
The fallback procedure (Wiens 2003) tests the grid from the highest threshold down: each threshold has its
own share (1 - C)/m of the error budget, plus the level of the threshold just above when that one was
certified. The chance that any threshold whose r(t) exceeds E is certified is at most 1 - C whatever the
data, so the lowest certified threshold, chosen from the same cases, keeps the guarantee. The review band
is tested the same way below the automate threshold, with the budget split over every place that
threshold could have landed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from decision_spec.contract import TOLERANCE

METHOD = "fallback-clopper-pearson/1"
# Fixed before any data: fine near 1 where small errors live, coarse below. Descending: the test order.
GRID: tuple[float, ...] = (
    0.999,
    0.995,
    0.99,
    0.985,
    0.98,
    0.97,
    0.96,
    0.95,
    0.94,
    0.92,
    0.90,
    0.88,
    0.85,
    0.80,
    0.75,
    0.70,
    0.60,
    0.50,
    0.40,
    0.0,
)

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def binomial_cdf(k: npt.ArrayLike, n: npt.ArrayLike, p: float) -> FloatArray:
    """P(Binomial(n, p) <= k), elementwise and exact up to float rounding (log-space terms, one row per n)."""
    k_arr, n_arr = np.asarray(k, dtype=np.int64), np.asarray(n, dtype=np.int64)
    k_arr, n_arr = np.broadcast_arrays(k_arr, n_arr)
    if not 0.0 < p < 1.0:
        raise ValueError(f"a binomial probability strictly between 0 and 1, got {p}")
    out = np.where(k_arr < 0, 0.0, 1.0)
    inside = (k_arr >= 0) & (k_arr < n_arr)
    if not inside.any():
        return out
    top = int(n_arr[inside].max())
    log_fact = np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, top + 1, dtype=np.float64)))))
    log_p, log_q = math.log(p), math.log1p(-p)
    for n_value in np.unique(n_arr[inside]):
        i = np.arange(n_value + 1)
        terms = log_fact[n_value] - log_fact[i] - log_fact[n_value - i] + i * log_p + (n_value - i) * log_q
        row = np.minimum(np.cumsum(np.exp(terms)), 1.0)
        where = inside & (n_arr == n_value)
        out[where] = row[k_arr[where]]
    return out


def upper_bound(errors: int, cases: int, level: float) -> float:
    """The exact (Clopper-Pearson) upper confidence bound at 1 - `level` on an error rate seen as `errors` of
    `cases`: the p with P(Binomial(cases, p) <= errors) = level (the Beta(errors + 1, cases - errors) quantile
    at 1 - level); 1 with no cases or all wrong. It is at most E exactly when p-value(E) <= level."""
    if cases == 0 or errors >= cases:
        return 1.0
    low, high = errors / cases, 1.0
    for _ in range(200):
        mid = 0.5 * (low + high)
        if float(binomial_cdf(errors, cases, mid)) > level:
            low = mid
        else:
            high = mid
        if high - low < 1e-12:
            break
    return high


def counts(
    conf: npt.ArrayLike, wrong: npt.ArrayLike, grid: npt.ArrayLike, upper: npt.ArrayLike | None = None
) -> tuple[IntArray, IntArray]:
    """Per set and threshold: cases with confidence at or above it (and below `upper`, one per set), and the
    wrong ones among them. conf and wrong: (sets, cases); grid: (m,); returns two (sets, m) arrays."""
    c, w, g = np.atleast_2d(conf), np.atleast_2d(np.asarray(wrong, dtype=bool)), np.asarray(grid, dtype=np.float64)
    inside = c[:, :, None] >= g[None, None, :] - TOLERANCE
    if upper is not None:
        u = np.broadcast_to(np.asarray(upper, dtype=np.float64), (c.shape[0],))
        inside &= (c < u[:, None] - TOLERANCE)[:, :, None]
    return inside.sum(axis=1).astype(np.int64), (inside & w[:, :, None]).sum(axis=1).astype(np.int64)


def fallback(
    pvalues: FloatArray, budget: FloatArray | float, active: BoolArray | None = None
) -> tuple[BoolArray, FloatArray]:
    """The fallback procedure along the last axis (the test order): which hypotheses are rejected (certified)
    and the level each was tested at. `budget` (per set) is split evenly over the `active` columns."""
    p = np.atleast_2d(pvalues)
    on = np.ones(p.shape, dtype=bool) if active is None else np.atleast_2d(active)
    share = np.broadcast_to(np.asarray(budget, dtype=np.float64), (p.shape[0],)) / np.maximum(on.sum(axis=1), 1)
    rejected = np.zeros(p.shape, dtype=bool)
    levels = np.zeros(p.shape, dtype=np.float64)
    carried = np.zeros(p.shape[0], dtype=np.float64)
    for j in range(p.shape[1]):
        level = np.where(on[:, j], share + carried, 0.0)
        rejected[:, j] = on[:, j] & (p[:, j] <= level)
        levels[:, j] = level
        carried = np.where(rejected[:, j], level, 0.0)
    return rejected, levels


@dataclass(frozen=True)
class Certified:
    """What the certification found for each set: the grid index chosen (-1: none) and, per threshold, the
    counts, the p-value and the level it was tested at. Arrays with a leading axis of sets."""

    index: IntArray
    cases: IntArray
    errors: IntArray
    pvalues: FloatArray
    levels: FloatArray
    rejected: BoolArray


def _lowest_rejected(rejected: BoolArray) -> IntArray:
    m = rejected.shape[1]
    last = m - 1 - np.argmax(rejected[:, ::-1], axis=1)
    return np.where(rejected.any(axis=1), last, -1).astype(np.int64)


def certify_automate(
    conf: npt.ArrayLike, wrong: npt.ArrayLike, *, max_error: float, confidence: float, grid: tuple[float, ...] = GRID
) -> Certified:
    """The lowest grid threshold whose automated cases have error <= max_error with probability `confidence`."""
    n, k = counts(conf, wrong, grid)
    p = binomial_cdf(k, n, max_error)
    rejected, levels = fallback(p, 1.0 - confidence)
    return Certified(_lowest_rejected(rejected), n, k, p, levels, rejected)


def certify_review(
    conf: npt.ArrayLike,
    wrong: npt.ArrayLike,
    automate_index: npt.ArrayLike,
    *,
    max_error: float,
    confidence: float,
    grid: tuple[float, ...] = GRID,
) -> Certified:
    """The review band [t, automate threshold): the lowest grid t below the automate threshold whose band has
    error <= max_error with probability `confidence`. The band's top edge was chosen from the same cases, so
    the budget is split over its m + 1 possible places (a grid value, or none automated)."""
    g = np.asarray(grid, dtype=np.float64)
    top = np.atleast_1d(np.asarray(automate_index, dtype=np.int64))
    upper = np.where(top >= 0, g[np.maximum(top, 0)], np.inf)
    n, k = counts(conf, wrong, grid, upper)
    active = np.arange(len(grid))[None, :] > top[:, None]
    p = np.where(active, binomial_cdf(k, n, max_error), 1.0)
    rejected, levels = fallback(p, (1.0 - confidence) / (len(grid) + 1), active)
    return Certified(_lowest_rejected(rejected), n, k, p, levels, rejected)


def cases_needed(error_rate: float, max_error: float, level: float, limit: int = 1_000_000) -> int | None:
    """About the fewest cases at `error_rate` (errors rounded down) whose bound at `level` is at most
    max_error (a bisection: the rounding makes the test step by one error); None when the rate is not below
    max_error (no number of such cases certifies it) or the count passes `limit`."""
    if error_rate >= max_error:
        return None

    def certifies(n: int) -> bool:
        return float(binomial_cdf(math.floor(error_rate * n + 1e-9), n, max_error)) <= level

    high = 1
    while not certifies(high):
        high *= 2
        if high > limit:
            return None
    low = high // 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if certifies(mid) else (mid, high)
    return high
