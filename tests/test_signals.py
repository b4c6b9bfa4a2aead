"""Label mass, the out-of-scope split and the option orders of each debiasing mode, on hand-made logits."""

from __future__ import annotations

import numpy as np
import pytest
from decision_adapter.signals import debias_mode, label_mass, option_orders, split_out_of_scope


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
