"""benchmarks/peer_bench.py's agreement between llama.cpp's server and the adapter on the same prompt (no servers:
rows as `run` writes them)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
try:
    import peer_bench
finally:
    sys.path.pop(0)


def test_agreement_counts_same_picks_and_how_near_a_tie_each_difference_is() -> None:
    llama = {
        "a": {"probs": [0.7, 0.3]},
        "b": {"probs": [0.2, 0.5, 0.3]},
        "c": {"probs": [0.51, 0.49]},
        "only-here": {"probs": [1.0, 0.0]},
    }
    adapter = {"a": {"probs": [0.6, 0.4]}, "b": {"probs": [0.1, 0.6, 0.3]}, "c": {"probs": [0.47, 0.53]}}
    same = peer_bench.agreement(llama, adapter)
    assert (same["requests"], same["same"]) == (3, 2)  # "only-here" was not answered by both
    assert same["max_gap"] == pytest.approx(0.06) and same["mean_gap"] == pytest.approx(0.06)  # c: 0.53 - 0.47
    assert peer_bench.agreement({}, {}) == {"requests": 0, "same": 0, "max_gap": 0.0, "mean_gap": 0.0}
