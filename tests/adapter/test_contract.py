"""The contract's formulas (decision-api.md), checked against hand-computed values."""

from __future__ import annotations

import math

import pytest
from decision_spec import contract


def test_choice_confidence_matches_the_formula() -> None:
    assert contract.choice_confidence([0.88, 0.12]) == pytest.approx((0.88 - 0.5) / 0.5)
    assert contract.choice_confidence([1 / 3] * 3) == pytest.approx(0.0)
    assert contract.choice_confidence([1.0, 0.0, 0.0, 0.0]) == pytest.approx(1.0)


def test_score_confidence_matches_the_documented_example() -> None:
    # decision-api.md: probabilities {0: 0.0, 1: 0.95, 2: 0.05} -> confidence 0.925
    assert contract.score_confidence([0.0, 0.95, 0.05]) == pytest.approx(0.925)
    assert contract.score_expectation([0.0, 0.95, 0.05]) == pytest.approx(1.05)


def test_uniform_spread_is_the_mean_distance_from_the_centre() -> None:
    assert contract.uniform_spread(3) == pytest.approx(2 / 3)
    assert contract.uniform_spread(4) == pytest.approx(1.0)


def test_score_confidence_is_clamped_at_zero_for_spread_distributions() -> None:
    assert contract.score_confidence([0.5, 0.0, 0.0, 0.0, 0.5]) == 0.0


def test_margin_and_distribution_checks() -> None:
    assert contract.margin([0.6, 0.3, 0.1]) == pytest.approx(0.3)
    assert contract.is_distribution([0.25, 0.75])
    assert not contract.is_distribution([0.5, 0.6])
    assert not contract.is_distribution([math.nan, 1.0])
