"""The one-dimensional search the calibration fits use (temperatures.py, intercepts.py), and the exponent's range."""

from __future__ import annotations

import math
from collections.abc import Callable

LOG_A_BOUNDS = (math.log(1e-2), math.log(1e2))  # the exponent a = T0 / T is searched over [1/100, 100]
_GOLDEN = (math.sqrt(5) - 1) / 2


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
