"""Label mass, the out-of-scope split, the option orders of each debiasing mode and the adaptive stopping rule,
on hand-made logits and distributions."""

from __future__ import annotations

import numpy as np
import pytest
from decision_adapter.adaptive import reported, settled
from decision_adapter.core.signals import (
    label_mass,
    option_orders,
    order_name,
    rotation_sequence,
    split_out_of_scope,
)
from decision_spec.contract import debias_mode


def test_label_mass_is_the_full_vocabulary_probability_of_the_labels() -> None:
    logits = np.log(np.array([0.5, 0.2, 0.1, 0.1, 0.1]))
    assert label_mass(logits, [(1,), (2,)]) == pytest.approx(0.3)
    assert label_mass(logits + 7.0, [(0,), (1,), (2,), (3,), (4,)]) == pytest.approx(1.0)


def test_two_letter_codes_take_the_chain_rule() -> None:
    first = np.log(np.array([0.6, 0.3, 0.1]))
    second = {0: np.log(np.array([0.5, 0.25, 0.25])), 1: np.log(np.array([0.1, 0.1, 0.8]))}
    # codes (0,1), (0,2), (1,2): 0.6 * 0.25 + 0.6 * 0.25 + 0.3 * 0.8
    assert label_mass(first, [(0, 1), (0, 2), (1, 2)], second) == pytest.approx(0.3 + 0.24)
    with pytest.raises(ValueError, match="two-token labels"):
        label_mass(first, [(0, 1)])


def test_out_of_scope_keeps_the_declared_options_summing_to_one() -> None:
    scores = np.log(np.array([0.4, 0.2, 0.1, 0.3]))  # three declared, then "none of these"
    declared, p_out = split_out_of_scope(scores, 1.0)
    assert p_out == pytest.approx(0.3)
    assert declared.sum() == pytest.approx(1.0, abs=1e-12)
    assert declared == pytest.approx([4 / 7, 2 / 7, 1 / 7])
    hot, p_hot = split_out_of_scope(scores, 2.0)  # the temperature applies to all n + 1
    assert p_hot == pytest.approx(0.3**0.5 / sum(p**0.5 for p in (0.4, 0.2, 0.1, 0.3)))
    assert hot.sum() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize(
    ("raw", "mode"),
    [("true", "reverse"), ("false", "off"), ("ROTATIONS", "rotations"), ("reverse", "reverse"), (True, "reverse")],
)
def test_debias_settings_keep_their_meaning(raw: str | bool, mode: str) -> None:
    assert debias_mode(raw) == mode


def test_an_unknown_debias_setting_names_the_choices() -> None:
    with pytest.raises(ValueError, match="off, reverse, rotations"):
        debias_mode("all")


def test_rotations_put_every_option_in_every_slot_once() -> None:
    orders = option_orders(4, "rotations", debias_max_options=26, rotation_max_options=8)
    assert orders[0] == [0, 1, 2, 3] and len(orders) == 4
    for slot in range(4):
        assert sorted(order[slot] for order in orders) == [0, 1, 2, 3]
    # rotating the input rotates the set of orders onto itself: the same readings, so the same answer
    shifted = {tuple((i + 1) % 4 for i in order) for order in orders}
    assert shifted == {tuple(o) for o in orders}


def test_long_lists_fall_back_from_rotations_to_reverse_then_to_one_order() -> None:
    kw = {"debias_max_options": 26, "rotation_max_options": 6}
    assert option_orders(7, "rotations", **kw) == [list(range(7)), list(range(6, -1, -1))]
    assert option_orders(30, "rotations", **kw) == [list(range(30))]
    assert option_orders(3, "reverse", **kw) == [[0, 1, 2], [2, 1, 0]]
    assert option_orders(3, "off", **kw) == [[0, 1, 2]]


def test_adaptive_reads_the_rotations_in_a_fixed_spread_order() -> None:
    kw = {"debias_max_options": 26, "rotation_max_options": 8}
    assert rotation_sequence(6) == [0, 3, 1, 4, 2, 5]
    for n in range(1, 9):
        adaptive = option_orders(n, "adaptive", **kw)
        assert sorted(map(tuple, adaptive)) == sorted(map(tuple, option_orders(n, "rotations", **kw)))
        assert adaptive[0] == list(range(n)) and adaptive == option_orders(n, "adaptive", **kw)
    assert option_orders(9, "adaptive", **kw) == [list(range(9)), list(range(8, -1, -1))]


def test_orders_are_named_as_answers_report_them() -> None:
    assert order_name([0, 1, 2], 3) == "given"
    assert order_name([2, 1, 0], 3) == "reversed"
    assert order_name([1, 2, 0], 3) == "rotation:1"
    assert order_name([2, 0, 1, 3], 3) == "rotation:2"  # the out-of-scope option stays last
    assert order_name([0, 4, 5], 6) is None  # a chunk of the options, not an order of all


def test_nothing_unread_is_always_settled_and_one_read_of_a_near_tie_never_is() -> None:
    kw = {"temperature": 1.0, "out_of_scope": False}
    assert settled(np.array([0.4, 0.6]), 1, 1, tolerance=0.01, **kw)
    assert not settled(np.array([0.98, 0.01, 0.01]), 1, 3, tolerance=1.0, **kw)  # the pick needs k > N / 2
    assert settled(np.array([1.9, 0.05, 0.05]), 2, 3, tolerance=0.34, **kw)
    assert not settled(np.array([1.9, 0.05, 0.05]), 2, 3, tolerance=0.3, **kw)  # 1/3 could still move


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("out_of_scope", [False, True])
def test_a_settled_answer_is_within_the_tolerance_of_every_way_the_unread_orders_could_go(
    temperature: float, out_of_scope: bool
) -> None:
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(200):
        n = int(rng.integers(3, 7))
        k = int(rng.integers(1, n))
        # orders read alike, around one sharp distribution: a decisive model, where the rule can stop early
        reads = rng.dirichlet(50 * rng.dirichlet(np.full(n, 0.3)) + 0.01, size=k)
        tolerance = 0.4
        if not settled(
            reads.sum(axis=0), k, n, tolerance=tolerance, temperature=temperature, out_of_scope=out_of_scope
        ):
            continue
        checked += 1
        now = reported(reads.mean(axis=0), temperature, out_of_scope=out_of_scope)
        declared = n - 1 if out_of_scope else n
        for _ in range(50):  # unread orders drawn anywhere on the simplex, the extreme ones included
            unread = rng.dirichlet(np.full(n, float(rng.choice([0.05, 1.0]))), size=n - k)
            full = reported(np.vstack([reads, unread]).mean(axis=0), temperature, out_of_scope=out_of_scope)
            assert np.argmax(full[:declared]) == np.argmax(now[:declared])
            assert np.max(np.abs(full - now)) <= tolerance + 1e-12
    assert checked > 10  # the rule did stop early on these decisive reads
