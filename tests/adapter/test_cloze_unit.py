"""Options scored by name (core/cloze.py): where the names part, what each read costs, the chain rule restricted to
the declared names, and the time an adversarial set of names takes to plan (linear in its tokens)."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from decision_adapter.core.cloze import branch_points, cloze_logprobs

END = 99
VOCAB = 100


def logits_from(table: dict[tuple[int, ...], dict[int, float]]):  # type: ignore[no-untyped-def]
    """Logits after a path: the table's values where it names a token, 0 elsewhere; each path asked for once."""
    asked: list[tuple[int, ...]] = []

    def after(path: tuple[int, ...]) -> np.ndarray:
        assert path not in asked, f"{path} read twice"
        asked.append(path)
        out = np.zeros(VOCAB)
        for token, value in table.get(path, {}).items():
            out[token] = value
        return out

    after.asked = asked  # type: ignore[attr-defined]
    return after


def test_names_part_at_the_root_and_where_one_name_ends_and_another_goes_on() -> None:
    names = [(1, 2, 3), (1, 2, 4), (5,), (1, 2)]
    assert branch_points(names, END) == {(): [1, 5], (1, 2): [3, 4, END]}
    assert branch_points([(7,), (8,), (9,)], END) == {(): [7, 8, 9]}  # one token each: the lettered case
    assert branch_points([(7, 1, 2, 3), (8, 1)], END) == {(): [7, 8]}  # told apart by their first tokens
    assert branch_points([(0, 1, 2, 3), (0, 1, 5)], END) == {(0, 1): [2, 5]}  # a shared start costs no root choice


def test_the_chain_rule_restricted_to_the_names_where_they_part() -> None:
    names = [(1, 2, 3), (1, 2, 4), (5,), (1, 2)]
    table = {(): {1: 2.0, 5: 0.5, 42: 3.0}, (1, 2): {3: 1.0, 4: -1.0, END: 0.0}}
    after = logits_from(table)
    logprobs, mass = cloze_logprobs(names, branch_points(names, END), END, after)
    root = [2.0, 0.5]
    inner = [1.0, -1.0, 0.0]

    def lsm(xs: list[float], i: int) -> float:
        return xs[i] - math.log(sum(math.exp(x) for x in xs))

    expected = [lsm(root, 0) + lsm(inner, 0), lsm(root, 0) + lsm(inner, 1), lsm(root, 1), lsm(root, 0) + lsm(inner, 2)]
    assert logprobs.tolist() == pytest.approx(expected, abs=1e-12)
    assert float(np.exp(logprobs).sum()) == pytest.approx(1.0, abs=1e-12)
    assert after.asked == [(), (1, 2)]  # type: ignore[attr-defined]
    whole_root = sum(math.exp(v) for v in (2.0, 0.5, 3.0)) + (VOCAB - 3)  # every other token has logit 0
    whole_inner = sum(math.exp(v) for v in (1.0, -1.0, 0.0)) + (VOCAB - 3)
    p1 = math.exp(2.0) / whole_root
    assert mass == pytest.approx(p1 * (math.exp(1.0) + math.exp(-1.0) + 1.0) / whole_inner + math.exp(0.5) / whole_root)


def test_names_that_are_equal_or_empty_are_refused() -> None:
    with pytest.raises(ValueError, match="distinct"):
        branch_points([(1, 2), (1, 2)], END)
    with pytest.raises(ValueError, match="non-empty"):
        branch_points([(1,), ()], END)


def test_long_names_that_part_only_at_their_last_token_plan_in_time_linear_in_their_tokens() -> None:
    """Ten score levels of 20,000 tokens each that differ only in the last (a caller's long, near-equal level texts):
    one branch point, 19,999 tokens deep. Planning walks each name once; a prefix tuple made at every trie node
    would make 2 billion tuple elements, and a name compared at every depth as many."""
    names = [(*([7] * 19_999), level) for level in range(10)]
    start = time.perf_counter()
    points = branch_points(names, END)
    logprobs, _ = cloze_logprobs(names, points, END, lambda path: np.zeros(VOCAB))
    took = time.perf_counter() - start
    assert list(points) == [tuple([7] * 19_999)]  # one read, of 19,999 tokens
    assert np.exp(logprobs).tolist() == pytest.approx([0.1] * 10)
    assert took < 1.0, f"planning ten long names took {took:.2f} s"


def test_a_chain_of_names_each_the_start_of_the_next_branches_once_per_name() -> None:
    """255 names of 1..255 tokens, each the start of the next: 254 branch points and 32,385 tokens to read, which
    the request budget refuses before anything is read (tests/adapter/test_engine_unit.py)."""
    names = [tuple([7] * n) for n in range(1, 256)]
    points = branch_points(names, END)
    assert len(points) == 254 and sum(map(len, points)) == sum(range(1, 255))
    assert all(tokens == [END, 7] for tokens in points.values())
