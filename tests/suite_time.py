"""Where a test run's wall time goes, per test directory: tests, seconds (setup, call and teardown), model decode."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from tests.model_time import ModelTime


def directory_of(nodeid: str) -> str:
    """`tests/adapter/test_x.py::test_y[1]` -> `tests/adapter`; a test file at the top -> `tests`."""
    path = nodeid.split("::", 1)[0]
    return path.rsplit("/", 1)[0] if "/" in path else "."


def by_directory(reports: Iterable[Any], model_time: ModelTime) -> list[str]:
    """One line per directory, slowest first, and a total: the reports' phase durations summed (a module fixture's
    set-up is charged to the first test that asked for it) and the model decode charged to those tests."""
    wall: dict[str, float] = defaultdict(float)
    tests: dict[str, set[str]] = defaultdict(set)
    for report in reports:
        nodeid = getattr(report, "nodeid", "")
        if not nodeid or getattr(report, "when", None) not in ("setup", "call", "teardown"):
            continue
        directory = directory_of(nodeid)
        wall[directory] += report.duration
        tests[directory].add(nodeid)
    decode: dict[str, float] = defaultdict(float)
    for nodeid, cost in model_time.by_test.items():
        if "::" in nodeid:
            decode[directory_of(nodeid)] += cost.seconds
    lines = [f"{'directory':<24} {'tests':>6} {'seconds':>9} {'decode s':>9}"]
    for directory in sorted(wall, key=lambda d: -wall[d]):
        lines.append(f"{directory:<24} {len(tests[directory]):>6} {wall[directory]:>9.1f} {decode[directory]:>9.1f}")
    total_tests = sum(len(t) for t in tests.values())
    lines.append(f"{'all':<24} {total_tests:>6} {sum(wall.values()):>9.1f} {sum(decode.values()):>9.1f}")
    return lines
