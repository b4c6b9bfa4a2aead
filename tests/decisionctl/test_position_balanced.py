"""The position-balanced labeled set: what benchmarks/position_balanced.py writes, a valid evaluate file,
and balanced (every slot right equally often for each option count), or its position shares mean nothing."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from decisionctl.core.cases import load_cases

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tools" / "decisionctl" / "data" / "position_balanced.jsonl"


def test_the_committed_set_is_the_scripts_output() -> None:
    script = ROOT / "benchmarks" / "position_balanced.py"
    proc = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_slot_is_right_equally_often_for_each_option_count() -> None:
    cases = load_cases(DATA)
    assert 60 <= len(cases) <= 120
    assert {c.type for c in cases} == {"choice"}
    by_count: dict[int, Counter[int]] = {}
    for c in cases:
        by_count.setdefault(len(c.options), Counter())[c.expected_index] += 1
    assert sorted(by_count) == [3, 4, 5, 6]
    for n, slots in by_count.items():
        assert sorted(slots) == list(range(n)), n
        assert len(set(slots.values())) == 1, (n, slots)
    # each option is right in more than one slot, so an option's name does not stand in for its position
    slots_of: dict[tuple[str, str], set[int]] = {}
    for c in cases:
        family = c.id.split("-slot")[0].rsplit("-", 1)[0]
        slots_of.setdefault((family, c.options[c.expected_index]), set()).add(c.expected_index)
    assert all(len(s) == 2 for s in slots_of.values())
