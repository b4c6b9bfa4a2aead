"""The adaptive mode's stopping rule: when the rotations not yet read can no longer change an answer.

`DECISION_ORDER_DEBIAS=adaptive` reads a question's N cyclic rotations one by one in
`signals.rotation_sequence`'s order and averages the per-order option distributions (after the slot
prior, where one is in force), as `rotations` does with all N. After k reads with sums S_i (option i's
probability summed over the orders read), each unread order is a distribution, so each of its
components lies in [0, 1] and the average over all N lies in

    lo_i = S_i / N  <=  m_i  <=  hi_i = (S_i + N - k) / N.

The answer reports F(m): the temperature applied, f_i = m_i^a / sum_j m_j^a with a = 1/T over the
declared options (an added out-of-scope option's share over all n + 1). The unread orders add
U = (N - k) / N of mass in all, split any way among the options. f_i rises with m_i and falls with every
other m_j, so f_i is largest with all of U on option i, and smallest with none of it there and U
spread over the others to make sum_{j != i} m_j^a largest: on one option where a >= 1 (the sum is convex),
levelled up from the smallest where a < 1 (concave). Both bounds are attained, so they are exact. The
bound is taken on the probabilities as reported (temperature applied), not on the raw average: a
temperature below 1 sharpens the answer and moves a reported probability further than the average moves.

Reading stops after k orders when both hold:
- the pick cannot change: lo_top > hi_j for every other declared option j (top: the highest S_i);
- no reported probability can move by more than the tolerance: |F(S/k)_i - f_i| <= tolerance for each
  bound f_i above.
With k = N nothing is unread and the answer is exactly the `rotations` answer. The pick condition needs
S_top - S_j > N - k, and S_top - S_j <= k, so no question stops before k = floor(N/2) + 1 orders; for
a near-zero option the probability condition needs (N - k) / N <= tolerance at T = 1.

A yes/no intercept b (calibration.py) maps the reported yes probability f to sigmoid(logit(f) + b), and no to
1 minus that: both maps rise, so the bounds' images are the exact bounds of the shifted answer, and the pick
(yes at 0.5) cannot change only if the shifted yes interval does not straddle 0.5 (required on top of the pick
condition above). A yes/no question alone has N = 2 orders and never stops before both; with an added
out-of-scope option it has 3 and may stop after 2, which is where this matters.
"""

from __future__ import annotations

import numpy as np
from decision_spec.contract import shift_log_odds

from .core.signals import Vector


def reported(mean: Vector, temperature: float, *, out_of_scope: bool, intercept: float = 0.0) -> Vector:
    """F(m): the probabilities an answer reports from the mean distribution m, as the engine computes them:
    the declared options among themselves (a yes/no intercept added to the first's log-odds over the second's),
    then (out of scope) the added option's share among all."""
    logs = _scaled_logs(mean, temperature)
    declared = logs[:-1] if out_of_scope else logs
    out = np.exp(declared - np.logaddexp.reduce(declared))
    if intercept:
        out[0], out[1] = shift_log_odds(out[0], out[1], intercept)
    if out_of_scope:
        out = np.append(out, np.exp(logs[-1] - np.logaddexp.reduce(logs)))
    return np.asarray(out, dtype=np.float64)


def settled(
    read_sum: Vector,
    k: int,
    total: int,
    *,
    tolerance: float,
    temperature: float,
    out_of_scope: bool,
    intercept: float = 0.0,
) -> bool:
    """Whether the N - k orders not read can neither change the pick nor move any reported probability by
    more than `tolerance` (module doc). `read_sum`: option i's probability summed over the k orders read;
    `intercept`: a yes/no answer's (options yes, no first), 0 for every other."""
    if k >= total:
        return True
    s = np.asarray(read_sum, dtype=np.float64)
    lo, unread = s / total, (total - k) / total
    n_declared = len(s) - 1 if out_of_scope else len(s)
    top = int(np.argmax(s[:n_declared]))
    others = [j for j in range(n_declared) if j != top]
    if others and not lo[top] > max(lo[j] + unread for j in others):
        return False
    now = reported(s / k, temperature, out_of_scope=out_of_scope, intercept=intercept)
    groups = [(i, list(range(n_declared))) for i in range(n_declared)]
    if out_of_scope:
        groups.append((len(s) - 1, list(range(len(s)))))
    a = 1.0 / temperature
    for slot, (i, group) in enumerate(groups):
        rest = [j for j in group if j != i]
        highest = _share(lo[i] + unread, lo[rest], a)
        lowest = _share(lo[i], _spread(lo[rest], unread, a), a)
        if intercept and slot < 2:  # yes (slot 0) shifted by b, no by -b: rising maps keep the bounds exact
            b = intercept if slot == 0 else -intercept
            highest, lowest = shift_log_odds(highest, 1.0 - highest, b)[0], shift_log_odds(lowest, 1.0 - lowest, b)[0]
            if slot == 0 and lowest < 0.5 <= highest:  # the shifted pick could still go either way
                return False
        if max(highest - now[slot], now[slot] - lowest) > tolerance:
            return False
    return True


def _spread(rest: Vector, mass: float, a: float) -> Vector:
    """`rest` with `mass` added where it makes sum(m ** a) largest: all on the largest for a >= 1, else levelled
    up from the smallest (water-filling: the concave sum gains most where m is smallest)."""
    out = np.array(rest, dtype=np.float64)
    if len(out) == 0:
        return out
    if a >= 1.0:
        out[int(np.argmax(out))] += mass
        return out
    order = np.sort(out)
    level, left = order[0], mass
    for idx in range(len(order)):
        nxt = order[idx + 1] if idx + 1 < len(order) else np.inf
        need = (nxt - level) * (idx + 1)
        if need >= left:
            level += left / (idx + 1)
            break
        left -= need
        level = nxt
    return np.asarray(np.maximum(out, level), dtype=np.float64)


def _share(own: float, rest: Vector, a: float) -> float:
    """own^a / (own^a + sum rest^a), in logs so that a sharp temperature does not underflow."""
    if len(rest) == 0:
        return 1.0
    if own <= 0.0:
        return 0.0
    with np.errstate(divide="ignore"):
        others = a * np.log(np.asarray(rest, dtype=np.float64))
    return float(1.0 / (1.0 + np.exp(np.logaddexp.reduce(others) - a * np.log(own))))


def _scaled_logs(m: Vector, temperature: float) -> Vector:
    with np.errstate(divide="ignore"):
        return np.asarray(np.log(np.asarray(m, dtype=np.float64)) / temperature, dtype=np.float64)
